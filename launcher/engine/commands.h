/*
 * launcher/engine/commands.h - the commands of stork-engine: the stork
 * subcommands that run the training engine (stork(1)). As in
 * launcher/commands.h, each takes argc/argv with argv[0] its own name
 * ("train", "check"...) and returns a process exit code.
 */
#ifndef STORK_LAUNCHER_ENGINE_COMMANDS_H
#define STORK_LAUNCHER_ENGINE_COMMANDS_H

#include "lib/exit_codes.h"

#include <stddef.h>

struct option;
struct stork_config;

int cmd_bench_train(int argc, char **argv);      /* bench_train.c */
int cmd_bench_checkpoint(int argc, char **argv); /* bench_checkpoint.c */
int cmd_bench_reshard(int argc, char **argv); /* bench_reshard.c */
int cmd_check(int argc, char **argv);            /* check.c */
int cmd_plan(int argc, char **argv);             /* plan.c */
int cmd_export(int argc, char **argv);           /* export.c */

/*
 * stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
 * Run as every task of a step (one UCX rank per task); rank 0 prints the
 * table. Returns 0 when every result was exact, STORK_EXIT_INTERNAL when
 * some were wrong or a transfer failed, STORK_EXIT_RENDEZVOUS, or
 * STORK_EXIT_USAGE. (bench_comm.c)
 */
int cmd_bench_comm(int argc, char **argv);

/*
 * The configuration of argv[config_at] with the overrides of the command
 * line applied in order: every --set (longopts' option 's', read again
 * with getopt_long and the short options "h") and every KEY=VALUE after
 * CONFIG; then validated. 0, or -1 with a message naming the file, line
 * and column or the override (config_args.c).
 */
int engine_config_load(struct stork_config *cfg, int argc, char **argv,
		       const struct option *longopts, int config_at, char *err, size_t errlen);

#endif
