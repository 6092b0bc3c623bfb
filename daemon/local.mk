# storkd: the per-node training daemon.
sbin_PROGRAMS += daemon/storkd
daemon_storkd_SOURCES = daemon/storkd.c
daemon_storkd_LDADD = lib/libstork.la $(KERNELS_LIBS)
