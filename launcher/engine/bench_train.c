/*
 * launcher/engine/bench_train.c - `stork bench train`: training speed.
 *
 *   stork bench train CONFIG [--steps N] [--ranks W] [--overlap W] [--set KEY=VALUE]...
 *                     [KEY=VALUE]...
 *
 * The model of CONFIG at train.batch_size x train.seq_len on one
 * process: ms/step, tokens/s, model FLOPs per token and MFU against the
 * machine's fp32 peak (how the peak is computed is printed with it). With
 * --ranks W, first the memory every rank of the configured layout
 * (parallel.tensor, parallel.pipeline, parallel.zero) over W ranks holds:
 * parameters, gradients, optimizer moments and activations, from the same
 * sizes storkd allocates (--steps 0: only that; without --ranks, over one
 * data-parallel replica: tensor x pipeline ranks). With --overlap W, instead
 * of the one-process figures: W data-parallel ranks as threads, the
 * gradient all-reduce after the backward pass beside it overlapped
 * (parallel.overlap), step times and the all-reduce time hidden.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "daemon/engine/bench/bench_train.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/parallel/layout_cost.h"
#include "kernels/device.h"
#include "launcher/engine/plan.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(FILE *out)
{
	fprintf(out, "usage: stork bench train CONFIG [--steps N] [--ranks W] [--overlap W] "
		     "[--set KEY=VALUE]... [KEY=VALUE]...\n");
	return out == stdout ? STORK_EXIT_OK : STORK_EXIT_USAGE;
}

/*
 * Whether the training benchmark runs on a GPU, as run.device says: cuda
 * without a GPU is a configuration error (*code set), auto uses one when
 * there is one.
 */
static int on_gpu(const struct stork_config *cfg, int *code)
{
	int gpus = kernels_cuda_device_count();

	if (cfg->run.device == STORK_DEVICE_CPU)
		return 0;
	if (cfg->run.device == STORK_DEVICE_CUDA && gpus == 0) {
		stork_error("run.device: cuda, but no CUDA device is visible here (%s)",
			    kernels_cuda_versions());
		*code = STORK_EXIT_CONFIG;
		return 1;
	}
	if (gpus == 0)
		printf("device: cpu (run.device: auto, and no CUDA device is visible)\n");
	return gpus > 0;
}

static double mib(size_t floats)
{
	return (double)floats * sizeof(float) / (1 << 20);
}

/*
 * Per-rank memory of a layout: what storkd allocates for each rank's shard
 * (daemon/engine/parallel/layout_cost.h, which stork plan shares).
 */
static int bench_memory(const struct stork_config *cfg, const struct gpt2_config *g, int world,
			FILE *out)
{
	int P = cfg->parallel.pipeline, B = cfg->train.batch_size, T = cfg->train.seq_len;
	int m = cfg->train.grad_accum;
	struct par_layout l;
	char err[512];

	if (layout_make(&l, g, world, cfg->parallel.tensor, P, cfg->parallel.zero,
			cfg->parallel.stage_split, T, 0, err, sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_CONFIG;
	}
	fprintf(out, "memory per rank: dp %d x tp %d x pp %d%s over %d ranks, B=%d T=%d, %d micro-batches, recompute %s\n",
		l.dp, l.tp, l.pp, l.zero == 1 ? " (ZeRO-1)" : l.zero == 2 ? " (ZeRO-2)" :
		l.zero == 3 ? " (ZeRO-3)" : "", world, B, T, m,
		gpt2_recompute_name(layout_recompute(cfg)));
	fprintf(out, "%5s %5s %3s %3s %7s %12s %12s %12s %12s %12s %10s\n", "rank", "stage", "tp",
		"dp", "layers", "params", "grads", "optimizer", "activations", "total", "(MiB)");
	for (int r = 0; r < world; r++) {
		struct rank_memory mem;

		layout_make(&l, g, world, cfg->parallel.tensor, P, cfg->parallel.zero,
			    cfg->parallel.stage_split, T, r, err, sizeof err);
		layout_rank_memory(g, &l, B, T, m, cfg->parallel.overlap, layout_recompute(cfg), &mem);
		fprintf(out, "%5d %5d %3d %3d %3d-%-3d %12.2f %12.2f %12.2f %12.2f %12.2f\n", r,
			l.stage, l.tp_rank, l.dp_rank, l.first_layer, l.last_layer - 1,
			mib(mem.params), mib(mem.grads), mib(mem.optimizer), mib(mem.activations),
			mib(layout_memory_floats(&mem)));
	}
	return 0;
}

int cmd_bench_train(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "steps", required_argument, NULL, 'n' },
		{ "set", required_argument, NULL, 's' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "overlap", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct stork_config cfg;
	struct gpt2_config g;
	struct bench_train_opts opts;
	struct bench_train_result result;
	char err[1024];
	int steps = 5, ranks = 0, overlap = 0, c, code = STORK_EXIT_CONFIG, gpu;

	/* config_load initialises cfg */
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'n') {
			steps = atoi(optarg);
			if (steps < 0 || (steps == 0 && strcmp(optarg, "0"))) {
				stork_error("--steps: '%s' is not a number >= 0", optarg);
				return STORK_EXIT_USAGE;
			}
		} else if (c == 'r') {
			ranks = atoi(optarg);
			if (ranks < 1) {
				stork_error("--ranks: '%s' is not a positive number", optarg);
				return STORK_EXIT_USAGE;
			}
		} else if (c == 'o') {
			overlap = atoi(optarg);
			if (overlap < 2) {
				stork_error("--overlap: '%s' is not a number of ranks >= 2", optarg);
				return STORK_EXIT_USAGE;
			}
		} else if (c == 'h') {
			return usage(stdout);
		} else if (c != 's') {
			return usage(stderr);
		}
	}
	if (optind >= argc)
		return usage(stderr);
	for (int i = optind + 1; i < argc; i++)
		if (!strchr(argv[i], '=')) {
			stork_error("unexpected argument '%s': overrides look like train.steps=50",
				    argv[i]);
			return usage(stderr);
		}
	if (engine_config_load(&cfg, argc, argv, longopts, optind, err, sizeof err) < 0)
		goto fail;
	if (layout_model_shape(&cfg, &g, err, sizeof err) < 0)
		goto fail;
	if (!ranks && steps == 0) /* the memory table is all --steps 0 asks for */
		ranks = cfg.parallel.tensor * cfg.parallel.pipeline;
	if (ranks && (code = bench_memory(&cfg, &g, ranks, stdout))) {
		config_free(&cfg);
		return code;
	}
	code = STORK_EXIT_OK;
	opts = (struct bench_train_opts){ .B = cfg.train.batch_size, .T = cfg.train.seq_len,
					  .steps = steps,
					  .precision = layout_precision(&cfg),
					  .recompute = layout_recompute(&cfg),
					  .fused = cfg.train.fused, .result = &result };
	/* on_gpu sets code when run.device is cuda without a GPU */
	gpu = steps > 0 && on_gpu(&cfg, &code);
	if (gpu)
		opts.precision = layout_gpu_precision(&cfg);
	if (!code && steps > 0 &&
	    (overlap ? bench_overlap(&g, &opts, overlap, gpu, stdout) :
	     gpu     ? bench_train_cuda(&g, &opts, stdout) :
		       bench_train(&g, &opts, stdout)))
		code = STORK_EXIT_INTERNAL;
	else if (!code && steps > 0 && !overlap)
		plan_keep_train_figure(&g, &opts, gpu, stdout);
	config_free(&cfg);
	return code;
fail:
	stork_error("%s", err);
	config_free(&cfg);
	return code;
}
