# daemon/engine/data/local.mk: the token-shard data loader
# (daemon/engine/data/data.h). An archive of its own so that storkd, the
# engine and the unit tests link the same code; link it before
# lib/libstork.la.
noinst_LIBRARIES += daemon/libdata.a
daemon_libdata_a_SOURCES = daemon/engine/data/data.c daemon/engine/data/data.h
