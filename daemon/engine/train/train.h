/*
 * daemon/engine/train/train.h - the training loop each rank thread runs.
 *
 * One node's storkd runs `local_ranks` threads; each calls train_rank() with
 * the shared node context. Every rank holds a full replica of the model and
 * its optimizer (data parallelism): it reads its own slice of each global
 * batch, and gradients are averaged through lib/comm, whose fixed summation
 * order keeps runs bitwise reproducible.
 *
 * One step:
 *   1. validation loss over data.val before the update of step 0 and of
 *      every val_every-th step;
 *   2. grad_accum micro-steps of forward + backward (loss scaled by
 *      1/grad_accum so the gradients add up to the mean);
 *   3. all-reduce of the gradients (sum, then 1/world), global norm,
 *      clipping, AdamW with the scheduled learning rate;
 *   4. metrics and (rank 0) the progress line on stdout;
 *   5. a MAX all-reduce of the stop flag, so every rank agrees to stop at
 *      the same step; checkpoints every checkpoint.every steps, at the end,
 *      and when stopping.
 */
#ifndef STORK_DAEMON_TRAIN_H
#define STORK_DAEMON_TRAIN_H

#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdint.h>

#include "lib/bind/bind.h"
#include "lib/comm/comm.h"
#include "lib/config/stork_config.h"
#include "lib/bind/topology.h"
#include "daemon/engine/model/model.h"

/* What a rank does besides the model's passes (gpt2_where's phase). */
enum rank_phase {
	RANK_PHASE_STEP_START = GPT2_PHASE_BACKWARD + 1, /* before validation and the passes */
	RANK_PHASE_UPDATE,             /* gradient all-reduce, norm, optimizer */
	RANK_PHASE_VALIDATION,
	RANK_PHASE_STOP_DECISION,
	RANK_PHASE_CHECKPOINT,
};

#define HANG_STACK_FRAMES 48

/*
 * A rank's heartbeat, read by storkd's watchdog (see storkd.c); on a hang,
 * where it was: the collective it waits in, else its phase and block.
 */
struct rank_progress {
	_Atomic int64_t step;          /* steps completed */
	_Atomic double beat;           /* CLOCK_MONOTONIC seconds of the last sign of life */
	_Atomic int done;              /* the rank has returned */
	/* its last step's figures, for the node's .prom file (metrics.prometheus_dir) */
	_Atomic double loss, step_ms, tokens_per_s, mfu, data_wait_ms;
	_Atomic double rank_bytes;     /* the memory it holds */
	_Atomic double rss;            /* local rank 0: storkd's resident memory; -1 unknown */
	_Atomic double gpu_util, gpu_mem; /* a GPU rank's NVML utilisation (%) and memory used; NaN none */
	struct comm_trace trace;       /* its calls on the communicators */
	struct comm_trace comm_thread; /* its communication thread's (parallel.overlap) */
	struct gpt2_where where;       /* its pass, block or phase */
	void *stack[HANG_STACK_FRAMES]; /* its return addresses, when the watchdog asked */
	int stack_n;
	_Atomic int stack_ready;
};

/* "in forward", "at the start", ... (of step N): a phase ("" for none). */
const char *rank_phase_name(int phase);

struct regroup;

struct train_node {
	const struct stork_config *cfg;
	const char *run_dir;
	struct comm_world *world;      /* this node's ranks (in-node backend) */
	struct topo *topo;             /* the node's hardware */
	struct bind_plan *plans;       /* local_ranks binding plans, computed by storkd */
	struct comm *(*rank_comm)(void *arg, int local); /* the global communicator of a local rank */
	void *rank_comm_arg;
	int local_ranks;
	int rank_base;                 /* global rank of local rank 0 */
	int world_size;
	int node_rank;
	char host[64];
	char job_id[32];
	int restart_count;             /* SLURM_RESTART_COUNT: the job's requeues */
	int attempt;                   /* restarts inside this allocation (storkd --attempt) */
	atomic_int *stop_requested;    /* the first stop signal's number, 0 none: set by its handler */
	atomic_llong *stop_signal_ms;  /* when the first stop signal came (CLOCK_MONOTONIC ms), 0 none */
	int64_t stop_at_step;          /* STORK_STOP_AT_STEP: act as if stopped there (0 = off) */
	uint32_t slurm_job;            /* 0 outside Slurm: nothing to requeue */
	time_t job_end_time;           /* 0 when unknown or unlimited */
	int warn_signo, warn_lead;     /* the job's --signal=SIG@LEAD, 0 0 when none */
	int kill_wait;                 /* Slurm's KillWait (s) on rank 0's node; -1 unknown */
	struct rank_progress *progress; /* local_ranks entries */
	int stall_rank, stall_step;    /* fault injection (test builds): -1 = off */
	double step_delay;             /* fault injection: seconds added to every step */
	struct regroup *regroup;       /* restart.in_place across nodes (daemon/node/regroup.h); NULL: off */
	int spare;                     /* restart.spares: this node waits to take a lost one's place */
	int rejoining;                 /* restart.rejoin: a spare in a lost node's own place */
	int rejoin_epoch;              /* and the last regroup node 0 knew of when it started it */
};

struct train_rank_result {
	int exit_code;                 /* lib/exit_codes.h */
	int64_t last_step;             /* steps completed when the rank stopped */
	double fail_time;              /* wall-clock seconds when it failed, 0 if it did not */
	int secondary;                 /* it failed because another rank did */
	char checkpoint[4096];         /* the last checkpoint this rank committed, or "" */
	int64_t checkpoint_step;
	char message[512];             /* why, for exit_info.json and the log */
};

/* Heartbeats are clock_monotonic() seconds (lib/clock.h). */

/* Run local rank `local` of node n to the end. Thread entry point body. */
void train_rank(const struct train_node *n, int local, struct train_rank_result *res);

#endif
