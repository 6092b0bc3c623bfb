/*
 * daemon/engine/checkpoint/train_checkpoint.c - a rank's part in committing a checkpoint:
 * whether one still fits before the job's end, the rank's shard and its
 * host copy, the job's commit (every shard durable before rank 0 moves
 * `latest`), and what a failed one means for the run. The file formats
 * and the commit's steps are daemon/engine/checkpoint/checkpoint.c's.
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/ckpt_writer.h"

#include "kernels/ops.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Data parallelism only: every rank a whole replica, the checkpoint one model file. */
int plain_layout(const struct par_layout *l)
{
	return l->tp == 1 && l->pp == 1 && !l->zero;
}

/* The settings this run trains under, as a checkpoint records them. */
struct ckpt_settings settings_now(const struct rank *r)
{
	const struct stork_config *c = r->cfg;
	struct ckpt_settings w = {
		.batch_size = c->train.batch_size, .grad_accum = c->train.grad_accum,
		.seq_len = c->train.seq_len, .dp = r->lay.dp, .tp = r->lay.tp, .pp = r->lay.pp,
		.zero = r->lay.zero, .steps = c->train.steps, .lr = c->train.lr,
	};
	return w;
}

/*
 * Whether a checkpoint still fits before the job's end: it must, with a
 * margin, take no longer than the last one did (the first one is guessed at
 * 100 MB/s for the model and both moments). A checkpoint that cannot finish
 * would only be cut by the kill; better to keep the previous one and say so.
 */
double checkpoint_need(const struct rank *r)
{
	double est = r->ckpt_seconds > 0 ? r->ckpt_seconds :
					   (double)r->model.num_params * 12.0 / 100e6;

	/* half as long again as the last one, and half a second for the requeue RPC */
	return est * 1.5 + 0.5;
}

/* Test builds: STORK_FAULT_NO_ROOM_RANK=R makes rank R believe that no
 * checkpoint fits any more. */
static void no_room_fault(const struct rank *r, double *left)
{
#ifdef STORK_FAULT_INJECTION
	const char *s = getenv("STORK_FAULT_NO_ROOM_RANK");

	if (s && *s && strtol(s, NULL, 10) == r->rank)
		*left = 0;
#else
	(void)r;
	(void)left;
#endif
}

int checkpoint_fits(struct rank *r, double *left, double *need)
{
	time_t end = r->node->job_end_time;
	/* after the TERM at the time limit, Slurm waits KillWait before the KILL */
	double grace = r->node->kill_wait > 0 ? r->node->kill_wait : 0;

	*need = checkpoint_need(r);
	*left = end ? (double)(end - time(NULL)) + grace : 1e30;
	no_room_fault(r, left);
	return *left >= *need;
}

/*
 * A cancelled job gets Slurm's KILL KillWait seconds after the TERM
 * (Slurm's default, 30 s, when slurmctld could not say), whatever its time
 * limit: whether the stop's checkpoint fits in what is left of that since
 * the first stop signal came.
 */
int checkpoint_fits_kill(struct rank *r, double *left, double *need)
{
	long long ms = r->node->stop_signal_ms ? atomic_load(r->node->stop_signal_ms) : 0;
	double since = ms > 0 ? clock_monotonic() - (double)ms / 1e3 : 0;

	*need = checkpoint_need(r);
	*left = (r->node->kill_wait >= 0 ? r->node->kill_wait : 30) - since;
	no_room_fault(r, left);
	return *left >= *need;
}

/* This rank's shard of a sharded checkpoint: its place, its parameters and moment parts. */
void shard_info(const struct rank *r, struct ckpt_shard_info *info)
{
	ckpt_shard_info_of(&r->model.config, &r->lay, info);
	info->opt_step = r->opt.step;
}

/*
 * The parameters and moments in host memory for a checkpoint: the rank's
 * own arrays on the CPU; on a GPU, a pinned host copy (made once, reused).
 */
