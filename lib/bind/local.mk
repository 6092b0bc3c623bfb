# lib/bind/local.mk: the node topology and the binding plan (see lib/local.mk),
# the only part of lib/ the SPANK plugin links. Link
#   lib/libstork_bind.la $(SLURM_LIBS)
# bind_first_host calls libslurm's slurm_hostlist_*: programs add
# $(SLURM_LIBS); the SPANK plugin gets them from the Slurm process that
# loads it (linking libslurm into a plugin is not safe).
noinst_LTLIBRARIES += lib/libstork_bind.la
lib_libstork_bind_la_SOURCES = \
	lib/bind/topology.c lib/bind/topology.h \
	lib/bind/bind.c lib/bind/bind.h
lib_libstork_bind_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
lib_libstork_bind_la_LIBADD = $(HWLOC_LIBS)
