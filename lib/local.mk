# libstork: everything two or more programs share (plugin, launcher, daemon).
# Built as a libtool convenience library so the plugin can link it PIC.
noinst_LTLIBRARIES += lib/libstork.la
lib_libstork_la_SOURCES = \
	lib/exit_codes.h \
	lib/log.c lib/log.h \
	lib/rng.h \
	lib/version.c lib/version.h \
	lib/rundir.c lib/rundir.h
lib_libstork_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(YAML_CFLAGS)
lib_libstork_la_LIBADD = $(HWLOC_LIBS) $(YAML_LIBS) -lpthread

# Each area of lib/ adds its files in its own fragment.
include lib/bind.mk
include lib/config.mk
include lib/comm.mk
