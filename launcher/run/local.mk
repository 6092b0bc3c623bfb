# launcher/run/local.mk: stork run, the launcher of a job step: the node's
# tasks, preflight's manifest, URL data staged, notifications, the run's
# metrics at its end, a node that leaves under restart.in_place.
launcher_stork_SOURCES += \
	launcher/run/run.c launcher/run/run_metrics.c launcher/run/run_metrics.h \
	launcher/run/run_name.c launcher/run/run_name.h \
	launcher/run/notify.c launcher/run/notify.h launcher/run/stage.c launcher/run/stage.h \
	launcher/run/preflight.c launcher/run/preflight.h launcher/run/preflight_manifest.c \
	launcher/run/host_tasks.c launcher/run/host_tasks.h \
	launcher/run/in_place.c launcher/run/in_place.h
