# lib/run/local.mk: the run directory and what is written in it (in
# lib/libstork.la): its creation, exit_info.json, the metrics files and
# their rollup, a hang explained, the notice of how an attempt ends, the
# figures cache of `stork plan`, the stage paths of URL data.
lib_libstork_la_SOURCES += \
	lib/run/rundir.c lib/run/rundir.h \
	lib/run/exit_info.c lib/run/exit_info.h \
	lib/run/metrics_rollup.c lib/run/metrics_rollup.h \
	lib/run/metrics_file.c lib/run/metrics_file.h \
	lib/run/metrics_line.c lib/run/metrics_line.h \
	lib/run/hang_explain.c lib/run/hang_explain.h \
	lib/run/end_notice.c lib/run/end_notice.h \
	lib/run/membership.c lib/run/membership.h \
	lib/run/figures_cache.c lib/run/figures_cache.h \
	lib/run/stage_path.c lib/run/stage_path.h
