# t/unit/bind.mk: the binding plan over hwloc XML topologies, the rank
# environment helpers and the plugin's plugstack arguments (see t/local.mk).
check_PROGRAMS += t/unit/check_bind
TESTS += t/unit/check_bind
t_unit_check_bind_SOURCES = t/unit/check_bind.c plugins/plugin_args.c
t_unit_check_bind_CFLAGS = $(UNIT_CFLAGS) $(HWLOC_CFLAGS)
t_unit_check_bind_LDADD = lib/libstork_bind.la $(UNIT_LIBS) $(HWLOC_LIBS) $(SLURM_LIBS)
EXTRA_DIST += \
	t/data/topo/gen-topo.py \
	t/data/topo/gpu8-2socket.xml \
	t/data/topo/gpu4-1socket.xml \
	t/data/topo/cpu-2numa.xml \
	t/data/topo/testcluster-2core-4gpu.xml
