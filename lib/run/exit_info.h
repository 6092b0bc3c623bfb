/*
 * lib/run/exit_info.h - why a run ended, for people and for scripts.
 *
 * Every node's launcher writes exit_info.node-NNN.json (atomically); the
 * launcher of node 0 then writes exit_info.json, the summary: the node files'
 * most telling reason and the earliest first failure. Each reason has one
 * exit code (lib/exit_codes.h, documented in stork(1)).
 */
#ifndef STORK_EXIT_INFO_H
#define STORK_EXIT_INFO_H

#include <stddef.h>
#include <stdint.h>

struct json_t;

struct exit_failure {
	int valid;
	int rank;                 /* -1: the node's daemon as a whole */
	char host[64];
	int pid;
	int exit_code;            /* -1 when killed by a signal */
	char signal[16];          /* "SIGKILL", or "" */
	double time;              /* seconds since the epoch */
	int64_t last_step;        /* last completed step; -1 unknown */
	char what[256];
	int secondary;            /* a consequence of another failure (e.g. a dead peer) */
	/* what the user's own program said as it failed (stork run -- PROGRAM), "" when nothing */
	char error[512];          /* "RuntimeError: boom": an uncaught exception's line */
	char frame[512];          /* its traceback's last frame: 'File "t.py", line 9, in main' */
	/* killed for memory (reason out_of_memory): by its cgroup's limit (oom_cgroup) or the kernel */
	int oom;
	char oom_cgroup[2100];    /* the memory cgroup that reached its limit; "" the kernel's killer */
	double oom_limit;         /* that limit in bytes; 0 unknown */
	double oom_held;          /* what the rank held at the last sample; -1 unknown */
};

/* f's out_of_memory from a report's or a record's object of that name (NULL: none). */
void exit_failure_oom_from(struct exit_failure *f, const struct json_t *oom);

/* restart.in_place: a node that left the run while the others went on. */
struct exit_left {
	int node;                 /* its launcher index */
	char host[64];
	int64_t after_step;       /* the steps done when it was lost */
	double seconds;           /* from the loss to the others' new start */
	char why[160];            /* "storkd died of SIGKILL" */
};

#define EXIT_MAX_LEFT 8

struct exit_info {
	const char *reason;       /* exit_reason_name() */
	int exit_code;
	struct exit_failure first_failure;
	char last_checkpoint[4096]; /* path, "" when none */
	int64_t last_checkpoint_step;
	int restart_count;
	char job_id[32];
	char step_id[32];
	int node_rank;
	char host[64];
	char message[1024];
	int attempt;              /* storkd restarts inside this allocation before it */
	struct exit_left left[EXIT_MAX_LEFT]; /* nodes_left: their records are not the run's end */
	int nleft;
};

/* Fill e's nodes_left from a daemon report's "left" array (JSON, may be NULL). */
void exit_info_set_left(struct exit_info *e, const struct json_t *left);

/*
 * Which attempt a summary is of: the job's requeues (SLURM_RESTART_COUNT),
 * the restarts inside this allocation (restart.max_restarts), and the
 * summaries of the attempts that failed and were restarted, oldest first,
 * for the summary's "restarts" list.
 */
struct exit_attempt {
	int restart_count;
	int attempt;
	const struct exit_info *restarts;
	int nrestarts;
	int summariser;        /* the node whose record the summary starts from: 0, or
				* the first that remained when node 0 left (in_place) */
};

/* The exit_info.json reason of an exit code ("completed", "rank_failed"...). */
const char *exit_reason_name(int exit_code);

/* Fill job/step/restart/host fields from the environment; reason from code. */
void exit_info_init(struct exit_info *e, int exit_code, int node_rank);

/* Write run_dir/exit_info.node-NNN.json and the attempt's own record
 * (exit_info.node-NNN.requeue-R.json for the job's requeue R, or
 * ...requeue-R.restart-A.json for restart A inside the allocation).
 * Returns 0 or -1 with a message. */
int exit_info_write_node(const char *run_dir, const struct exit_info *e, char *err, size_t errlen);

/*
 * The path of node n's record of an attempt: RUN_DIR/exit_info.node-NNN.
 * requeue-R.json (R: the job's requeues, SLURM_RESTART_COUNT), with
 * .restart-A before .json for in-job restart A > 0. 0, or -1 when it does
 * not fit in len.
 */
int exit_info_node_path(char *path, size_t len, const char *run_dir, int n, int restart_count,
			int attempt);

/*
 * Whether node n left the run while the others went on
 * (restart.in_place): e's nodes_left names it.
 */
int exit_info_node_left(const struct exit_info *e, int n);

/*
 * The summariser (a->summariser, node 0 unless it left): read the nnodes
 * node records of attempt restart_count, its own first (waiting up
 * to wait_s seconds for the missing ones), summarise and write
 * run_dir/exit_info.json. The summary's
 * exit code is the most telling of the nodes' (a failure over a stop over
 * success); first_failure is the earliest. Returns the summary's exit code,
 * or -1 with a message.
 */
int exit_info_summarise(const char *run_dir, int nnodes, const struct exit_attempt *a,
			double wait_s, struct exit_info *sum, char *err, size_t errlen);

/*
 * The other nodes (1..nnodes-1) that wrote no record of attempt a within
 * wait_s seconds, into missing[] (room for nnodes); returns their number.
 */
int exit_info_missing(const char *run_dir, int nnodes, const struct exit_attempt *a,
		      double wait_s, int *missing);

/* Which of two exit codes says more about the run (for summaries). */
int exit_code_worst(int a, int b);

#endif
