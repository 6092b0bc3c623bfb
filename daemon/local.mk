# storkd: the per-node training daemon.
sbin_PROGRAMS += daemon/storkd
daemon_storkd_SOURCES = daemon/storkd.c
daemon_storkd_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(UCX_CFLAGS) $(BLAS_CFLAGS)
daemon_storkd_LDADD = $(STORKD_LIBS)
# the stacks a hang leaves in the rank logs name storkd's own functions
daemon_storkd_LDFLAGS = -rdynamic

# storkd-program: the per-node daemon of `stork run -- PROGRAM`, which runs
# the user's program and links no engine (no CUDA, BLAS or NCCL): the
# collectives' host part only (COMM_HOST_LIBS), the rendezvous, the node's
# start.
pkglibexec_PROGRAMS += daemon/storkd-program
daemon_storkd_program_SOURCES = daemon/storkd_program.c
daemon_storkd_program_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(UCX_CFLAGS)
daemon_storkd_program_LDADD = daemon/libstorkd.a $(COMM_HOST_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS)

# The daemon's parts as an archive, so that stork-engine (stork bench,
# export, check) and the tests link the same code as storkd.
noinst_LIBRARIES += daemon/libstorkd.a
daemon_libstorkd_a_SOURCES = \
	daemon/train.c daemon/train.h daemon/train_rank.h daemon/train_device.c \
	daemon/train_checkpoint.c daemon/train_checkpoint_local.c \
	daemon/train_guard.c daemon/spike.c daemon/spike.h \
	daemon/ckpt_writer.c daemon/ckpt_writer.h \
	daemon/hang_report.c daemon/hang_report.h \
	daemon/preflight_probe.c daemon/preflight_probe.h \
	daemon/preflight_verdict.c daemon/preflight_verdict.h \
	daemon/pipeline.c daemon/pipeline.h \
	daemon/zero.c daemon/zero.h \
	daemon/layout_cost.c daemon/layout_cost.h \
	daemon/checkpoint.c daemon/checkpoint.h daemon/checkpoint_format.h \
	daemon/checkpoint_reshard.c \
	daemon/rank_log.c daemon/rank_log.h \
	daemon/join.c daemon/join.h \
	daemon/node_result.c daemon/node_result.h \
	daemon/node.c daemon/node.h \
	daemon/program.c daemon/program.h \
	daemon/program_env.c daemon/program_env.h \
	daemon/program_error.c daemon/program_error.h \
	daemon/program_output.c daemon/program_output.h
daemon_libstorkd_a_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS)
STORKD_LIBS = daemon/libstorkd.a daemon/libdata.a $(ENGINE_LIBS) $(COMM_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS) $(XXHASH_LIBS)

# The training engine (model, optimizer, data) is an archive of its own so
# that unit tests link the same code as storkd. Its parts add their files in
# their fragments.
include daemon/engine.mk
include daemon/data.mk
