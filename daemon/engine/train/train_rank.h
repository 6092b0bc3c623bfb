/*
 * daemon/engine/train/train_rank.h - one training rank's state, shared by the files of
 * the training loop (daemon/engine/train/ and the rank's checkpoints in
 * daemon/engine/checkpoint/); private to them.
 */
#ifndef STORK_DAEMON_TRAIN_RANK_H
#define STORK_DAEMON_TRAIN_RANK_H

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/data/data.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "daemon/engine/parallel/pipeline.h"
#include "daemon/node/rank_log.h"
#include "daemon/engine/train/spike.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/parallel/zero.h"
#include "daemon/engine/parallel/zero_mirror.h"
#include "daemon/engine/parallel/zero_paged.h"

struct rank {
	const struct train_node *node;
	const struct stork_config *cfg;
	int local, rank;
	struct comm *comm;             /* storkd's, or the GPU wrapper of it (device_comm) */
	struct comm *host_comm;        /* storkd's own communicator of this rank */
	const struct ops *ops;         /* where the rank computes: ops_cpu or ops_cuda */
	char device_id[256];           /* host/PCI address of its GPU, for the collectives */
	char gpu_bus[32];              /* its GPU's PCI bus id, for NVML; "" on a CPU rank */
	void *nvml_dev;                /* its GPU's NVML handle, once found */
	int gpu;                       /* its CUDA device (GPU ranks) */
	enum ops_precision precision;  /* its matrix products (train.precision, auto decided) */
	float *ckpt_host;              /* host copy of the rank's state for checkpoints: a GPU
					* rank's (pinned), or checkpoint.async's */
	struct ckpt_async *async;      /* checkpoint.async: the checkpoint in flight */
	struct par_layout lay;         /* this rank's place in dp x tp x pp */
	struct par_groups grp;
	struct pipeline pipe;          /* when lay.pp > 1 */
	struct zero_plan zero;         /* when lay.zero */
	struct zero_mirror mirror;     /* lay.zero under restart.in_place: the next replica's part */
	struct zero_paged paged;       /* lay.zero 2 and 3: what the rank gives back (zero_paged.h) */
	struct grad_sync *sync;        /* parallel.overlap, with data-parallel replicas */
	double sync_ms, sync_wait_ms;  /* this step's gradient all-reduce: its time, the rank's wait */
	struct rank_log log;
	struct gpt2 model;
	struct adamw_state opt;
	struct data_loader *train, *val;
	int *inputs, *targets;
	struct train_rank_result *res;
	double ckpt_seconds;           /* how long the last checkpoint took; 0 = none yet */
	double ckpt_last_at;           /* monotonic: the last checkpoint's commit, or the start */
	double ckpt_interval_s;        /* rank 0: wall time between periodic ones; 0: none
					* (checkpoint_schedule.h) */
	int ckpt_failures;             /* periodic checkpoints failed in a row */
	struct gpt2_config shape;      /* the model's shape, for a rollback's reload */
	struct data_position data_start; /* the first batch, for a rollback to the start */
	int rollbacks;                 /* rollbacks (on_nonfinite, on_spike) done so far */
	int rollback_pending;          /* ROLLBACK_*: this step asks for one before the next */
	int64_t skip_batch_step;       /* step whose batch a rollback skips; -1: none */
	int skip_batch_cause;          /* ROLLBACK_*: why that batch is skipped */
	struct spike_window spike;     /* train.on_spike's recent accepted steps */
	int64_t nan_injected_step;     /* test builds: the last step given a NaN; -1: none */
	int64_t spike_injected_step;   /* test builds: the last step given a spike; -1: none */
	int64_t first_step;            /* the step this attempt (or rollback) started at */
	double step_ms_avg;            /* moving average of the step time, for the ETA */
	double compute_ms;             /* this step's forward and backward on this rank */
	int threads;                   /* CPU threads of this rank (CPU ranks) */
	int64_t updated_steps;         /* updates applied (train_recover.c) */
	struct data_position updated_pos; /* the data position of the step after them */
	int64_t applied_steps;         /* ZeRO-1: updates applied to the rank's own parts, which
					* run ahead of updated_steps while the all-gather runs */
	struct data_position applied_pos; /* as updated_pos */
	double recover_since;          /* a regroup's start (monotonic) until its first step; 0 none */
	double flops_per_token;        /* rank 0: the model's, for MFU (train_telemetry.c) */
	double peak_flops;             /* rank 0: the run's peak FLOP/s; 0: no MFU */
	double one_peak_flops;         /* rank 0: one rank's peak, taken once; 0: not yet */
	char one_peak_how[256];        /* how a CPU rank's peak was measured */
	double sample_at;              /* monotonic: the next sample of the rank's memory */
	char err[1024];
};

