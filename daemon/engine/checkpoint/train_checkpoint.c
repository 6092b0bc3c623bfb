/*
 * daemon/engine/checkpoint/train_checkpoint.c - a rank's part in committing a
 * checkpoint to the run directory at once: the job's commit (every shard
 * durable before rank 0 moves `latest`), and what a failed one means for
 * the run. The file formats and the commit's steps are
 * daemon/engine/checkpoint/checkpoint.c's; a background commit
 * (train_checkpoint_async.c) ends with the same collectives.
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"
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

/* Rank 0 prepares step_N.tmp/; its answer reaches everyone before any rank writes. */
int checkpoint_prepare_shards(struct rank *r, int64_t step, const char *root, int *failed)
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
int checkpoint_commit_shards(struct rank *r, const struct ckpt_state *st, const char *root,
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
	ok = r->rank != 0 || ckpt_commit(root, st, layout, sums, sizes, checkpoint_keep(r->cfg),
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

	if ((code = checkpoint_prepare_shards(r, st->step, root, failed)) || *failed)
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
	return checkpoint_commit_shards(r, st, root, &info.layout, mine, failed);
}

/* Rank 0's verdict on a whole-model checkpoint reaches every rank. */
int checkpoint_agree_whole(struct rank *r, int64_t step, int32_t ok, int *failed)
{
	if (r->node->world_size > 1 && comm_broadcast(r->comm, &ok, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	if (!ok && r->rank != 0)
		snprintf(r->err, sizeof r->err, "rank 0 could not write checkpoint step %" PRId64, step);
	*failed = !ok;
	return 0;
}

/* A checkpoint is committed: the log, the metrics, the run's result, the job's output. */
void checkpoint_report_committed(struct rank *r, int64_t steps_done, double seconds, double stall_s,
			     int background)
{
	r->ckpt_seconds = seconds;
	checkpoint_schedule_committed(r);
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
			ok = ckpt_save(root, &hmodel, &hopt, &st, checkpoint_keep(r->cfg), r->err,
				       sizeof r->err) == 0;
		}
		if ((code = checkpoint_agree_whole(r, steps_done, ok, failed)))
			return code;
	}
	if (!*failed)
		checkpoint_report_committed(r, steps_done, clock_monotonic() - t0, clock_monotonic() - t0, 0);
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
