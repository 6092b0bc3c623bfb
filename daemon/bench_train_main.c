/*
 * daemon/bench_train_main.c - bench-train, a stand-alone driver of
 * bench_train() (the same figures as `stork bench train`).
 *
 *   daemon/bench-train [--cuda | --cuda-tf32 | --cuda-bf16] [LAYERS HEADS CHANNELS VOCAB B T STEPS]
 *
 * --cuda runs the steps on the first GPU in fp32, --cuda-tf32 with TF32,
 * --cuda-bf16 with bf16 matrix products (bench_train_cuda).
 *
 * Defaults: GPT-2 124M (12 12 768 50257), B=4, T=64, 5 steps. Like storkd,
 * the program sets OpenBLAS's variables and re-executes itself once
 * (ops_cpu_blas_reexec); set OPENBLAS_CORETYPE yourself to choose the
 * kernels.
 */
#include "config.h"
#include "daemon/bench_train.h"
#include "kernels/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct gpt2_config c = { .max_seq_len = 1024, .vocab_size = 50257, .num_layers = 12,
				 .num_heads = 12, .channels = 768 };
	int B = 4, T = 64, steps = 5, cuda = 0;
	enum ops_precision precision = OPS_FP32;
	char **args = argv;

	ops_cpu_blas_reexec(argv);
	if (argc > 1 && !strncmp(argv[1], "--cuda", 6)) {
		cuda = 1;
		if (!strcmp(argv[1], "--cuda-tf32"))
			precision = OPS_TF32;
		else if (!strcmp(argv[1], "--cuda-bf16"))
			precision = OPS_BF16;
		else if (strcmp(argv[1], "--cuda"))
			argc = -1; /* an unknown option: the usage below */
		args++;
		argc--;
	}
	if (argc == 8) {
		c.num_layers = atoi(args[1]);
		c.num_heads = atoi(args[2]);
		c.channels = atoi(args[3]);
		c.vocab_size = atoi(args[4]);
		B = atoi(args[5]);
		T = atoi(args[6]);
		steps = atoi(args[7]);
		if (c.max_seq_len < T)
			c.max_seq_len = T;
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [--cuda | --cuda-tf32 | --cuda-bf16] [LAYERS HEADS CHANNELS VOCAB B T STEPS]\n",
			argv[0]);
		return 2;
	}
	if (steps <= 0) {
		fprintf(stderr, "%s: STEPS must be positive\n", argv[0]);
		return 2;
	}
	c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
	if (getenv("OPENBLAS_CORETYPE"))
		printf("OPENBLAS_CORETYPE=%s\n", getenv("OPENBLAS_CORETYPE"));
	struct bench_train_opts o = { .B = B, .T = T, .steps = steps, .precision = precision,
				      .fused = 1 };

	if (cuda)
		return bench_train_cuda(&c, &o, stdout) ? 1 : 0;
	return bench_train(&c, &o, stdout) ? 1 : 0;
}
