/*
 * daemon/engine/bench/bench_train_main.c - bench-train, a stand-alone driver of
 * bench_train() (the same figures as `stork bench train`).
 *
 *   daemon/bench-train [--cuda | --cuda-tf32 | --cuda-bf16] [--overlap RANKS]
 *                      [--recompute none|gelu|block] [--attention wmma|mma]
 *                      [LAYERS HEADS CHANNELS VOCAB B T STEPS]
 *
 * --cuda runs the steps on the first GPU in fp32, --cuda-tf32 with TF32,
 * --cuda-bf16 with bf16 matrix products (bench_train_cuda). --overlap
 * RANKS runs RANKS data-parallel ranks as threads, the gradient all-reduce
 * after the backward pass and then overlapped with it (bench_overlap).
 * --recompute is train.recompute: what the forward pass keeps.
 * --attention wmma runs the bf16 fused attention on the WMMA kernels
 * instead of the register-tile ones (mma, the default:
 * kernels_cuda_attention_mma); with --cuda-bf16 only, one rank.
 *
 * Defaults: GPT-2 124M (12 12 768 50257), B=4, T=64, 5 steps. Like storkd,
 * the program sets OpenBLAS's variables and re-executes itself once
 * (ops_cpu_blas_reexec); set OPENBLAS_CORETYPE yourself to choose the
 * kernels.
 */
#include "config.h"
#include "daemon/engine/bench/bench_train.h"
#include "kernels/device.h"
#include "kernels/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--cuda | --cuda-tf32 | --cuda-bf16] [--overlap RANKS] "
			"[--recompute none|gelu|block] [--attention wmma|mma] "
			"[LAYERS HEADS CHANNELS VOCAB B T STEPS]\n"
			"       %s [--cuda...] --llama-1b B T STEPS   (Llama 3.2 1B's shape)\n",
		argv0, argv0);
	return 2;
}

/* The train.recompute mode called name into *r; false for no such mode. */
static int recompute_named(const char *name, enum gpt2_recompute *r)
{
	for (int m = GPT2_RECOMPUTE_NONE; m <= GPT2_RECOMPUTE_BLOCK; m++)
		if (!strcmp(name, gpt2_recompute_name((enum gpt2_recompute)m))) {
			*r = (enum gpt2_recompute)m;
			return 1;
		}
	return 0;
}

/* Llama 3.2 1B's shape (config.json of meta-llama/Llama-3.2-1B), random weights. */
static const struct gpt2_config llama_1b = {
	.max_seq_len = 131072, .vocab_size = 128256, .num_layers = 16, .num_heads = 32,
	.channels = 2048, .arch = MODEL_LLAMA, .kv_heads = 8, .intermediate = 8192, .untied = 0,
	.norm_eps = 1e-5f, .rope_theta = 500000.0f, .rope_factor = 32.0f,
	.rope_low_freq_factor = 1.0f, .rope_high_freq_factor = 4.0f,
	.rope_original_max_positions = 8192,
};

int main(int argc, char **argv)
{
	struct gpt2_config c = { .max_seq_len = 1024, .vocab_size = 50257, .num_layers = 12,
				 .num_heads = 12, .channels = 768 };
	struct bench_train_opts o = { .B = 4, .T = 64, .steps = 5, .precision = OPS_FP32, .fused = 1 };
	int cuda = 0, overlap = 0, mma = 1, chosen = 0, k = 1, n;

	/* each line as it comes: a run stopped by a timeout still shows how far it got */
	setvbuf(stdout, NULL, _IOLBF, 0);
	ops_cpu_blas_reexec(argv);
	for (; k < argc && !strncmp(argv[k], "--", 2); k++) {
		if (!strcmp(argv[k], "--cuda")) {
			cuda = 1;
			o.precision = OPS_FP32;
		} else if (!strcmp(argv[k], "--cuda-tf32")) {
			cuda = 1;
			o.precision = OPS_TF32;
		} else if (!strcmp(argv[k], "--cuda-bf16")) {
			cuda = 1;
			o.precision = OPS_BF16;
		} else if (!strcmp(argv[k], "--llama-1b")) {
			c = llama_1b;
		} else if (!strcmp(argv[k], "--overlap") && k + 1 < argc && atoi(argv[k + 1]) > 0) {
			overlap = atoi(argv[++k]);
		} else if (!strcmp(argv[k], "--attention") && k + 1 < argc &&
			   (!strcmp(argv[k + 1], "mma") || !strcmp(argv[k + 1], "wmma"))) {
			mma = !strcmp(argv[++k], "mma");
			chosen = 1;
		} else if (!strcmp(argv[k], "--recompute") && k + 1 < argc &&
			   recompute_named(argv[k + 1], &o.recompute)) {
			k++;
		} else {
			return usage(argv[0]);
		}
	}
	n = argc - k;
	if (n == 3 && c.arch == MODEL_LLAMA) { /* --llama-1b B T STEPS */
		o.B = atoi(argv[k]);
		o.T = atoi(argv[k + 1]);
		o.steps = atoi(argv[k + 2]);
	} else if (n == 7) {
		c.num_layers = atoi(argv[k]);
		c.num_heads = atoi(argv[k + 1]);
		c.channels = atoi(argv[k + 2]);
		c.vocab_size = atoi(argv[k + 3]);
		o.B = atoi(argv[k + 4]);
		o.T = atoi(argv[k + 5]);
		o.steps = atoi(argv[k + 6]);
		if (c.max_seq_len < o.T)
			c.max_seq_len = o.T;
	} else if (n != 0) {
		return usage(argv[0]);
	}
	if (chosen && (o.precision != OPS_BF16 || overlap)) {
		fprintf(stderr, "%s: --attention is for one rank in bf16 (--cuda-bf16)\n", argv[0]);
		return 2;
	}
	kernels_cuda_attention_mma(mma);
	if (chosen)
		printf("attention: the %s kernels (--attention %s)\n", mma ? "register-tile" : "WMMA",
		       mma ? "mma" : "wmma");
	if (o.steps <= 0) {
		fprintf(stderr, "%s: STEPS must be positive\n", argv[0]);
		return 2;
	}
	c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
	if (getenv("OPENBLAS_CORETYPE"))
		printf("OPENBLAS_CORETYPE=%s\n", getenv("OPENBLAS_CORETYPE"));
	if (overlap)
		return bench_overlap(&c, &o, overlap, cuda, stdout) ? 1 : 0;
	if (cuda)
		return bench_train_cuda(&c, &o, stdout) ? 1 : 0;
	return bench_train(&c, &o, stdout) ? 1 : 0;
}
