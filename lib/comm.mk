# lib/comm.mk: the collectives interface (lib/comm.h) and its in-node
# shared-memory backend.
lib_libstork_la_SOURCES += \
	lib/comm.c lib/comm.h lib/comm_backend.h \
	lib/comm_shm.c
