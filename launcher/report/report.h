/*
 * launcher/report/report.h - a run read back from its directory, for `stork
 * report`: what the text summary (launcher/report/report.c) and the HTML page
 * (launcher/report/report_html.c) show, loaded once (launcher/report/report_data.c).
 *
 * Everything comes from the files stork(1) documents: exit_info.json and
 * node 0's per-attempt records, config/slurm_env.json,
 * logs/rank-NNN.metrics.jsonl, metrics/sacct.csv, checkpoints/latest. A
 * file that is missing or damaged is recorded in `problems`, never fatal.
 */
#ifndef STORK_REPORT_H
#define STORK_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#define REPORT_STRAGGLER_MARGIN 0.10

/* Values of one metric against step, in the order they were logged. */
struct series {
	double *v;
	long *step;
	size_t n, cap;
};

/* One run of the training: a requeue of the job, or a restart inside it. */
struct report_attempt {
	int requeue, attempt;          /* -1 when the metrics predate these fields */
	struct series train_loss, val_loss;
	char ended[64];                /* node 0's reason for this attempt, "" if unknown */
	char message[512];
};

/* A loss spike train.on_spike found (rank 0's loss_spike lines; the latest one per step). */
struct report_spike {
	long step;
	char action[16];               /* warn, skip or rollback */
	double z;                      /* the larger of the two z-scores */
	double loss, loss_z, norm, norm_z;
};

struct report_rank {
	int rank;                      /* from the file name rank-NNN */
	struct series tps, step_ms, compute_ms; /* the latest value logged for each step */
	struct series pipe_wait_ms, net_bytes; /* pipeline_wait_ms, net_bytes_sent (when logged) */
	struct series data_wait_ms, rank_bytes; /* the step's wait for its batch, the memory it holds */
	struct series rss;             /* host_rss_bytes: storkd's resident memory (a node's first rank) */
	struct series mfu;             /* model FLOP utilisation (rank 0) */
	struct series cpu_pct;         /* a program rank's CPU use, its children with it */
	struct series gpu_util, gpu_mem; /* a GPU rank's NVML figures: utilisation %, memory used */
	double median_step_ms, median_compute_ms, median_tps;
	int straggler;
};

/* restart.in_place: a node lost while the others went on (rank 0's metric membership). */
struct report_member {
	long step;                     /* the step the run went on from */
	double seconds;                /* the regroup's */
	double lost_s;                 /* the metric recovery: from the loss to the next step; NaN */
	int ranks;                     /* the world after it */
	int joined;                    /* a node that came back (restart.rejoin), named in lost */
	char lost[64], by[64], why[160]; /* the node lost, the spare in its place ("" none), why */
};

struct run_report {
	char dir[4096];
	json_t *exit_info;             /* NULL when missing or damaged */
	json_t *env;                   /* config/slurm_env.json */
	struct report_attempt *attempts;
	int nattempts;
	struct series train_loss, val_loss; /* rank 0, the latest value for each step */
	struct series checkpoint_s;    /* rank 0: commit seconds by step */
	struct series checkpoint_stall_ms; /* rank 0: the training loop's stall per checkpoint */
	struct series rollbacks;       /* rank 0: at the step that spiked or diverged,
					* the step gone back to */
	struct report_spike *spikes;   /* in step order */
	int nspikes;
	struct report_member *members; /* in step order */
	int nmembers;
	struct report_rank *ranks;
	int nranks;
	double median_compute_ms;      /* the median of the ranks' medians */
	int stragglers;
	char *sacct;                   /* metrics/sacct.csv's text, or NULL */
	int sacct_refreshed;           /* sacct asked again: the job had ended since */
	char latest_checkpoint[256];   /* checkpoints/latest's target, or "" */
	int program;                   /* a run of the user's program (stork run -- PROGRAM) */
	char program_checkpoint[256];  /* then the newest entry of its checkpoints/, or "" */
	char requeues[4096];           /* every requeue of the job and why, one per line
					* ("requeue 0: preempted_requeued: ..."); or "" */
	char preflight[2048];          /* what the preflight did: its requeues, the nodes it
					* named (metrics/preflight.csv), one per line; or "" */
	char problems[2048];           /* files missing or damaged, one per line */
};

/* Load dir; 0, or -1 (out of memory). A missing file is a problem, not an error. */
int report_load(const char *dir, struct run_report *rep);
void report_free(struct run_report *rep);

double series_median(const struct series *s);
double series_last(const struct series *s);
/* The largest value, NaN for none. */
double series_max(const struct series *s);

/* The spike at step, or NULL. */
const struct report_spike *report_spike_at(const struct run_report *rep, long step);

/* Where attempt a stopped: its last trained step (-1 when it trained none), and why. */
long report_stop_step(const struct report_attempt *a);
const char *report_stop_reason(const struct report_attempt *a);

/*
 * When the run ended out_of_memory: what to change for it to fit (the
 * engine's memory levers, or the program's own), else NULL.
 */
const char *report_oom_advice(const struct run_report *rep);

/* The HTML page of rep on f. 0, or -1 when writing fails. */
int report_write_html(const struct run_report *rep, FILE *f);

#endif
