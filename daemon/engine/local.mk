# daemon/engine/local.mk: the training engine's model, optimizer and benchmark
# (see daemon/local.mk). Programs link $(ENGINE_LIBS) lib/libstork.la (the
# model file is read with lib/io/io.h).
noinst_LIBRARIES += daemon/libengine.a
daemon_libengine_a_SOURCES = \
	daemon/engine/model/model.c daemon/engine/model/model.h \
	daemon/engine/model/arch/arch.h daemon/engine/model/arch/blocks.c daemon/engine/model/arch/gpt2.c daemon/engine/model/arch/llama.c \
	daemon/engine/model/hf_model.c daemon/engine/model/hf_model.h \
	daemon/engine/parallel/tensor_parallel.c daemon/engine/parallel/tensor_parallel.h \
	daemon/engine/parallel/layout.c daemon/engine/parallel/layout.h \
	daemon/engine/model/optimizer.c daemon/engine/model/optimizer.h \
	daemon/engine/parallel/grad_sync.c daemon/engine/parallel/grad_sync.h \
	daemon/engine/bench/bench_train.c daemon/engine/bench/bench_train.h
daemon_libengine_a_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS)
ENGINE_LIBS = daemon/libengine.a $(KERNELS_LIBS) $(COMM_LIBS)

# bench-train: bench_train() on its own, e.g. the GPT-2 124M figures.
noinst_PROGRAMS += daemon/bench-train
daemon_bench_train_SOURCES = daemon/engine/bench/bench_train_main.c
daemon_bench_train_LDADD = $(ENGINE_LIBS) lib/libstork.la
