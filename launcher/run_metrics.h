/*
 * launcher/run_metrics.h - the run directory's metrics/ folder, written by
 * stork run when an attempt ends (a stop included):
 *
 *   summary.csv            every rank's metrics rolled up per minute
 *                          (lib/metrics_rollup.h), by launcher 0
 *   sacct.csv              the job's accounting (sacct -P), by launcher 0;
 *                          one comment line saying why when accounting is off
 *   nvidia-smi.node-NNN.xml  each node's GPUs (nvidia-smi -q -x), once, where
 *                          nvidia-smi exists
 *
 * Best effort: a file that cannot be made is a warning, never a failed run.
 */
#ifndef STORK_LAUNCHER_RUN_METRICS_H
#define STORK_LAUNCHER_RUN_METRICS_H

void run_metrics_write(const char *run_dir, int node_index);

#endif
