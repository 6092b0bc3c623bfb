# lib/bind.mk: the node topology and the binding plan (see lib/local.mk).
# bind_first_host calls libslurm's slurm_hostlist_*: programs that link
# libstork add $(SLURM_LIBS); the SPANK plugin gets them from the Slurm
# process that loads it (linking libslurm into a plugin is not safe).
lib_libstork_la_SOURCES += \
	lib/topology.c lib/topology.h \
	lib/bind.c lib/bind.h
