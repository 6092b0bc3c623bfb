# spank_stork.so: the SPANK plugin (see spank_stork(8)). A libtool module
# loaded by srun, sbatch, salloc and slurmstepd; only slurm_spank_* and
# plugin_* are exported (spank_stork.lds). Of lib/ it links the binding
# library only (topology, binding plan: hwloc); libslurm is not linked: its
# symbols (slurm_hostlist_*, slurm_error) come from the Slurm process.
# t/build/binaries.bats checks both. Installed in spank_plugindir
# (configure --with-spank-plugindir; default LIBDIR/stork).
spank_plugin_LTLIBRARIES = plugins/spank_stork.la
plugins_spank_stork_la_SOURCES = \
	plugins/stork_dispatch.c \
	plugins/stork_local.c plugins/stork_local.h \
	plugins/stork_slurmstepd.c plugins/stork_slurmstepd.h \
	plugins/stork_args.c plugins/stork_args.h \
	plugins/plugin_args.c plugins/plugin_args.h
plugins_spank_stork_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS) -fstack-protector-strong
plugins_spank_stork_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(srcdir)/plugins/spank_stork.lds \
	-Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack
plugins_spank_stork_la_LIBADD = lib/libstork_bind.la $(HWLOC_LIBS)
EXTRA_DIST += plugins/spank_stork.lds
