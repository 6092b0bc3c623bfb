# lib/rendezvous.mk: the step's rendezvous (lib/rendezvous.h), PMIx or TCP.
# An archive of its own, not part of libstork: libstork is linked into the
# SPANK plugin, which must not pull libpmix into srun and slurmstepd. Link
#   $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)
# (RDV_LIBS brings libpmix; libslurm gives slurm_hostlist_*).
noinst_LIBRARIES += lib/librendezvous.a
lib_librendezvous_a_SOURCES = \
	lib/rendezvous.c lib/rendezvous.h lib/rendezvous_impl.h \
	lib/rendezvous_tcp.c lib/rendezvous_pmix.c
lib_librendezvous_a_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS) $(HWLOC_CFLAGS)
RDV_LIBS = lib/librendezvous.a $(PMIX_LIBS) -lm -lpthread
