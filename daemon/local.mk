# storkd: the per-node training daemon.
sbin_PROGRAMS += daemon/storkd
daemon_storkd_SOURCES = daemon/storkd.c
daemon_storkd_LDADD = lib/libstork.la $(KERNELS_LIBS)

# The training engine (model, optimizer, data) is an archive of its own so
# that unit tests link the same code as storkd. Its parts add their files in
# their fragments.
include daemon/engine.mk
include daemon/data.mk
