/*
 * daemon/node/tensorboard.h - metrics.tensorboard: every scalar of the
 * node's ranks' metrics files, as TensorBoard event files
 * (lib/formats/tfevents.h), so that `tensorboard --logdir RUN_DIR/tensorboard`
 * follows the run as it goes.
 *
 *   RUN_DIR/tensorboard/rank-NNN/events.out.tfevents.SECONDS.HOST.PID
 *
 * One directory per rank (a TensorBoard "run": the ranks' curves side by
 * side), one new file per daemon (a requeue or a restart adds one, as
 * TensorBoard expects). The daemon follows each rank's
 * logs/rank-NNN.metrics.jsonl from where it stood at the start (earlier
 * attempts' lines are in their own files) and turns each whole line with a
 * numeric value into a scalar tagged with its metric name, at its step and
 * time: the engine's ranks and the user's program (STORK_METRICS_FILE)
 * alike. Rank 0's file starts with the resolved configuration as text.
 * The launcher adds the run's end (reason and message) as text
 * (launcher/run/run_metrics.h). A failed write is a warning, once; the run goes on.
 */
#ifndef STORK_DAEMON_TENSORBOARD_H
#define STORK_DAEMON_TENSORBOARD_H

#include "lib/formats/tfevents.h"

#include <sys/types.h>

struct tensorboard_rank {
	int rank;
	char metrics[4200];
	long long read_to;       /* how far its metrics file was turned into events */
	struct tfevents events;
};

struct tensorboard {
	struct tensorboard_rank *r;
	int n;
	double poll_at;          /* monotonic: the next look at the metrics files */
	int warned;
};

/*
 * Start following ranks rank_base .. rank_base + n - 1 of run_dir on host.
 * A failure is a warning; the run goes on without the files.
 */
void tensorboard_start(struct tensorboard *tb, const char *run_dir, const char *host,
		       int rank_base, int n);

/* Turn what the metrics files gained into events (at most once a second unless now). */
void tensorboard_poll(struct tensorboard *tb, int now);

/* The last lines, and close. */
void tensorboard_end(struct tensorboard *tb);

#endif
