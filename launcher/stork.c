/*
 * launcher/stork.c - `stork`, the command users type.
 *
 * Dispatches to subcommands. Each subcommand lives in its own file under
 * launcher/ and is listed in the table below; `stork help` prints the table.
 * check, export, plan and three of the benchmarks need the training engine
 * (BLAS, UCX, PMIx, CUDA): they run in stork-engine (launcher/engine/),
 * so that stork run, the command of every job step, loads none of it.
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/programs.h"
#include "lib/log.h"
#include "lib/stop_signals.h"
#include "lib/version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_check(int argc, char **argv);

/* Each summary gives the forms a user types; a line break starts another. */
static const struct stork_command commands[] = {
	{ "run", cmd_run,
	  "train the engine:  stork run CONFIG [--local-ranks N] [--set KEY=VALUE]...\n"
	  "run any program (PyTorch, JAX, a script) with Stork's binding, logs, restarts\n"
	  "and preemption:    stork run [CONFIG] [--set KEY=VALUE]... -- PROGRAM [ARGS]...\n"
	  "check before sbatch, starting nothing:  stork run --check CONFIG" },
	{ "prep", cmd_prep,
	  "text to token shards, bytes or a tokenizer's ids (Hugging Face tokenizer.json,\n"
	  "GPT-2's encoder.json, tiktoken):  stork prep [--tokenizer FILE] --out DIR INPUT..." },
	{ "bench", cmd_bench, "print figures:  stork bench train|checkpoint|reshard|launch|comm|report ..." },
	{ "report", cmd_report,
	  "a run read back:  stork report RUN_DIR (HTML), stork report --text RUN_DIR,\n"
	  "or stork report RUNS_DIR (one line per run)" },
	{ "plan", engine_exec,
	  "layouts that fit, fastest first:  stork plan CONFIG --nodes N --gpus-per-node G" },
	{ "check", cmd_check,
	  "this node's GPUs, driver, CUDA and NCCL and an all-reduce:  stork check\n"
	  "the preflight of every node of a job:  stork check --all CONFIG" },
	{ "export", engine_exec,
	  "a checkpoint's model as an llm.c file or a Hugging Face directory (safetensors):\n"
	  "stork export [--format llmc|safetensors] [--dtype fp32|bf16] CHECKPOINT OUT" },
	{ "help", cmd_help, "show this list" },
	{ "version", cmd_version, "print the version and build information" },
};

static int cmd_version(int argc, char **argv)
{
	printf("stork %s (git %s, %s)\n", stork_version(), stork_git_describe(),
	       stork_compiler());
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: stork COMMAND [ARGS...]   (stork COMMAND --help: its options)\n\n"
		"commands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		const char *s = commands[i].summary, *nl;

		fprintf(out, "  %-8s ", commands[i].name);
		while ((nl = strchr(s, '\n'))) {
			fprintf(out, "%.*s\n  %-8s ", (int)(nl - s), s, "");
			s = nl + 1;
		}
		fprintf(out, "%s\n", s);
	}
	fprintf(out, "\nSee stork(1), and stork.yaml(5) for the configuration.\n");
}

static int cmd_help(int argc, char **argv)
{
	usage(stdout);
	return 0;
}

/*
 * stork check: this node (stork-engine's check); `stork check --all CONFIG
 * [overrides]` in a job: the preflight of every node of it and no
 * training, that is `stork run CONFIG ... preflight.enabled=only`.
 */
static int cmd_check(int argc, char **argv)
{
	char **args;
	int n = 0, code;

	if (argc < 2 || strcmp(argv[1], "--all"))
		return engine_exec(argc, argv);
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(CHECK_USAGE, stdout);
			return STORK_EXIT_OK;
		}
	if (!(args = calloc((size_t)argc + 3, sizeof *args)))
		return STORK_EXIT_INTERNAL;
	args[n++] = "run";
	for (int i = 2; i < argc; i++)
		args[n++] = argv[i];
	args[n++] = "--set";
	args[n++] = "preflight.enabled=only";
	code = cmd_run(n, args);
	free(args);
	return code;
}

int main(int argc, char **argv)
{
	/* Before anything else: a preemption signal must wait for its handler. */
	if (argc > 1 && (!strcmp(argv[1], "run") || (!strcmp(argv[1], "check") && argc > 2 &&
						      !strcmp(argv[2], "--all"))))
		stop_signals_block();
	stork_log_init("stork", STORK_LOG_INFO);
	if (argc < 2) {
		usage(stderr);
		return STORK_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
		return cmd_version(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cmd_help(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	stork_error("unknown command '%s' (see 'stork help')", argv[1]);
	return STORK_EXIT_USAGE;
}
