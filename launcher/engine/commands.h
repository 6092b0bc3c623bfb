/*
 * launcher/engine/commands.h - the commands of stork-engine: the stork
 * subcommands that run the training engine (stork(1)). As in
 * launcher/commands.h, each takes argc/argv with argv[0] its own name
 * ("train", "check"...) and returns a process exit code.
 */
#ifndef STORK_LAUNCHER_ENGINE_COMMANDS_H
#define STORK_LAUNCHER_ENGINE_COMMANDS_H

#include "lib/exit_codes.h"

int cmd_bench_train(int argc, char **argv);      /* bench_train.c */
int cmd_bench_checkpoint(int argc, char **argv); /* bench_checkpoint.c */
int cmd_bench_reshard(int argc, char **argv); /* bench_reshard.c */
int cmd_check(int argc, char **argv);            /* check.c */
int cmd_export(int argc, char **argv);           /* export.c */

/*
 * stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
 * Run as every task of a step (one UCX rank per task); rank 0 prints the
 * table. Returns 0 when every result was exact, STORK_EXIT_INTERNAL when
 * some were wrong or a transfer failed, STORK_EXIT_RENDEZVOUS, or
 * STORK_EXIT_USAGE. (bench_comm.c)
 */
int cmd_bench_comm(int argc, char **argv);

#endif
