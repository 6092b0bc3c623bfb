# lib/: what two or more programs share, in pieces so that each program
# links what it uses. Libtool convenience libraries, so that the plugin can
# link its piece PIC.
#
#   lib/libstork_bind.la  the node's topology and the binding plan (hwloc):
#                         all the SPANK plugin links (lib/bind/)
#   lib/libstork.la       the basics here (logging, bounded text, numbers
#                         from the environment, the random generator),
#                         low-level I/O (lib/io/), the configuration
#                         (lib/config/), file formats (lib/formats/) and the
#                         run directory (lib/run/) (libyaml, jansson):
#                         stork, storkd and stork-engine
#   lib/libstork_slurm.a  talking to slurmctld (libslurm): stork, storkd
#                         (lib/slurm/)
#   lib/libcomm.a, lib/librendezvous.a  collectives (UCX, NCCL) and the
#                         step's rendezvous (PMIx): storkd and stork-engine
#                         (lib/comm/, lib/rendezvous/)
noinst_LTLIBRARIES += lib/libstork.la
lib_libstork_la_SOURCES = \
	lib/exit_codes.h \
	lib/log.c lib/log.h \
	lib/rng.c lib/rng.h lib/clock.h lib/stop_signals.h lib/fault.h lib/simd_clones.h \
	lib/version.c lib/version.h \
	lib/env_number.c lib/env_number.h \
	lib/machine_id.c lib/machine_id.h \
	lib/oom_watch.c lib/oom_watch.h \
	lib/bounded.c lib/bounded.h \
	lib/url.c lib/url.h \
	lib/term_text.c lib/term_text.h
lib_libstork_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(YAML_CFLAGS) $(JANSSON_CFLAGS)
lib_libstork_la_LIBADD = $(YAML_LIBS) $(JANSSON_LIBS) -lpthread

# Each area of lib/ adds its files in its own fragment.
include lib/io/local.mk
include lib/run/local.mk
include lib/config/local.mk
include lib/formats/local.mk
include lib/slurm/local.mk
include lib/bind/local.mk
include lib/comm/local.mk
include lib/rendezvous/local.mk
