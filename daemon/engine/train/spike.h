/*
 * daemon/engine/train/spike.h - the loss-spike detector of train.on_spike: each step's
 * loss and gradient norm against a window of the steps accepted before it.
 *
 * A step is a spike when its loss or its gradient norm (before clipping)
 * lies more than `zscore` standard deviations above the mean of the window
 * (the last `window` accepted steps, oldest first). The detector judges
 * nothing until the window holds `min_steps` values. A spiked step does not
 * enter the window (its outlier would widen the deviation that judges the
 * next ones); every other step does, the oldest value leaving a full one.
 * A standard deviation under SPIKE_STD_FLOOR of the mean counts as that
 * much, so that the tiny wobbles of a plateau are not spikes.
 *
 * After `max_in_row` spikes in a row the loss has not spiked but moved: the
 * window is emptied and fills again from the new level (spike_observe
 * says so in its verdict).
 *
 * Pure: no I/O, no globals, the same bits from the same values. The caller
 * feeds it values that are the same on every rank (the global gradient
 * norm, the loss averaged over the replicas), so every rank decides alike;
 * the window travels in the checkpoint's state.json, so a resumed run
 * decides as the uninterrupted one would.
 */
#ifndef STORK_DAEMON_SPIKE_H
#define STORK_DAEMON_SPIKE_H

#include "lib/config/stork_config.h"

/* The largest train.spike_window. */
#define SPIKE_WINDOW_MAX STORK_SPIKE_WINDOW_MAX
/* A window's standard deviation counts as at least this fraction of its mean. */
#define SPIKE_STD_FLOOR 0.01

struct spike_params {
	int window;        /* accepted steps the statistics cover */
	int min_steps;     /* values the window needs before a step is judged */
	double zscore;     /* standard deviations above the mean that make a spike */
	int max_in_row;    /* spikes in a row after which the window starts again */
};

/* The accepted steps' values, oldest first. */
struct spike_window {
	int n;
	int in_row;        /* spikes in a row since the last accepted step */
	float loss[SPIKE_WINDOW_MAX];
	float norm[SPIKE_WINDOW_MAX];
};

struct spike_verdict {
	int judged;        /* the window held min_steps values and both were finite */
	int spike;         /* loss_z or norm_z above the threshold */
	int restarted;     /* this spike was the max_in_row-th in a row: the window emptied */
	int window;        /* the values it was judged against */
	double loss_z, norm_z;          /* NaN when not judged */
	double loss_mean, norm_mean;    /* the window's, for the log */
};

/* An empty window. */
void spike_init(struct spike_window *w);

/* Keep only the newest `window` values (a resume under a smaller train.spike_window). */
void spike_trim(struct spike_window *w, int window);

/*
 * Judge one step's loss and norm against w without changing it. Returns
 * v->spike. Non-finite values are not judged (the divergence guard's).
 */
int spike_judge(const struct spike_window *w, const struct spike_params *p, float loss,
		float norm, struct spike_verdict *v);

/*
 * Judge the step and update w: a spike counts in in_row (and the
 * max_in_row-th empties w), any other finite step enters w. Returns
 * v->spike.
 */
int spike_observe(struct spike_window *w, const struct spike_params *p, float loss, float norm,
		  struct spike_verdict *v);

#endif
