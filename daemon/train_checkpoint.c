/*
 * daemon/train_checkpoint.c - a rank's part in committing a checkpoint:
 * whether one still fits before the job's end, the rank's shard and its
 * host copy, the job's commit (every shard durable before rank 0 moves
 * `latest`), and what a failed one means for the run. The file formats
 * and the commit's steps are daemon/checkpoint.c's.
 */
#include "config.h"
#include "daemon/train_rank.h"

#include "kernels/ops.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/stork_config.h"

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
	const struct par_layout *l = &r->lay;

	*info = (struct ckpt_shard_info){
		.rank = r->rank,
		.layout = { .world = l->world, .dp = l->dp, .tp = l->tp, .pp = l->pp,
			    .zero = l->zero, .sharded = 1 },
		.config = r->model.config,
		.tp_rank = l->tp_rank, .dp_rank = l->dp_rank, .stage = l->stage,
		.first_layer = l->first_layer, .last_layer = l->last_layer,
		.nparams = r->model.num_params, .opt_step = r->opt.step,
	};
	if (l->zero) {
		info->nseg = r->zero.nseg;
		for (int k = 0; k < r->zero.nseg; k++) {
			info->seg_lo[k] = r->zero.seg[k].lo;
			info->seg_hi[k] = r->zero.seg[k].hi;
		}
	} else {
		info->nseg = 1;
		info->seg_hi[0] = r->model.num_params;
	}
}

/*
 * The parameters and moments in host memory for a checkpoint: the rank's
 * own arrays on the CPU; on a GPU, a pinned host copy (made once, reused).
 */
static int host_state(struct rank *r, float **p, float **m, float **v)
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

/*
 * Every rank writes its shard in parallel; the checksums travel to rank 0
 * (an all-gather), which commits. A rank that cannot write its shard (disk
 * full, I/O error) says so in the all-gather instead of aborting the world:
 * rank 0 then abandons the attempt (`latest` stays the previous checkpoint)
 * and every rank learns, from the same collectives, that this checkpoint
 * failed. Returns an exit code only when a collective failed; *failed says
 * whether the checkpoint was lost (r->err: why, on the rank that knows).
 */
static int checkpoint_sharded(struct rank *r, const struct ckpt_state *st, const char *root,
			      int *failed)
{
	int W = r->node->world_size, code = 0;
	struct ckpt_shard_info info;
	float *hp, *hm, *hv;
	uint64_t mine[2] = { 0, 0 }, *pairs = calloc(2 * (size_t)W, sizeof *pairs);
	uint64_t *sums = calloc(2 * (size_t)W, sizeof *sums), *sizes;
	int32_t ok = 1;

	*failed = 0;
	if (!pairs || !sums) {
		code = rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the checkpoint");
		goto out;
	}
	sizes = sums + W;
	if (r->rank == 0 && ckpt_prepare(root, st->step, r->err, sizeof r->err) < 0)
		ok = 0;
	/* rank 0's answer reaches everyone before any rank writes */
	if (comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0) {
		code = rank_fail_collective(r);
		goto out;
	}
	if (!ok) {
		if (r->rank != 0)
			snprintf(r->err, sizeof r->err, "rank 0 could not prepare checkpoint step %" PRId64,
				 st->step);
		*failed = 1;
		goto out;
	}
	shard_info(r, &info);
	if (host_state(r, &hp, &hm, &hv)) {
		code = r->res->exit_code;
		goto out;
	}
	if (ckpt_write_shard(root, st->step, &info, hp, hm, hv, &mine[0], &mine[1], r->err,
			     sizeof r->err) < 0)
		mine[1] = UINT64_MAX; /* this rank's shard is missing */
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
	ok = r->rank != 0 || ckpt_commit(root, st, &info.layout, sums, sizes,
					 r->cfg->checkpoint.keep, r->err, sizeof r->err) == 0;
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

/*
 * Commit the checkpoint of steps_done. Returns an exit code when the world
 * failed (a collective); otherwise 0, with *failed set (and r->err saying
 * why) when this checkpoint could not be written: every rank gets the same
 * *failed, so every rank takes the same decision about going on.
 */
int checkpoint(struct rank *r, int64_t steps_done, int *failed)
{
	struct ckpt_state st = {
		.step = steps_done,
		.config_hash = config_hash(r->cfg),
		.model_hash = config_model_hash(r->cfg),
		.restart_count = r->node->restart_count,
		.global_batch = (int64_t)r->cfg->train.batch_size * r->cfg->train.grad_accum * r->lay.dp,
		.was = settings_now(r),
	};
	char root[4096];
	double t0 = (clock_monotonic() * 1e3);
	int code;

	*failed = 0;
	data_get_position(r->train, &st.train);
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

			if (host_state(r, &hmodel.params, &hopt.m, &hopt.v))
				return r->res->exit_code;
			ok = ckpt_save(root, &hmodel, &hopt, &st, r->cfg->checkpoint.keep, r->err,
				       sizeof r->err) == 0;
		}
		if (r->node->world_size > 1 && comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0)
			return rank_fail_collective(r);
		if (!ok && r->rank != 0)
			snprintf(r->err, sizeof r->err,
				 "rank 0 could not write checkpoint step %" PRId64, steps_done);
		*failed = !ok;
	}
	if (*failed)
		return 0;
	r->ckpt_seconds = ((clock_monotonic() * 1e3) - t0) / 1e3;
	rank_logf(&r->log, "checkpoint step_%08" PRId64 " committed in %.0f ms", steps_done,
		  1e3 * r->ckpt_seconds);
	if (r->rank == 0)
		rank_metric(&r->log, steps_done, "checkpoint_s", r->ckpt_seconds, "s");
	msg_format(r->res->checkpoint, sizeof r->res->checkpoint, "%s/step_%08" PRId64, root,
		   steps_done);
	r->res->checkpoint_step = steps_done;
	if (r->rank == 0) {
		printf("checkpoint step_%08" PRId64 " committed\n", steps_done);
		fflush(stdout);
	}
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

