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

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Every benchmark's form, one a line: `stork bench` prints them all, and
 * `stork bench WHAT --help` its own. */
static const char *const forms[] = {
	"train CONFIG [--steps N] [--ranks W] [--overlap W] [--set KEY=VALUE]... [KEY=VALUE]...",
	"checkpoint CONFIG [--dir DIR] [--repeat N]",
	"reshard CONFIG --tensor T --pipeline P [--data D] [--zero] [--dir DIR]",
	"launch CONFIG [--nodes N] [--repeat R]   (inside an allocation)",
	"launch --program [--nodes N] [--ranks R] [--repeat R] [-- PROGRAM...]   (inside an allocation)",
	"comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-d cpu|cuda]   (as every task of a step)",
	"report [--steps N] [--ranks R] [--repeat K] [--dir DIR]",
};
#define NFORMS (sizeof forms / sizeof forms[0])

/* Whether form i is benchmark what's. */
static bool form_of(size_t i, const char *what)
{
	size_t n = strlen(what);

	return !strncmp(forms[i], what, n) && forms[i][n] == ' ';
}

/* The forms of what (NULL: all), "usage:" before the first. */
static int bench_usage(FILE *out, const char *what)
{
	int shown = 0;

	for (size_t i = 0; i < NFORMS; i++)
		if (!what || form_of(i, what))
			fprintf(out, "%s stork bench %s\n", shown++ ? "      " : "usage:", forms[i]);
	fprintf(out, "See stork(1), COMMANDS, stork bench.\n");
	return out == stdout ? STORK_EXIT_OK : STORK_EXIT_USAGE;
}

static bool asks_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
}

int cmd_bench(int argc, char **argv)
{
	static const char *const in_engine[] = { "train", "checkpoint", "reshard", "comm" };

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return bench_usage(argc < 2 ? stderr : stdout, NULL);
	/* train's and comm's --help are their own, longer: the engine prints them */
	for (size_t i = 0; strcmp(argv[1], "train") && strcmp(argv[1], "comm") &&
			   asks_help(argc - 1, argv + 1) && i < NFORMS; i++)
		if (form_of(i, argv[1]))
			return bench_usage(stdout, argv[1]);
	if (argc >= 2 && !strcmp(argv[1], "launch"))
		return cmd_bench_launch(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "report"))
		return cmd_bench_report(argc - 1, argv + 1);
	for (size_t i = 0; argc >= 2 && i < sizeof in_engine / sizeof in_engine[0]; i++)
		if (!strcmp(argv[1], in_engine[i]))
			return engine_exec(argc, argv);
	return bench_usage(stderr, NULL);
}
