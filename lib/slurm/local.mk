# lib/slurm/local.mk: Slurm. The step's tasks from its environment (in
# lib/libstork.la: the plugin's and every program's), and talking to
# slurmctld through libslurm (lib/libstork_slurm.a: only the launcher and
# the daemons; the plugin, inside Slurm's processes, must not).
lib_libstork_la_SOURCES += lib/slurm/slurm_tasks.c lib/slurm/slurm_tasks.h \
	lib/slurm/time_limit_stop.c lib/slurm/time_limit_stop.h
noinst_LIBRARIES += lib/libstork_slurm.a
lib_libstork_slurm_a_SOURCES = lib/slurm/slurm_job.c lib/slurm/slurm_job.h
