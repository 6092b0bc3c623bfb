# lib/config/local.mk: see lib/local.mk.
# The configuration (stork.yaml), the JSON files of the run directory,
# crash-safe file replacement and the whole reads and writes under it
# (large files past the page cache: direct_write).
lib_libstork_la_SOURCES += \
	lib/config/stork_config.c lib/config/stork_config.h \
	lib/formats/stork_json.c lib/formats/stork_json.h \
	lib/run/hang_explain.c lib/run/hang_explain.h \
	lib/io/atomic_file.c lib/io/atomic_file.h \
	lib/io/io.c lib/io/io.h \
	lib/io/direct_write.c lib/io/direct_write.h