int checkpoint_host_state(struct rank *r, float **p, float **m, float **v)
{
	size_t np = r->model.num_params, no = r->opt.n;

	if (r->ops == &ops_cpu) {
		*p = r->model.params;
		*m = r->opt.m;
		*v = r->opt.v;
		return 0;
	}
	if (!r->ckpt_host && !(r->ckpt_host = r->ops->host_alloc((np + 2 * no) * sizeof(float))))
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of pinned host memory for the checkpoint");
	*p = r->ckpt_host;
	*m = *p + np;
	*v = *m + no;
	gpt2_params_to_host(&r->model, *p);
	adamw_to_host(&r->opt, *m, *v);
	return 0;
}

/* What a checkpoint records besides the model: the step, the data's place, the settings. */
void checkpoint_state(const struct rank *r, int64_t steps_done, struct ckpt_state *st)
{
	*st = (struct ckpt_state){
		.step = steps_done,
		.config_hash = config_hash(r->cfg),
		.model_hash = config_model_hash(r->cfg),
		.restart_count = r->node->restart_count,
		.global_batch = (int64_t)r->cfg->train.batch_size * r->cfg->train.grad_accum * r->lay.dp,
		.was = settings_now(r),
		.spike = r->spike,
	};
	data_get_position(r->train, &st->train);
}

