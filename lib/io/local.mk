# lib/io/local.mk: low-level I/O (in lib/libstork.la): whole reads and
# writes, crash-safe file replacement, large files past the page cache,
# a user's private directory on a shared node, large allocations.
lib_libstork_la_SOURCES += \
	lib/io/io.c lib/io/io.h \
	lib/io/atomic_file.c lib/io/atomic_file.h \
	lib/io/direct_write.c lib/io/direct_write.h \
	lib/io/private_dir.c lib/io/private_dir.h \
	lib/io/big_alloc.h
