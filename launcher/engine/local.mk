# launcher/engine/local.mk: stork-engine: stork bench train|checkpoint|comm, stork check, stork
# export and stork plan, with the training engine (launcher/engine/). Started by stork
# only, so not on the PATH.
pkglibexec_PROGRAMS += launcher/engine/stork-engine
launcher_engine_stork_engine_SOURCES = \
	launcher/engine/stork_engine.c launcher/engine/commands.h \
	launcher/engine/bench_train.c launcher/engine/bench_checkpoint.c launcher/engine/bench_reshard.c \
	launcher/engine/bench_comm.c launcher/engine/check.c launcher/engine/export.c \
	launcher/engine/export_tokenizer.c launcher/engine/export_tokenizer.h \
	launcher/sha256_file.c launcher/sha256_file.h \
	launcher/engine/config_args.c \
	launcher/engine/plan.c launcher/engine/plan.h launcher/engine/plan_check.c \
	launcher/engine/plan_cpus.c launcher/engine/plan_figures.c launcher/engine/plan_probe.c \
	launcher/engine/plan_link.c \
	launcher/engine/plan_print.c \
	launcher/bench/bench_util.c launcher/bench/bench_util.h
launcher_engine_stork_engine_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
launcher_engine_stork_engine_LDADD = $(STORKD_LIBS) $(CRYPTO_LIBS)
