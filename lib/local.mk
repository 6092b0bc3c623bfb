# lib/: what two or more programs share, in pieces so that each program
# links what it uses. Libtool convenience libraries, so that the plugin can
# link its piece PIC.
#
#   lib/libstork_bind.la  the node's topology and the binding plan (hwloc):
#                         all the SPANK plugin links (lib/bind/local.mk)
#   lib/libstork.la       configuration, JSON, run directory, exit_info,
#                         atomic files, logging (libyaml, jansson): stork,
#                         storkd and stork-engine
#   lib/libstork_slurm.a  talking to slurmctld (libslurm): stork, storkd
#   lib/libcomm.a, lib/librendezvous.a  collectives (UCX, NCCL) and the
#                         step's rendezvous (PMIx): storkd and stork-engine
noinst_LTLIBRARIES += lib/libstork.la
lib_libstork_la_SOURCES = \
	lib/exit_codes.h \
	lib/log.c lib/log.h \
	lib/rng.c lib/rng.h lib/clock.h lib/stop_signals.h lib/fault.h lib/simd_clones.h lib/io/big_alloc.h \
	lib/formats/token_shard.c lib/formats/token_shard.h \
	lib/version.c lib/version.h \
	lib/run/rundir.c lib/run/rundir.h \
	lib/run/exit_info.c lib/run/exit_info.h \
	lib/env_number.c lib/env_number.h \
	lib/slurm/slurm_tasks.c lib/slurm/slurm_tasks.h \
	lib/io/private_dir.c lib/io/private_dir.h \
	lib/machine_id.c lib/machine_id.h \
	lib/run/figures_cache.c lib/run/figures_cache.h \
	lib/bounded.c lib/bounded.h \
	lib/run/metrics_rollup.c lib/run/metrics_rollup.h lib/run/metrics_file.c lib/run/metrics_file.h \
	lib/url.c lib/url.h \
	lib/run/stage_path.c lib/run/stage_path.h
lib_libstork_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) $(YAML_CFLAGS) $(JANSSON_CFLAGS)
lib_libstork_la_LIBADD = $(YAML_LIBS) $(JANSSON_LIBS) -lpthread

# Each area of lib/ adds its files in its own fragment.
include lib/bind/local.mk
include lib/config/local.mk
include lib/formats/local.mk
include lib/comm/local.mk
include lib/rendezvous/local.mk

# What only the launcher and the daemon use: they may talk to slurmctld
# through libslurm, the plugin (inside Slurm's processes) must not.
noinst_LIBRARIES += lib/libstork_slurm.a
lib_libstork_slurm_a_SOURCES = lib/slurm/slurm_job.c lib/slurm/slurm_job.h