/*
 * Record why this rank stops (the first reason wins) and return code.
 * rank_fail: on its own (the other ranks are woken out of any collective);
 * rank_fail_agreed: for a stop every rank agreed on (nothing aborted);
 * rank_fail_collective: a collective failed because another rank did (a
 * secondary failure, so that exit_info.json names the first cause).
 */
int rank_fail(struct rank *r, int code, const char *msg);
int rank_fail_agreed(struct rank *r, int code, const char *msg);
int rank_fail_collective(struct rank *r);

/* ------------------------------------------------ train_guard.c */

/* Why a rollback is pending (rank.rollback_pending) or a batch skipped. */
enum { ROLLBACK_NONE = 0, ROLLBACK_NONFINITE = 1, ROLLBACK_SPIKE = 2 };

/*
 * train.on_nonfinite, after a step whose global gradient norm is not
 * finite: 0 to go on without this update (skip; rollback pending), or the
 * exit code (stop, or the rollbacks spent).
 */
int diverged(struct rank *r, int64_t step, float loss, float norm);
/*
 * train.on_spike, after a step with a finite norm: loss is the loss
 * averaged over the replicas, norm the global gradient norm, so every rank
 * decides alike. 0 with *drop set when this step's update is to be dropped
 * (skip; rollback, then pending), or the exit code.
 */
int spike_guard(struct rank *r, int64_t step, float loss, float norm, int *drop);
/* Test builds: a NaN in the loss and gradients at STORK_FAULT_NAN_STEP. */
void inject_nan(struct rank *r, int64_t step, float *loss);
/*
 * Test builds: the factor this step's loss is multiplied by on this rank
 * (STORK_FAULT_SPIKE_STEP, _SCALE, _REPLICA); 1 on any other step.
 */
float spike_fault(struct rank *r, int64_t step);

/* ------------------------------------------------ train_start.c */

/* The model's shape: the configuration's, or model.init_from's. */
int rank_model_shape(struct rank *r, struct gpt2_config *mc);
/*
 * This rank's place in dp x tp x pp and the communicators of its groups;
 * the layout goes to the rank's log and, once, to stdout.
 */
int rank_make_layout(struct rank *r, const struct gpt2_config *mc);
/*
 * What the forward pass keeps (train.recompute), whether it runs fused
 * kernels (train.fused; every backward pass scales the loss by
 * 1/grad_accum), and the pipeline schedule's buffers and activation
 * slots (pipeline parallelism only).
 */
int rank_init_pipeline(struct rank *r);
/* The rank's training and validation data (data.train, data.val), at the batch it resumes from. */
int rank_open_data(struct rank *r);
/*
 * The model and optimizer: from the newest valid checkpoint, else from
 * model.init_from, else built from the configured sizes and seed. Every rank
 * does the same for its shard, so replicas start identical without a
 * broadcast.
 */
int rank_init_model(struct rank *r, const struct gpt2_config *mc, int64_t *start_step);
/*
 * A model of the shape mc and its optimizer state, for this rank's shard,
 * with nothing read and no collective: a spare's, whose state a replica
 * then sends (train_recover.c).
 */
