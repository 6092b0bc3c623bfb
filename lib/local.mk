# libstork: everything two or more programs share (plugin, launcher, daemon).
noinst_LTLIBRARIES += lib/libstork.la
lib_libstork_la_SOURCES = \
	lib/log.c lib/log.h \
	lib/version.c lib/version.h \
	lib/exit_codes.h
lib_libstork_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(YAML_CFLAGS)
lib_libstork_la_LIBADD = $(HWLOC_LIBS) $(YAML_LIBS)
