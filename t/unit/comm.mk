# t/unit/comm.mk: the collectives (check_comm) and the training data
# loader and `stork prep` (check_data).
check_PROGRAMS += t/unit/check_comm
TESTS += t/unit/check_comm
t_unit_check_comm_SOURCES = t/unit/check_comm.c
t_unit_check_comm_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_comm_LDADD = $(UNIT_LIBS)