int rank_init_model_blank(struct rank *r, const struct gpt2_config *mc);
/* parallel.overlap: a communication thread for the data-parallel group (nothing to do without replicas). */
int rank_start_grad_sync(struct rank *r);

/* parallel.zero 2 and 3: the rank's one-layer buffers and hooks (zero_paged.h), again after a rollback. */
int rank_start_zero_paged(struct rank *r);

/* ------------------------------------------------ train_step.c */

/* Every data.val_every steps: the validation loss, averaged over the replicas. */
int rank_validate(struct rank *r, int64_t step);
/*
 * Forward and backward over grad_accum micro-batches; returns the mean loss
 * (on the last stage; the pipeline schedules the micro-batches 1F1B).
 */
int rank_compute_gradients(struct rank *r, int64_t step, float *loss);
/*
 * Average the gradients over the replicas (all-reduce, or ZeRO-1's
 * reduce-scatter), add the tied embedding's two halves (first and last
 * stage), clip to the global norm, update, and (ZeRO-1) gather the
 * parameters back. Returns 0 with the norm before clipping and
 * *loss averaged over the replicas.
 */
int rank_update(struct rank *r, int64_t step, float *loss, float *norm_out, float *lr_out);
/*
 * The tensors every tensor-parallel rank holds whole: tensor-parallel rank
 * 0's copy, broadcast over the group after an update with replicas (or
 * always, after a regroup that may have cut the broadcast short).
 */
int rank_sync_replicated(struct rank *r, int always);
/*
 * The update of step steps-1 is applied (or dropped): the state a
 * regroup (train_recover.c) starts from, with the data position of the
 * next step.
 */
void rank_mark_updated(struct rank *r, int64_t steps);

/* ------------------------------------------------ train_telemetry.c */

/*
 * At the start of an attempt or after a regroup: rank 0 works out the
 * model's FLOPs per token and the run's peak (logged with how), and the
 * data wait so far is dropped.
 */
void rank_telemetry_start(struct rank *r);
/*
 * The step's telemetry into the metrics (data_wait_ms; rank 0: mfu; every
 * metrics.sample_s: rank_bytes and, local rank 0, host_rss_bytes) and the
 * node's progress; returns the MFU (0 on other ranks than 0).
 */
double rank_telemetry_step(struct rank *r, int64_t step, double tokens_per_s);

/* ------------------------------------------------ train_recover_zero.c */

/*
 * ZeRO-1 under restart.in_place: the copy of another replica's part of the
 * optimizer state (zero_mirror.h), made and filled from it; a collective
 * over the data-parallel group. Nothing to do otherwise.
 */
int rank_init_mirror(struct rank *r);
/*
 * ZeRO-1 after a regroup: every old part of the optimizer state and of
 * the parameters from a survivor that holds it, at the newest step any
 * rank applied, cut again into this rank's part of the new group (a
 * spare or rejoiner, updated_steps -1, holds nothing and receives all);
 * *start is that step. 0, or -1 with the rank failed (a part was lost).
 */
int rank_regather_zero(struct rank *r, int64_t *start);

/* ------------------------------------------------ train_recover.c */

/*
 * restart.in_place, after a collective failed: let go of the world, wait
 * for the node's regroup, and take the new world's place, the state of
 * the last step every replica completed and the data from there. 0 with
 * the step to go on from in *start, or -1 (the rank ends as it failed).
 */
int rank_recover(struct rank *r, int64_t *start);
/*
 * restart.spares, a spare's rank from its start: wait until the node takes
 * a lost one's place, then take the rank's place in the new world and the
 * state of its replica from a live one. 0 with the step to go on from in
 * *start; -1 when the rank ends (a spare never needed ends with 0).
 */
