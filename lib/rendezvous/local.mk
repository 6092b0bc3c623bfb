# lib/rendezvous/local.mk: the step's rendezvous (lib/rendezvous/rendezvous.h), PMIx or TCP.
# An archive of its own, not part of libstork: only storkd and stork-engine
# (stork bench comm) meet the other nodes; stork and the SPANK plugin must
# not load libpmix. Link
#   $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)
# (RDV_LIBS brings libpmix and lib/libstork_bind.la, whose bind_first_host
# and bind_master_port it uses; libslurm gives slurm_hostlist_*).
noinst_LIBRARIES += lib/librendezvous.a
lib_librendezvous_a_SOURCES = \
	lib/rendezvous/rendezvous.c lib/rendezvous/rendezvous.h lib/rendezvous/rendezvous_impl.h \
	lib/rendezvous/rendezvous_common.c \
	lib/rendezvous/rendezvous_tcp.c lib/rendezvous/rendezvous_pmix.c \
	lib/rendezvous/rendezvous_auth.c lib/rendezvous/rendezvous_auth.h
lib_librendezvous_a_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS) $(HWLOC_CFLAGS) $(MUNGE_CFLAGS) \
	$(CRYPTO_CFLAGS)
RDV_LIBS = lib/librendezvous.a lib/libstork_bind.la $(PMIX_LIBS) $(MUNGE_LIBS) $(CRYPTO_LIBS) \
	-lm -lpthread
