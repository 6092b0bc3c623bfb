/*
 * daemon/engine/bench/bench_train.h - the training benchmark behind `stork bench train`.
 */
#ifndef STORK_DAEMON_BENCH_TRAIN_H
#define STORK_DAEMON_BENCH_TRAIN_H

#include <stdio.h>

#include "daemon/engine/model/model.h"

/* What a training benchmark measured: its timed steps' figures (stork plan keeps them). */
struct bench_train_result {
	double fwd_bwd_s;              /* forward and backward of one step */
	double update_s;               /* AdamW of one step */
	size_t num_params;
	int B, T;                      /* the batches timed */
	int threads;                   /* CPU threads of the kernels; 1 on a GPU */
	char device[160];              /* "cpu" or the GPU's description */
};

/* What a training benchmark runs. */
struct bench_train_opts {
	int B, T, steps;
	enum ops_precision precision;  /* the matrix products' (bf16 is emulated on the CPU) */
	enum gpt2_recompute recompute; /* what the forward pass keeps */
	int fused;                     /* fused kernels (gpt2_set_fused) */
	struct bench_train_result *result; /* filled when not NULL */
};

/*
 * Build a model of config c (seed 1337), then run 2 warm-up and o->steps
 * timed training steps (zero grad, forward, backward, AdamW) on random
 * tokens of batch (o->B, o->T), and print to out: the activation memory
 * under o->recompute and what it saves against keeping everything, ms/step (forward, backward,
 * update), tokens/s, model FLOPs per token, the matrix products' own
 * throughput, and MFU against the fp32 peak of the CPUs the calling thread
 * may run on (the peak's assumptions are printed). Returns 0, or -1 with a
 * message on out (bad config, out of memory).
 */
int bench_train(const struct gpt2_config *c, const struct bench_train_opts *o, FILE *out);

/*
 * bench_train on the first GPU (ops_cuda), matrix products in
 * o->precision: ms/step by phase, tokens/s, MFU against the GPU's dense
 * peak in that precision, and the GPU memory the model, its state and the activations
 * take. Returns 0, or -1 with a message on out (no GPU, no CUDA in this
 * build, out of memory).
 */
int bench_train_cuda(const struct gpt2_config *c, const struct bench_train_opts *o, FILE *out);

/*
 * Gradient overlap (parallel.overlap): `ranks` data-parallel ranks,
 * threads of this process (lib/comm's shared memory; with cuda all on
 * the first GPU, the all-reduce staged through pinned host memory),
 * train the model of c on batches (o->B, o->T): o->steps steps with the
 * all-reduce after the backward pass, then o->steps overlapped (each
 * after 2 warm-up steps). Prints per mode rank 0's ms/step, forward and
 * backward, the all-reduce's time, the part the step waited for, and
 * their difference: the time hidden. Returns 0, or -1 with a message.
 */
int bench_overlap(const struct gpt2_config *c, const struct bench_train_opts *o, int ranks,
		  int cuda, FILE *out);

/*
 * The figures of bench_train without its report: a model of c, one
 * warm-up step, then timed steps on the first GPU (cuda) or this thread's
 * CPU threads, each step's figures handed to each(step, arg), until it
 * returns 0; o->steps and o->result are not used. Returns 0, or -1 with a
 * message in err.
 */
int bench_train_probe(const struct gpt2_config *c, const struct bench_train_opts *o, int cuda,
		      int (*each)(const struct bench_train_result *step, void *arg), void *arg,
		      char *err, size_t errlen);

/* Model FLOPs per trained token: 6 N (N = parameters minus wpe) + 12 L C T. */
double bench_flops_per_token(const struct gpt2_config *c, size_t num_params, int T);

/*
 * fp32 peak of `cores` cores in FLOP/s: cores * GHz * FLOPs/cycle. GHz is
 * measured (a chain of dependent integer adds, one cycle each); FLOPs/cycle
 * = SIMD lanes (16 with AVX-512, 8 with AVX2) * 2 (FMA) * 2 FMA units per
 * core. describe (may be NULL) receives the assumptions in words.
 */
double bench_fp32_peak(int cores, char *describe, size_t len);

#endif