int rank_join_as_spare(struct rank *r, const struct gpt2_config *mc, int64_t *start);
/* After a regroup, once the first step is done: the time it cost, as a metric. */
void rank_recovered_step(struct rank *r, int64_t steps);

/* ------------------------------------------------ train_stop.c */

/*
 * The stop decision, the same on every rank: whether any rank has seen the
 * stop signal or rank 0's deadline guard fired (step_s: the step that just
 * ended took that long), whether a stop checkpoint still fits before the
 * job's end (*no_room), whether a stop is a cancellation (*cancelled),
 * whether some rank's checkpoint.async write still runs (*writing), and
 * whether rank 0's clock calls for a periodic checkpoint (*time_due,
 * checkpoint_schedule.h).
 */
int rank_agree_stop(struct rank *r, int64_t steps_done, double step_s, int *stop, int *no_room,
		    int *cancelled, int *writing, int *time_due);
/*
 * After the stop checkpoint is committed: global rank 0 requeues the job,
 * exactly once; every rank then ends with the same reason. A stop close to
 * the job's end time is a timeout (the --signal=USR1@N route), any other a
 * preemption.
 */
int rank_stop_and_requeue(struct rank *r, int64_t steps_done);
/*
 * A cancellation (scancel): the job ends for good and nothing is requeued.
 * checkpointed: the checkpoint of steps_done was committed before Slurm's
 * KILL, for a new job to start from; else the previous one stays the
 * latest.
 */
int rank_stop_cancelled(struct rank *r, int64_t steps_done, int checkpointed);
/* "SIGUSR2": the signal that asked this node to stop, for the log; "" when
 * none did here (another node's, STORK_STOP_AT_STEP). */
const char *rank_stop_cause(const struct rank *r, char *buf, size_t len);
/*
 * A stop with too little time left for its checkpoint (rank 0's verdict):
 * the previous checkpoint stays the latest, and the job is still requeued
 * so that it resumes from it.
 */
int rank_stop_without_checkpoint(struct rank *r, int64_t steps_done);

/* ------------------------------------------------ train_progress.c */

/* Every train.log_every steps and at the last: rank 0's progress line, the rank's log line and metrics. */
void rank_report_step(struct rank *r, int64_t step, float loss, float lr, float norm, double ms,
		      uint64_t sent);

/* ------------------------------------------------ train_checkpoint_state.c */

/* Data parallelism only: every rank a whole replica, the checkpoint one model file. */
int plain_layout(const struct par_layout *l);
/* The settings this run trains under, as a checkpoint records them. */
struct ckpt_settings settings_now(const struct rank *r);
/* This rank's shard of a sharded checkpoint: its place, its parameters and moment parts. */
void shard_info(const struct rank *r, struct ckpt_shard_info *info);
/* Seconds a checkpoint is expected to take, with a margin. */
double checkpoint_need(const struct rank *r);
/* A commit's seconds: the last one's, else an estimate from the model's size. */
double checkpoint_commit_estimate(const struct rank *r);
/* Whether a checkpoint fits before the job's end (*left, *need: the figures). */
int checkpoint_fits(struct rank *r, double *left, double *need);
/* Whether the stop's checkpoint fits before a cancelled job's KILL. */
int checkpoint_fits_kill(struct rank *r, double *left, double *need);
/* What a checkpoint of steps_done records besides the model. */
void checkpoint_state(const struct rank *r, int64_t steps_done, struct ckpt_state *st);
/* The parameters and moments in host memory: the live arrays on a CPU, a pinned copy on a GPU. */
int checkpoint_host_state(struct rank *r, float **p, float **m, float **v);

/* ------------------------------------------------ train_checkpoint.c */

/* Rank 0 prepares step_N.tmp/; its answer reaches everyone before any rank writes. */
int checkpoint_prepare_shards(struct rank *r, int64_t step, const char *root, int *failed);
/*
 * Every rank has written its shard (mine: its checksum and size, size
 * UINT64_MAX when it could not): rank 0 commits, or abandons the attempt;
 * an exit code only when a collective failed, *failed whether it was lost.
 */
