/*
 * launcher/bench.c - `stork bench WHAT`: programs that print figures.
 *
 *   stork bench train CONFIG [--steps N] [--set KEY=VALUE]...
 *
 * train: the model of CONFIG at train.batch_size x train.seq_len on one
 * process: ms/step, tokens/s, model FLOPs per token and MFU against the
 * machine's fp32 peak (how the peak is computed is printed with it).
 */
#include "config.h"
#include "launcher/commands.h"

#include "daemon/bench_train.h"
#include "launcher/bench_comm.h"
#include "kernels/ops.h"
#include "lib/log.h"
#include "lib/stork_config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bench_usage(FILE *out)
{
	fprintf(out, "usage: stork bench train CONFIG [--steps N] [--set KEY=VALUE]...\n"
		     "       stork bench checkpoint CONFIG [--dir DIR] [--repeat N]\n"
		     "       stork bench launch CONFIG [--nodes N] [--repeat R]   (inside an allocation)\n"
		     "       stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n");
	return STORK_EXIT_USAGE;
}

static int bench_train_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "steps", required_argument, NULL, 'n' },
		{ "set", required_argument, NULL, 's' },
		{ 0 },
	};
	struct stork_config cfg;
	struct gpt2_config g;
	char err[1024];
	int steps = 5, c, code = STORK_EXIT_CONFIG;

	config_init(&cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'n') {
			steps = atoi(optarg);
			if (steps < 1) {
				stork_error("--steps: '%s' is not a positive number", optarg);
				return STORK_EXIT_USAGE;
			}
		} else if (c != 's') {
			return bench_usage(stderr);
		}
	}
	if (optind != argc - 1)
		return bench_usage(stderr);
	if (config_load(&cfg, argv[optind], err, sizeof err) < 0)
		goto fail;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1)
		if (c == 's' && config_set(&cfg, optarg, err, sizeof err) < 0)
			goto fail;
	if (config_validate(&cfg, err, sizeof err) < 0)
		goto fail;
	g = (struct gpt2_config){
		.max_seq_len = cfg.model.max_seq_len, .vocab_size = cfg.model.vocab_size,
		.padded_vocab_size = cfg.model.padded_vocab_size, .num_layers = cfg.model.layers,
		.num_heads = cfg.model.heads, .channels = cfg.model.channels,
	};
	code = bench_train(&g, cfg.train.batch_size, cfg.train.seq_len, steps, stdout) ?
		       STORK_EXIT_INTERNAL : STORK_EXIT_OK;
	config_free(&cfg);
	return code;
fail:
	stork_error("%s", err);
	config_free(&cfg);
	return code;
}

int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "train"))
		return bench_train_cmd(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "checkpoint"))
		return cmd_bench_checkpoint(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "launch"))
		return cmd_bench_launch(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "comm"))
		return bench_comm(argc - 1, argv + 1);
	return bench_usage(stderr);
}
