/*
 * lib/slurm/slurm_tasks.h - how many tasks of the step each node runs, as Slurm
 * writes it in SLURM_STEP_TASKS_PER_NODE: "2(x3),1" is two tasks on each
 * of the first three nodes of the step's node list and one on the fourth.
 * The rendezvous names a missing launcher's host from it, and the launcher
 * finds the other tasks of its own host (launcher/run/host_tasks.c).
 */
#ifndef STORK_LIB_SLURM_TASKS_H
#define STORK_LIB_SLURM_TASKS_H

/*
 * Parse s into counts[0..n-1] (at most max nodes). Returns n, or -1 when s
 * is malformed, empty or names more than max nodes.
 */
int slurm_tasks_per_node(const char *s, int *counts, int max);

#endif
