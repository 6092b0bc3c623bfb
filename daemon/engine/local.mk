# daemon/engine.mk: the training engine's model, optimizer and benchmark
# (see daemon/local.mk). Programs link $(ENGINE_LIBS) lib/libstork.la (the
# model file is read with lib/io.h).
noinst_LIBRARIES += daemon/libengine.a
daemon_libengine_a_SOURCES = \
	daemon/model.c daemon/model.h \
	daemon/arch/arch.h daemon/arch/blocks.c daemon/arch/gpt2.c daemon/arch/llama.c \
	daemon/hf_model.c daemon/hf_model.h \
	daemon/tensor_parallel.c daemon/tensor_parallel.h \
	daemon/layout.c daemon/layout.h \
	daemon/optimizer.c daemon/optimizer.h \
	daemon/grad_sync.c daemon/grad_sync.h \
	daemon/bench_train.c daemon/bench_train.h
daemon_libengine_a_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS)
ENGINE_LIBS = daemon/libengine.a $(KERNELS_LIBS) $(COMM_LIBS)

# bench-train: bench_train() on its own, e.g. the GPT-2 124M figures.
noinst_PROGRAMS += daemon/bench-train
daemon_bench_train_SOURCES = daemon/bench_train_main.c
daemon_bench_train_LDADD = $(ENGINE_LIBS) lib/libstork.la
