# stork: the command users type, and the command of every job step (stork
# run). It links the configuration, the run directory and libslurm, not the
# training engine: the subcommands that need the engine run in stork-engine,
# which stork executes with its own arguments (launcher/programs.c).
bin_PROGRAMS += launcher/stork
launcher_stork_SOURCES = launcher/stork.c launcher/commands.h \
	launcher/programs.c launcher/programs.h \
	launcher/run/run.c launcher/run/run_metrics.c launcher/run/run_metrics.h \
	launcher/report/report.c launcher/report/report.h launcher/report/report_data.c launcher/report/report_html.c \
	launcher/run/notify.c launcher/run/notify.h launcher/run/stage.c launcher/run/stage.h \
	launcher/prep/prep.c launcher/prep/prep.h launcher/run/preflight.c launcher/run/preflight.h \
	launcher/run/host_tasks.c launcher/run/host_tasks.h \
	launcher/run/preflight_manifest.c launcher/sha256_file.c launcher/sha256_file.h \
	launcher/prep/prep_tokens.c launcher/prep/prep_tokens.h launcher/prep/tokenizer.c launcher/prep/tokenizer.h \
	launcher/prep/tokenizer_load.c launcher/prep/tokenizer_impl.h \
	launcher/bench/bench.c launcher/bench/bench_launch.c launcher/bench/bench_report.c \
	launcher/bench/bench_util.c launcher/bench/bench_util.h
launcher_stork_CPPFLAGS = $(AM_CPPFLAGS) -DSTORK_PKGLIBEXECDIR='"$(pkglibexecdir)"' $(CURL_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PCRE2_CFLAGS) $(JANSSON_CFLAGS) $(XXHASH_CFLAGS)
# Those installed paths (and STORK_SBINDIR) come from the Makefile, not
# config.h, which configure leaves alone when only --prefix changed: without
# this, a tree configured again for another prefix would install a stork
# that looks for storkd and stork-engine under the old one.
launcher/stork-programs.$(OBJEXT): Makefile
launcher_stork_LDADD = lib/libstork_slurm.a lib/libstork.la $(SLURM_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) \
	$(PCRE2_LIBS) $(JANSSON_LIBS) $(XXHASH_LIBS) -lpthread

# stork-engine: stork bench train|checkpoint|comm, stork check, stork
# export and stork plan, with the training engine (launcher/engine/). Started by stork
# only, so not on the PATH.
pkglibexec_PROGRAMS += launcher/engine/stork-engine
launcher_engine_stork_engine_SOURCES = \
	launcher/engine/stork_engine.c launcher/engine/commands.h \
	launcher/engine/bench_train.c launcher/engine/bench_checkpoint.c launcher/engine/bench_reshard.c \
	launcher/engine/bench_comm.c launcher/engine/check.c launcher/engine/export.c \
	launcher/engine/config_args.c \
	launcher/engine/plan.c launcher/engine/plan.h launcher/engine/plan_check.c \
	launcher/engine/plan_figures.c launcher/engine/plan_probe.c launcher/engine/plan_link.c \
	launcher/engine/plan_print.c \
	launcher/bench/bench_util.c launcher/bench/bench_util.h
launcher_engine_stork_engine_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
launcher_engine_stork_engine_LDADD = $(STORKD_LIBS)
