/*
 * launcher/engine/stork_engine.c - stork-engine, the stork subcommands that
 * run the training engine: stork bench train, bench checkpoint, bench comm,
 * stork check, stork export and stork plan.
 *
 * They are a program of their own so that `stork` itself (run, prep, bench
 * launch) loads no UCX, PMIx, BLAS or CUDA: stork executes this program,
 * installed in pkglibexecdir, with its own arguments (launcher/programs.c),
 *
 *   stork-engine bench train CONFIG ...    stork-engine export CKPT MODEL.bin
 *
 * and messages still begin with "stork".
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/engine/commands.h"

#include "kernels/ops.h"
#include "lib/log.h"

#include <stdio.h>
#include <string.h>

static const struct stork_command benches[] = {
	{ "train", cmd_bench_train, "training speed and memory" },
	{ "checkpoint", cmd_bench_checkpoint, "checkpoint commit, verify and load" },
	{ "reshard", cmd_bench_reshard, "the memory of a resume on another layout" },
	{ "comm", cmd_bench_comm, "all-reduce bandwidth between the tasks of a step" },
};

static const struct stork_command commands[] = {
	{ "check", cmd_check, "the GPUs, driver, CUDA and NCCL" },
	{ "export", cmd_export, "a checkpoint's model as one llm.c file or a Hugging Face directory" },
	{ "plan", cmd_plan, "the layouts of a world that fit, fastest first" },
};

/* The command of table named argv[0], run; -1 when there is none. */
static int dispatch(const struct stork_command *table, size_t n, int argc, char **argv)
{
	for (size_t i = 0; argc > 0 && i < n; i++)
		if (!strcmp(argv[0], table[i].name))
			return table[i].run(argc, argv);
	return -1;
}

int main(int argc, char **argv)
{
	int code = -1;

	ops_cpu_blas_reexec(argv);
	stork_log_init("stork", STORK_LOG_INFO);
	if (argc > 2 && !strcmp(argv[1], "bench"))
		code = dispatch(benches, sizeof benches / sizeof benches[0], argc - 2, argv + 2);
	else if (argc > 1)
		code = dispatch(commands, sizeof commands / sizeof commands[0], argc - 1, argv + 1);
	if (code >= 0)
		return code;
	fprintf(stderr, "usage: stork-engine bench train|checkpoint|reshard|comm ... | check | export ... | plan ...\n"
		"stork-engine runs these stork commands for stork; see stork(1).\n");
	return STORK_EXIT_USAGE;
}
