# lib/config.mk: see lib/local.mk.
# The configuration (stork.yaml), the JSON files of the run directory,
# crash-safe file replacement and the whole reads and writes under it
# (large files past the page cache: direct_write).
lib_libstork_la_SOURCES += \
	lib/stork_config.c lib/stork_config.h \
	lib/stork_json.c lib/stork_json.h \
	lib/hang_explain.c lib/hang_explain.h \
	lib/atomic_file.c lib/atomic_file.h \
	lib/io.c lib/io.h \
	lib/direct_write.c lib/direct_write.h