int checkpoint_commit_shards(struct rank *r, const struct ckpt_state *st, const char *root,
			     const struct ckpt_layout *layout, const uint64_t mine[2], int *failed);
/* Rank 0's verdict on a whole-model checkpoint reaches every rank. */
int checkpoint_agree_whole(struct rank *r, int64_t step, int32_t ok, int *failed);
/* A checkpoint is committed: the log, the metrics, the run's result, the job's output. */
void checkpoint_report_committed(struct rank *r, int64_t steps_done, double seconds,
				 double stall_s, int background);
/*
 * Commit the checkpoint of steps_done. Returns an exit code when the world
 * failed (a collective); otherwise 0, with *failed set (and r->err saying
 * why) when this checkpoint could not be written, the same on every rank.
 */
int checkpoint(struct rank *r, int64_t steps_done, int *failed);
/* After a checkpoint attempt: 0 to go on, or the stop's exit code (checkpoint_failed). */
int after_checkpoint(struct rank *r, int64_t steps_done, int failed, int must_succeed);

/* ------------------------------------------------ train_checkpoint_step.c */

/*
 * At a checkpoint step (must: a stop's or the last step's): the node-local
 * tier, then the run directory (synchronous, or checkpoint.async) when this
 * one is to be persisted. 0 to go on, or the exit code.
 */
int checkpoint_at(struct rank *r, int64_t steps_done, int must);

/* ------------------------------------------------ train_checkpoint_async.c */

/*
 * checkpoint.async, at the rank's start (step start
 * done): the host copy its background writes need, allocated and touched,
 * when this rank has one ahead; 0 or the exit code.
 */
int checkpoint_async_prepare(struct rank *r, int64_t start);
/*
 * checkpoint.async: begin the checkpoint of
 * steps_done in the background, after committing the one in flight; 0 or
 * the exit code. Its failure, if any, comes at the commit.
 */
int checkpoint_async_begin(struct rank *r, int64_t steps_done);
/* Before an optimizer update: wait until the write in flight has its copy. */
void checkpoint_async_before_update(struct rank *r);
/* Whether this rank's write is still running (for the stop all-reduce). */
int checkpoint_async_busy(struct rank *r);
int checkpoint_async_in_flight(const struct rank *r);
/*
 * Every rank at the same step, any_busy the all-reduced busy flag: commit
 * the checkpoint in flight once no rank is writing. 0 to go on, or the
 * exit code (checkpoint.max_failures reached, a collective failed).
 */
int checkpoint_async_poll(struct rank *r, int any_busy);
/* Wait for the checkpoint in flight and commit it (a stop, a rollback, the end). */
int checkpoint_async_drain(struct rank *r);
/* Release it; a write still running is waited for, not committed. */
void checkpoint_async_free(struct rank *r);

/* ------------------------------------------------ train_checkpoint_local.c */

/* This node's tier of checkpoint.local_dir; -1 when there is none (or it does not fit). */
int local_tier_root(const struct rank *r, char *out, size_t len);
/* Commit the checkpoint of steps_done on every node's tier; as checkpoint(). */
int checkpoint_local(struct rank *r, int64_t steps_done, int *failed);
/*
 * Collective: whether to resume from the node-local tiers (1, dir: this
 * node's checkpoint) rather than from the run directory's checkpoint of
 * shared_step (-1: none). 1 with the rank failed when a collective failed.
 */
int local_tier_find(struct rank *r, int64_t shared_step, char *dir, size_t len);

/* train_device.c: pin the rank's thread as planned and choose its device (run.device). */
int rank_bind(struct rank *r);
/* The rank's communicator on its device: NCCL or host-staged for GPU ranks. */
int rank_device_comm(struct rank *r);
/* Move the model and optimizer to the rank's device. */
int rank_move_to_device(struct rank *r);

#endif
