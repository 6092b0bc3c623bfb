# launcher/bench/local.mk: stork bench, the benchmarks launched as jobs and
# their reports (bench_util.c is stork-engine's too).
launcher_stork_SOURCES += \
	launcher/bench/bench.c launcher/bench/bench_launch.c launcher/bench/bench_report.c \
	launcher/bench/bench_util.c launcher/bench/bench_util.h
