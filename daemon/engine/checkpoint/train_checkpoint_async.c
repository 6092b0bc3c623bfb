/*
 * daemon/engine/checkpoint/train_checkpoint_async.c - checkpoint.async: a
 * periodic checkpoint written in the background and committed, at a step
 * every rank agrees on, as a synchronous one is (train_checkpoint.c).
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
	return ckpt_save(a->root, &a->model, &a->opt, &a->st, checkpoint_keep(r->cfg), err, errlen);
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

	if (!c->checkpoint.async || (plain_layout(&r->lay) && r->rank != 0))
		return 0;
	/* by wall time or at milestones: one may come at any step */
	if (c->checkpoint.every == CHECKPOINT_EVERY_AUTO || c->checkpoint.every_minutes > 0 ||
	    c->checkpoint.keep_every > 0)
		return 1;
	if (every <= 0)
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
		if ((code = checkpoint_prepare_shards(r, steps_done, a->root, &failed)))
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
		code = checkpoint_commit_shards(r, &a->st, a->root, &a->info.layout, a->mine, failed);
	} else {
		code = checkpoint_agree_whole(r, step, rc == 0, failed);
	}
	if (code)
		return code;
	if (!*failed) {
		/* the time the write took is what a stop's checkpoint would take */
		if (r->rank == 0 || !plain_layout(&r->lay))
			r->ckpt_seconds = seconds;
		/* the stall: the start, the wait for the copy, and this wait and commit */
		checkpoint_report_committed(r, step, r->ckpt_seconds, a->stall_s + clock_monotonic() - t0, 1);
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
