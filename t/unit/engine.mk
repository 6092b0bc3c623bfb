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
check_PROGRAMS += t/unit/check_grad_sync
TESTS += t/unit/check_grad_sync
t_unit_check_grad_sync_SOURCES = t/unit/check_grad_sync.c
t_unit_check_grad_sync_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_grad_sync_LDADD = $(ENGINE_LIBS) $(UNIT_LIBS)
check_PROGRAMS += t/unit/check_program
TESTS += t/unit/check_program
t_unit_check_program_SOURCES = t/unit/check_program.c
t_unit_check_program_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
t_unit_check_program_LDADD = daemon/libstorkd.a $(UNIT_LIBS)
check_PROGRAMS += t/unit/check_reshard
TESTS += t/unit/check_reshard
t_unit_check_reshard_SOURCES = t/unit/check_reshard.c
t_unit_check_reshard_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
t_unit_check_reshard_LDADD = $(STORKD_LIBS) $(CHECK_LIBS)
check_PROGRAMS += t/unit/check_preflight
TESTS += t/unit/check_preflight
t_unit_check_preflight_SOURCES = t/unit/check_preflight.c
t_unit_check_preflight_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_preflight_LDADD = $(STORKD_LIBS) $(CHECK_LIBS)
check_PROGRAMS += t/unit/check_spike
TESTS += t/unit/check_spike
t_unit_check_spike_SOURCES = t/unit/check_spike.c
t_unit_check_spike_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
t_unit_check_spike_LDADD = $(STORKD_LIBS) $(CHECK_LIBS)
check_PROGRAMS += t/unit/check_layout_cost
TESTS += t/unit/check_layout_cost
t_unit_check_layout_cost_SOURCES = t/unit/check_layout_cost.c
t_unit_check_layout_cost_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_layout_cost_LDADD = daemon/libstorkd.a $(ENGINE_LIBS) $(UNIT_LIBS)
if HAVE_CUDA
# The register-tile attention kernels themselves, on the CPU
# (t/unit/warp_emulation.h): C++, with the CUDA toolkit's bf16 header.
check_PROGRAMS += t/unit/check_attention_mma
TESTS += t/unit/check_attention_mma
t_unit_check_attention_mma_SOURCES = t/unit/check_attention_mma.cc t/unit/warp_emulation.h
t_unit_check_attention_mma_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
t_unit_check_attention_mma_CXXFLAGS = -std=c++17 -pthread -fno-strict-aliasing -Wall -Wextra \
	-Werror -Wno-unknown-pragmas $(CHECK_CFLAGS)
t_unit_check_attention_mma_LDADD = $(CHECK_LIBS) -lpthread -lm
endif
# daemon/node/nvml.c against a fake libnvidia-ml, a shared object built for it.
check_LTLIBRARIES += t/unit/libfake_nvml.la
t_unit_libfake_nvml_la_SOURCES = t/unit/fake_nvml.c
t_unit_libfake_nvml_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
check_PROGRAMS += t/unit/check_nvml
TESTS += t/unit/check_nvml
t_unit_check_nvml_SOURCES = t/unit/check_nvml.c
t_unit_check_nvml_CFLAGS = $(UNIT_CFLAGS) -DFAKE_NVML='"$(abs_top_builddir)/t/unit/.libs/libfake_nvml.so"'
t_unit_check_nvml_LDADD = daemon/libstorkd.a $(UNIT_LIBS) -ldl
t/unit/check_nvml.$(OBJEXT) t/unit/t_unit_check_nvml-check_nvml.$(OBJEXT): t/unit/libfake_nvml.la
