/*
 * launcher/bench/bench.c - `stork bench WHAT`: programs that print figures.
 *
 * launch (it times `srun stork run`) and report are stork's own; train, checkpoint,
 * reshard and comm run the training engine, so stork hands them to stork-engine
 * (launcher/engine/).
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/programs.h"

#include <stdio.h>
#include <string.h>

static int bench_usage(FILE *out)
{
	fprintf(out, "usage: stork bench train CONFIG [--steps N] [--ranks W] [--overlap W] [--set KEY=VALUE]... [KEY=VALUE]...\n"
		     "       stork bench checkpoint CONFIG [--dir DIR] [--repeat N]\n"
		     "       stork bench reshard CONFIG --tensor T --pipeline P [--data D] [--zero] [--dir DIR]\n"
		     "       stork bench launch CONFIG [--nodes N] [--repeat R]   (inside an allocation)\n"
		     "       stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
		     "       stork bench report [--steps N] [--ranks R] [--repeat K] [--dir DIR]\n");
	return STORK_EXIT_USAGE;
}

int cmd_bench(int argc, char **argv)
{
	static const char *const in_engine[] = { "train", "checkpoint", "reshard", "comm" };

	if (argc >= 2 && !strcmp(argv[1], "launch"))
		return cmd_bench_launch(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "report"))
		return cmd_bench_report(argc - 1, argv + 1);
	for (size_t i = 0; argc >= 2 && i < sizeof in_engine / sizeof in_engine[0]; i++)
		if (!strcmp(argv[1], in_engine[i]))
			return engine_exec(argc, argv);
	return bench_usage(stderr);
}
