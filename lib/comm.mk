# lib/comm.mk: the collectives interface (lib/comm.h), its in-node
# shared-memory backend and its UCX backend between processes.
lib_libstork_la_SOURCES += \
	lib/comm.c lib/comm.h lib/comm_backend.h \
	lib/comm_shm.c lib/comm_ucx.c
lib_libstork_la_CFLAGS += $(UCX_CFLAGS)
lib_libstork_la_LIBADD += $(UCX_LIBS)
