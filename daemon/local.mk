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
daemon_storkd_program_SOURCES = daemon/program/storkd_program.c
daemon_storkd_program_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(UCX_CFLAGS)
daemon_storkd_program_LDADD = daemon/libstorkd.a $(COMM_HOST_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS)

# The daemon's parts as an archive, so that stork-engine (stork bench,
# export, check) and the tests link the same code as storkd.
noinst_LIBRARIES += daemon/libstorkd.a
daemon_libstorkd_a_SOURCES = \
	daemon/engine/train/train.c daemon/engine/train/train.h daemon/engine/train/train_rank.h daemon/engine/train/train_device.c \
	daemon/engine/checkpoint/train_checkpoint.c daemon/engine/checkpoint/train_checkpoint_local.c \
	daemon/engine/train/train_guard.c daemon/engine/train/spike.c daemon/engine/train/spike.h \
	daemon/engine/checkpoint/ckpt_writer.c daemon/engine/checkpoint/ckpt_writer.h \
	daemon/engine/train/hang_report.c daemon/engine/train/hang_report.h \
	daemon/engine/train/preflight_probe.c daemon/engine/train/preflight_probe.h \
	daemon/engine/train/preflight_verdict.c daemon/engine/train/preflight_verdict.h \
	daemon/engine/parallel/pipeline.c daemon/engine/parallel/pipeline.h \
	daemon/engine/parallel/zero.c daemon/engine/parallel/zero.h \
	daemon/engine/parallel/layout_cost.c daemon/engine/parallel/layout_cost.h \
	daemon/engine/checkpoint/checkpoint.c daemon/engine/checkpoint/checkpoint.h daemon/engine/checkpoint/checkpoint_format.h \
	daemon/engine/checkpoint/checkpoint_reshard.c \
	daemon/node/rank_log.c daemon/node/rank_log.h \
	daemon/node/join.c daemon/node/join.h \
	daemon/node/node_result.c daemon/node/node_result.h \
	daemon/node/node.c daemon/node/node.h \
	daemon/program/program.c daemon/program/program.h \
	daemon/program/program_env.c daemon/program/program_env.h \
	daemon/program/program_error.c daemon/program/program_error.h \
	daemon/program/program_output.c daemon/program/program_output.h
daemon_libstorkd_a_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS)
STORKD_LIBS = daemon/libstorkd.a daemon/libdata.a $(ENGINE_LIBS) $(COMM_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS) $(XXHASH_LIBS)

# The training engine (model, optimizer, data) is an archive of its own so
# that unit tests link the same code as storkd. Its parts add their files in
# their fragments.
include daemon/engine/local.mk
include daemon/engine/data/local.mk
