# daemon/engine/bench/local.mk: bench_train(), the engine's training
# benchmark (stork bench train runs it), and bench-train, the same on its
# own (e.g. the GPT-2 124M figures).
daemon_libengine_a_SOURCES += daemon/engine/bench/bench_train.c daemon/engine/bench/bench_train.h
noinst_PROGRAMS += daemon/bench-train
daemon_bench_train_SOURCES = daemon/engine/bench/bench_train_main.c
daemon_bench_train_LDADD = $(ENGINE_LIBS) lib/libstork.la
