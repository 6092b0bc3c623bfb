# daemon/program/local.mk: storkd-program, the per-node daemon of `stork run
# -- PROGRAM`, and the supervisor of the user's rank programs (in
# daemon/libstorkd.a, where the tests link it).
# storkd-program: the per-node daemon of `stork run -- PROGRAM`, which runs
# the user's program and links no engine (no CUDA, BLAS or NCCL): the
# collectives' host part only (COMM_HOST_LIBS), the rendezvous, the node's
# start.
pkglibexec_PROGRAMS += daemon/storkd-program
daemon_storkd_program_SOURCES = daemon/program/storkd_program.c
daemon_storkd_program_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(UCX_CFLAGS)
daemon_storkd_program_LDADD = daemon/libstorkd.a $(COMM_HOST_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS)

daemon_libstorkd_a_SOURCES += \
	daemon/program/program.c daemon/program/program.h \
	daemon/program/program_env.c daemon/program/program_env.h \
	daemon/program/program_error.c daemon/program/program_error.h \
	daemon/program/program_output.c daemon/program/program_output.h \
	daemon/program/pmix_host.c daemon/program/pmix_host.h \
	daemon/program/rank_usage.c daemon/program/rank_usage.h