/* Rank 0 prepares step_N.tmp/; its answer reaches everyone before any rank writes. */
static int prepare_shards(struct rank *r, int64_t step, const char *root, int *failed)
{
	int32_t ok = 1;

	if (r->rank == 0 && ckpt_prepare(root, step, r->err, sizeof r->err) < 0)
		ok = 0;
	if (comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	if (!ok && r->rank != 0)
		snprintf(r->err, sizeof r->err, "rank 0 could not prepare checkpoint step %" PRId64, step);
	*failed = !ok;
	return 0;
}

/*
 * Every rank has written its shard (mine: its checksum and size, size
 * UINT64_MAX when it could not): the checksums travel to rank 0 (an
 * all-gather), which commits. A rank that could not write says so in the
 * all-gather instead of aborting the world: rank 0 then abandons the
 * attempt (`latest` stays the previous checkpoint) and every rank learns,
 * from the same collectives, that this checkpoint failed. Returns an exit
 * code only when a collective failed; *failed says whether the checkpoint
 * was lost (r->err: why, on the rank that knows).
 */
static int commit_shards(struct rank *r, const struct ckpt_state *st, const char *root,
			 const struct ckpt_layout *layout, const uint64_t mine[2], int *failed)
{
	int W = r->node->world_size, code = 0;
	uint64_t *pairs = calloc(2 * (size_t)W, sizeof *pairs);
	uint64_t *sums = calloc(2 * (size_t)W, sizeof *sums), *sizes = sums + W;
	int32_t ok;

	*failed = 0;
	if (!pairs || !sums) {
		code = rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the checkpoint");
		goto out;
	}
	if (comm_allgather(r->comm, mine, pairs, 2, COMM_INT64) < 0) {
		code = rank_fail_collective(r);
		goto out;
	}
	for (int k = 0; k < W; k++) {
		sums[k] = pairs[2 * k];
		sizes[k] = pairs[2 * k + 1];
		if (sizes[k] == UINT64_MAX && !*failed) {
			*failed = 1;
			if (mine[1] != UINT64_MAX)
				snprintf(r->err, sizeof r->err,
					 "rank %d could not write its shard of checkpoint step %" PRId64, k,
					 st->step);
		}
	}
	if (*failed)
		goto out;
	ok = r->rank != 0 || ckpt_commit(root, st, layout, sums, sizes, r->cfg->checkpoint.keep,
					 r->err, sizeof r->err) == 0;
	/* nobody reports the checkpoint before rank 0 has committed it */
	if (comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0) {
		code = rank_fail_collective(r);
		goto out;
	}
	if (!ok) {
		if (r->rank != 0)
			snprintf(r->err, sizeof r->err, "rank 0 could not commit checkpoint step %" PRId64,
				 st->step);
		*failed = 1;
	}
out:
	/* a failed attempt leaves no step_N.tmp/ behind (it was never published) */
	if ((code || *failed) && r->rank == 0)
		ckpt_abandon(root, st->step);
	free(pairs);
	free(sums);
	return code;
}

/* Every rank writes its shard in parallel, then the job's commit. */
static int checkpoint_sharded(struct rank *r, const struct ckpt_state *st, const char *root,
			      int *failed)
{
	struct ckpt_shard_info info;
	uint64_t mine[2] = { 0, 0 };
	float *hp, *hm, *hv;
	int code;

	if ((code = prepare_shards(r, st->step, root, failed)) || *failed)
		return code;
	shard_info(r, &info);
	if (checkpoint_host_state(r, &hp, &hm, &hv)) {
		if (r->rank == 0)
			ckpt_abandon(root, st->step);
		return r->res->exit_code;
	}
	if (ckpt_write_shard(root, st->step, &info, hp, hm, hv, &mine[0], &mine[1], r->err,
			     sizeof r->err) < 0)
		mine[1] = UINT64_MAX; /* this rank's shard is missing */
	return commit_shards(r, st, root, &info.layout, mine, failed);
}

/* Rank 0's verdict on a whole-model checkpoint reaches every rank. */
static int agree_whole(struct rank *r, int64_t step, int32_t ok, int *failed)
{
	if (r->node->world_size > 1 && comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	if (!ok && r->rank != 0)
		snprintf(r->err, sizeof r->err, "rank 0 could not write checkpoint step %" PRId64, step);
	*failed = !ok;
	return 0;
}

/* A checkpoint is committed: the log, the metrics, the run's result, the job's output. */
static void report_committed(struct rank *r, int64_t steps_done, double seconds, double stall_s,
			     int background)
{
	r->ckpt_seconds = seconds;
	if (background)
		rank_logf(&r->log, "checkpoint step_%08" PRId64 " committed: written in the background "
			  "in %.0f ms, training stalled %.1f ms", steps_done, 1e3 * seconds,
			  1e3 * stall_s);
	else
		rank_logf(&r->log, "checkpoint step_%08" PRId64 " committed in %.0f ms", steps_done,
			  1e3 * seconds);
	if (r->rank == 0) {
		rank_metric(&r->log, steps_done, "checkpoint_s", seconds, "s");
		rank_metric(&r->log, steps_done, "checkpoint_stall_ms", 1e3 * stall_s, "ms");
	}
	msg_format(r->res->checkpoint, sizeof r->res->checkpoint, "%s/checkpoints/step_%08" PRId64,
		   r->node->run_dir, steps_done);
	r->res->checkpoint_step = steps_done;
	if (r->rank == 0) {
		printf("checkpoint step_%08" PRId64 " committed\n", steps_done);
		fflush(stdout);
	}
}

int checkpoint(struct rank *r, int64_t steps_done, int *failed)
{
	struct ckpt_state st;
	char root[4096];
	double t0 = clock_monotonic();
	int code;

	*failed = 0;
	checkpoint_state(r, steps_done, &st);
	snprintf(root, sizeof root, "%s/checkpoints", r->node->run_dir);
	if (!plain_layout(&r->lay)) {
		if ((code = checkpoint_sharded(r, &st, root, failed)))
			return code;
	} else {
		/* Replicas are identical under data parallelism: rank 0 writes
		 * (from host copies when the model lives on a GPU) and tells
		 * the others how it went. */
		int32_t ok = 1;

		if (r->rank == 0) {
			struct gpt2 hmodel = r->model;
			struct adamw_state hopt = r->opt;

			if (checkpoint_host_state(r, &hmodel.params, &hopt.m, &hopt.v))
				return r->res->exit_code;
			ok = ckpt_save(root, &hmodel, &hopt, &st, r->cfg->checkpoint.keep, r->err,
				       sizeof r->err) == 0;
		}
		if ((code = agree_whole(r, steps_done, ok, failed)))
			return code;
	}
	if (!*failed)
		report_committed(r, steps_done, clock_monotonic() - t0, clock_monotonic() - t0, 0);
	return 0;
}

/*
 * After a checkpoint attempt: a periodic one that failed is logged and
 * training goes on from the previous `latest`, until checkpoint.max_failures
 * fail in a row; the checkpoint of a stop or of the last step must succeed.
 * Returns 0 to go on, or the exit code (checkpoint_failed) of the stop.
 */
int after_checkpoint(struct rank *r, int64_t steps_done, int failed, int must_succeed)
{
	int max = r->cfg->checkpoint.max_failures;
	char msg[sizeof r->err + 128];

	if (!failed) {
		r->ckpt_failures = 0;
		return 0;
	}
	r->ckpt_failures++;
	if (must_succeed || r->ckpt_failures >= max) {
		snprintf(msg, sizeof msg, "checkpoint step_%08" PRId64 " failed%s: %s", steps_done,
			 must_succeed ? "" : max > 1 ? " (checkpoint.max_failures in a row)" :
						      " (checkpoint.max_failures: 1)",
			 r->err);
		return rank_fail_agreed(r, STORK_EXIT_CHECKPOINT_FAILED, msg);
	}
	rank_logf(&r->log,
		  "warning: checkpoint step_%08" PRId64 " failed (%d of checkpoint.max_failures %d in a "
		  "row): %s; training goes on, the previous checkpoint stays the latest",
		  steps_done, r->ckpt_failures, max, r->err);
	if (r->rank == 0) {
		fprintf(stderr, "storkd: warning: checkpoint step_%08" PRId64 " failed (%d of %d in a "
			"row): %s; training goes on\n", steps_done, r->ckpt_failures, max, r->err);
		fflush(stderr);
	}
	return 0;
}


/* ------------------------------------------------ checkpoint.async
 *
 * A periodic checkpoint in the background: at its step, rank 0 prepares
 * step_N.tmp/ as for a synchronous one and each writing rank starts its
 * writer (daemon/engine/checkpoint/ckpt_writer.h), which copies the rank's parameters and
 * moments into a host buffer of the rank's (allocated once) and writes its
 * shard, or rank 0's whole model, from the copy. Training goes on at once;
 * the rank waits for the copy before its next optimizer update. Every
 * step's stop all-reduce also carries "my write is still running", so the
 * ranks learn at the same step that every write is done, and commit it
 * then with the same collectives as a synchronous checkpoint: `latest`
 * moves only after every shard is durable. At most one is in flight: the
 * next checkpoint, a stop, a rollback or the end first waits for it and
 * commits it.
 */
struct ckpt_async {
	struct ckpt_writer *writer;
	int in_flight;                 /* begun, not yet committed or failed */
	int writes;                    /* this rank has a write in flight (all, or rank 0 alone) */
	int failed_early;              /* the preparation failed: nothing to commit */
	struct ckpt_state st;
	struct ckpt_shard_info info;
	struct gpt2 model;             /* whole-model layouts: views of the buffer */
	struct adamw_state opt;
	char root[4096];
	uint64_t mine[2];              /* the shard's checksum and size, from the writer */
	double stall_s;                /* what it cost the training loop so far */
};

/* The writer's job: this rank's shard, or (rank 0, data parallelism) the whole checkpoint. */
static int write_in_background(void *arg, float *buf, char *err, size_t errlen)
{
	struct rank *r = arg;
	struct ckpt_async *a = r->async;
	size_t np = r->model.num_params, no = r->opt.n;

	if (!plain_layout(&r->lay))
		return ckpt_write_shard(a->root, a->st.step, &a->info, buf, buf + np, buf + np + no,
					&a->mine[0], &a->mine[1], err, errlen);
	a->model.params = buf;
	a->opt.m = buf + np;
	a->opt.v = buf + np + no;
	return ckpt_save(a->root, &a->model, &a->opt, &a->st, r->cfg->checkpoint.keep, err, errlen);
}

/* Start this rank's write: copies of its live arrays on a CPU, the pinned
 * host copy (made here, by the rank) on a GPU. The buffer is
 * checkpoint_async_prepare's, made at the start; made here only when that
 * saw no background write ahead. */
static int start_write(struct rank *r)
{
	struct ckpt_async *a = r->async;
	size_t np = r->model.num_params, no = r->opt.n;
	struct ckpt_copy copies[3] = { { r->model.params, np }, { r->opt.m, no }, { r->opt.v, no } };
	int ncopy = 3;

	if (!r->ckpt_host && !(r->ckpt_host = r->ops->host_alloc((np + 2 * no) * sizeof(float))))
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of host memory for checkpoint.async's copy");
	if (r->ops != &ops_cpu) {
		float *p, *m, *v;

		if (checkpoint_host_state(r, &p, &m, &v))
			return r->res->exit_code;
		ncopy = 0;
	}
	a->model = r->model;
	a->opt = r->opt;
	if (ckpt_writer_start(a->writer, r->ckpt_host, copies, ncopy, write_in_background, r) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "cannot start checkpoint.async's writer thread");
	a->writes = 1;
	return 0;
}

/*
 * Whether this rank writes a periodic checkpoint in the background after
 * step start: checkpoint.async on, a periodic one before the last step
 * (that one is synchronous) that goes to the run directory, and this rank
 * a writer (data parallelism: rank 0 alone).
 */
static int async_write_ahead(const struct rank *r, int64_t start)
{
	const struct stork_config *c = r->cfg;
	int64_t every = c->checkpoint.every;

	if (!c->checkpoint.async || every <= 0 || (plain_layout(&r->lay) && r->rank != 0))
		return 0;
	if (c->checkpoint.local_dir[0]) /* only every persist_every-th leaves the node */
		every *= c->checkpoint.persist_every;
	return (start / every + 1) * every < c->train.steps;
}

/*
 * The snapshot buffer is made at the rank's start, not at the first
 * checkpoint: the first copy into fresh pages faults every page in (one
 * per 2 MiB on huge pages, per 4 KiB without), and the rank waits for that
 * copy before its next update, so a first checkpoint that made its buffer
 * stalled training longer than a synchronous checkpoint does. Not in the
 * writer thread either: it inherits the rank's cores, so touching the
 * pages there during the first steps would slow those steps instead. The
 * rank's own thread touches them, so they lie on its NUMA node, where the
 * writer copies; a GPU rank's pinned buffer is mapped by its allocation
 * and the touch costs it little.
 */
int checkpoint_async_prepare(struct rank *r, int64_t start)
{
	size_t bytes = (r->model.num_params + 2 * r->opt.n) * sizeof(float);

	if (r->ckpt_host || !async_write_ahead(r, start))
		return 0;
	if (!(r->ckpt_host = r->ops->host_alloc(bytes)))
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of host memory for checkpoint.async's copy");
	memset(r->ckpt_host, 0, bytes);
	rank_logf(&r->log, "checkpoint.async: a host copy of %.1f MiB made at start",
		  (double)bytes / (1 << 20));
	return 0;
}

int checkpoint_async_begin(struct rank *r, int64_t steps_done)
{
	struct ckpt_async *a;
	double t0 = clock_monotonic();
	int code, failed;

	if ((code = checkpoint_async_drain(r)))
		return code;
	if (!r->async) {
		if (!(r->async = calloc(1, sizeof *r->async)) ||
		    !(r->async->writer = ckpt_writer_new()))
			return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for checkpoint.async");
	}
	a = r->async;
	a->in_flight = 1;
	a->writes = a->failed_early = 0;
	a->mine[0] = a->mine[1] = 0;
	a->stall_s = 0;
	checkpoint_state(r, steps_done, &a->st);
	snprintf(a->root, sizeof a->root, "%s/checkpoints", r->node->run_dir);
	if (!plain_layout(&r->lay)) {
		if ((code = prepare_shards(r, steps_done, a->root, &failed)))
			return code;
		a->failed_early = failed; /* the commit all ranks make will say so */
		shard_info(r, &a->info);
	}
	if (!a->failed_early && (!plain_layout(&r->lay) || r->rank == 0) && (code = start_write(r)))
		return code;
	a->stall_s += clock_monotonic() - t0;
	return 0;
}

void checkpoint_async_before_update(struct rank *r)
{
	double t0;

	if (!r->async || !r->async->in_flight || !r->async->writes)
		return;
	t0 = clock_monotonic();
	ckpt_writer_wait_copied(r->async->writer);
	r->async->stall_s += clock_monotonic() - t0;
}

int checkpoint_async_busy(struct rank *r)
{
	return r->async && r->async->in_flight && ckpt_writer_busy(r->async->writer);
}

int checkpoint_async_in_flight(const struct rank *r)
{
	return r->async && r->async->in_flight;
}

/*
 * Every rank, at the same step: wait for this rank's write, then commit
 * the checkpoint (or learn that it failed) as a synchronous one does.
 */
static int finish(struct rank *r, int *failed)
{
	struct ckpt_async *a = r->async;
	double t0 = clock_monotonic(), seconds = 0;
	int64_t step = a->st.step;
	int code, rc = 0;

	*failed = 0;
	if (a->writes) {
		if (ckpt_writer_busy(a->writer))
			rank_logf(&r->log, "checkpoint step_%08" PRId64 ": waiting for its background "
				  "write", step);
		rc = ckpt_writer_join(a->writer, &seconds, r->err, sizeof r->err);
		a->writes = 0;
	}
	a->in_flight = 0;
	if (!plain_layout(&r->lay)) {
		if (a->failed_early) {
			*failed = 1;
			return 0;
		}
		if (rc < 0)
			a->mine[1] = UINT64_MAX; /* this rank's shard is missing */
		code = commit_shards(r, &a->st, a->root, &a->info.layout, a->mine, failed);
	} else {
		code = agree_whole(r, step, rc == 0, failed);
	}
	if (code)
		return code;
	if (!*failed) {
		/* the time the write took is what a stop's checkpoint would take */
		if (r->rank == 0 || !plain_layout(&r->lay))
			r->ckpt_seconds = seconds;
		/* the stall: the start, the wait for the copy, and this wait and commit */
		report_committed(r, step, r->ckpt_seconds, a->stall_s + clock_monotonic() - t0, 1);
	}
	return 0;
}

int checkpoint_async_poll(struct rank *r, int any_busy)
{
	int failed, code;

	if (!checkpoint_async_in_flight(r) || any_busy)
		return 0;
	if ((code = finish(r, &failed)))
		return code;
	return after_checkpoint(r, r->async->st.step, failed, 0);
}

int checkpoint_async_drain(struct rank *r)
{
	return checkpoint_async_poll(r, 0);
}

void checkpoint_async_free(struct rank *r)
{
	if (!r->async)
		return;
	/* a write still running reads the rank's buffer: it ends first */
	ckpt_writer_free(r->async->writer);
	free(r->async);
	r->async = NULL;
}

/* ------------------------------------------------ at a checkpoint step */

int checkpoint_at(struct rank *r, int64_t steps_done, int must)
{
	const struct stork_config *c = r->cfg;
	int failed, code, local = c->checkpoint.local_dir[0] != '\0';
	/* with a node-local tier, only every persist_every-th periodic one goes to the run directory */
	int persist = must || !local || c->checkpoint.every <= 0 ||
		      (steps_done / c->checkpoint.every) % c->checkpoint.persist_every == 0;

	if (local && ((code = checkpoint_local(r, steps_done, &failed)) ||
		      (code = after_checkpoint(r, steps_done, failed, 0))))
		return code;
	if (!persist)
		return 0;
	/* a stop's and the last one are committed before the run goes on or ends */
	if (c->checkpoint.async && !must)
		return checkpoint_async_begin(r, steps_done);
	if ((code = checkpoint_async_drain(r)) || (code = checkpoint(r, steps_done, &failed)))
		return code;
	return after_checkpoint(r, steps_done, failed, must);
}
