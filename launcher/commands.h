/*
 * launcher/commands.h - the subcommands of `stork`. Each takes argc/argv with
 * argv[0] being the subcommand's own name and returns a process exit code.
 * Those that need the training engine run in stork-engine
 * (launcher/engine/commands.h), which stork executes (launcher/programs.h).
 */
#ifndef STORK_LAUNCHER_COMMANDS_H
#define STORK_LAUNCHER_COMMANDS_H

#include "lib/exit_codes.h"

struct stork_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

int cmd_run(int argc, char **argv);   /* launcher/run/run.c */
int cmd_prep(int argc, char **argv);  /* launcher/prep/prep.c */
int cmd_bench(int argc, char **argv); /* launcher/bench/bench.c */
int cmd_bench_launch(int argc, char **argv); /* launcher/bench/bench_launch.c */
int cmd_report(int argc, char **argv); /* launcher/report/report.c */
int cmd_bench_report(int argc, char **argv); /* launcher/bench/bench_report.c */

/* stork check's two forms: this node (stork-engine's check.c), and the
 * preflight of a job's nodes (launcher/stork.c) */
#define CHECK_USAGE \
	"usage: stork check                 this node: the build, the CPU backend, the GPUs,\n" \
	"                                   driver, CUDA and NCCL, and an all-reduce over the GPUs\n" \
	"       stork check --all CONFIG [--set KEY=VALUE]... [KEY=VALUE]...\n" \
	"                                   in a job (srun): the preflight of every node, no\n" \
	"                                   training (stork run CONFIG preflight.enabled=only)\n"

#endif
