# stork: the command users type.
bin_PROGRAMS += launcher/stork
launcher_stork_SOURCES = launcher/stork.c launcher/commands.h \
	launcher/run.c launcher/export.c launcher/check.c \
	launcher/prep.c launcher/prep.h \
	launcher/bench.c launcher/bench_util.c launcher/bench_util.h \
	launcher/bench_checkpoint.c launcher/bench_launch.c \
	launcher/bench_comm.c launcher/bench_comm.h
launcher_stork_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
launcher_stork_LDADD = $(STORKD_LIBS)
