/*
 * launcher/bench_comm.h - `stork bench comm`: all-reduce bandwidth across
 * the tasks of a Slurm step over UCX, printed as an nccl-tests-style table.
 */
#ifndef STORK_LAUNCHER_BENCH_COMM_H
#define STORK_LAUNCHER_BENCH_COMM_H

/*
 * stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
 * argv[0] is "comm". Run as every task of a step (one UCX rank per task);
 * rank 0 prints the table. Returns an exit code: 0 when every result was
 * exact, STORK_EXIT_INTERNAL when some were wrong or a transfer failed,
 * STORK_EXIT_RENDEZVOUS, or STORK_EXIT_USAGE.
 */
int bench_comm(int argc, char **argv);

#endif
