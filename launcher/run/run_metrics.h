/*
 * launcher/run/run_metrics.h - the run directory's metrics/ folder, written by
 * stork run when an attempt ends (a stop included):
 *
 *   summary.csv            every rank's metrics rolled up per minute
 *                          (lib/run/metrics_rollup.h), by the summariser
 *                          (launcher 0 unless it left: restart.in_place)
 *   sacct.csv              the job's accounting (sacct -P), by the summariser;
 *                          one comment line saying why when accounting is off
 *   nvidia-smi.node-NNN.xml  each node's GPUs (nvidia-smi -q -x), once, where
 *                          nvidia-smi exists
 *
 * and the run's end as text in its TensorBoard files (daemon/node/tensorboard.h).
 *
 * Best effort: a file that cannot be made is a warning, never a failed run.
 */
#ifndef STORK_LAUNCHER_RUN_METRICS_H
#define STORK_LAUNCHER_RUN_METRICS_H

/* This node's files; summarise: the run's too (the summariser's launcher). */
void run_metrics_write(const char *run_dir, int node_index, int summarise);

/*
 * The attempt's end ("reason (exit N): message") at step, as text in a new
 * event file of tensorboard/rank-000/, when the daemons wrote that directory
 * (metrics.tensorboard).
 */
void run_metrics_tensorboard_end(const char *run_dir, long long step, const char *text);

/*
 * sacct's rows of job (the header line first, fields | separated, as
 * sacct.csv holds them), or NULL when sacct cannot run; *status is its
 * exit status. The caller frees the text.
 */
char *run_metrics_sacct(const char *job, int *status);

/* Whether the sacct text's row of job itself says the job has ended (COMPLETED, FAILED, ...). */
int run_metrics_sacct_final(const char *text, const char *job);

#endif
