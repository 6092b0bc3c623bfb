# storkd: the per-node training daemon.
sbin_PROGRAMS += daemon/storkd
daemon_storkd_SOURCES = daemon/storkd.c
daemon_storkd_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS) $(UCX_CFLAGS) $(BLAS_CFLAGS)
daemon_storkd_LDADD = $(STORKD_LIBS)
# the stacks a hang leaves in the rank logs name storkd's own functions
daemon_storkd_LDFLAGS = -rdynamic

# The daemon's parts as an archive, so that stork-engine (stork bench,
# export, check) and the tests link the same code as storkd. Each folder
# adds its files in its own local.mk: daemon/node (what both daemons do to
# start a node), daemon/program (storkd-program's supervisor) and the
# engine's folders (daemon/engine/local.mk).
noinst_LIBRARIES += daemon/libstorkd.a
daemon_libstorkd_a_SOURCES =
daemon_libstorkd_a_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(PMIX_CFLAGS)
STORKD_LIBS = daemon/libstorkd.a daemon/libdata.a $(ENGINE_LIBS) $(COMM_LIBS) $(RDV_LIBS) \
	lib/libstork_slurm.a lib/libstork_bind.la lib/libstork.la $(SLURM_LIBS) $(XXHASH_LIBS)

include daemon/node/local.mk
include daemon/program/local.mk
include daemon/engine/local.mk
