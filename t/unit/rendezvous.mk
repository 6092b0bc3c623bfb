# t/unit/rendezvous.mk: the rendezvous over TCP on 127.0.0.1, the task
# layout and the parameters from a Slurm task's environment (see t/local.mk).
check_PROGRAMS += t/unit/check_rendezvous
TESTS += t/unit/check_rendezvous
t_unit_check_rendezvous_SOURCES = t/unit/check_rendezvous.c
t_unit_check_rendezvous_CFLAGS = $(UNIT_CFLAGS) $(HWLOC_CFLAGS) -DMUNGED='"$(MUNGED)"'
t_unit_check_rendezvous_LDADD = $(RDV_LIBS) $(UNIT_LIBS) $(SLURM_LIBS)

# One launcher of a rendezvous, run by t/integration/rendezvous.bats.
check_PROGRAMS += t/integration/rdv_probe
t_integration_rdv_probe_SOURCES = t/integration/rdv_probe.c
t_integration_rdv_probe_CFLAGS = $(AM_CFLAGS)
t_integration_rdv_probe_LDADD = $(RDV_LIBS) lib/libstork.la $(SLURM_LIBS)

# Another user of the nodes against a job's TCP rendezvous (rendezvous.bats).
check_PROGRAMS += t/integration/rdv_attack
t_integration_rdv_attack_SOURCES = t/integration/rdv_attack.c
t_integration_rdv_attack_CFLAGS = $(AM_CFLAGS) $(MUNGE_CFLAGS) $(CRYPTO_CFLAGS)
t_integration_rdv_attack_LDADD = $(MUNGE_LIBS) $(CRYPTO_LIBS)
