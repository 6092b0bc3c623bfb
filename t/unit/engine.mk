# t/unit/engine.mk: the training engine's unit tests (see t/local.mk).
check_PROGRAMS += t/unit/check_kernels t/unit/check_model
TESTS += t/unit/check_kernels t/unit/check_model
t_unit_check_kernels_SOURCES = t/unit/check_kernels.c
t_unit_check_kernels_CFLAGS = $(UNIT_CFLAGS) $(BLAS_CFLAGS)
t_unit_check_kernels_LDADD = $(ENGINE_LIBS) $(UNIT_LIBS)
t_unit_check_model_SOURCES = t/unit/check_model.c
t_unit_check_model_CFLAGS = $(UNIT_CFLAGS) $(BLAS_CFLAGS)
t_unit_check_model_LDADD = $(ENGINE_LIBS) $(UNIT_LIBS)
check_PROGRAMS += t/unit/check_node_result
TESTS += t/unit/check_node_result
t_unit_check_node_result_SOURCES = t/unit/check_node_result.c
t_unit_check_node_result_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
t_unit_check_node_result_LDADD = daemon/libstorkd.a $(UNIT_LIBS)
