/*
 * daemon/engine/train/train.c - the training loop of one rank; see train.h.
 *
 * A rank owns everything it computes with (model replica, optimizer state,
 * data loaders, log files); the only things shared between rank threads are
 * the read-only node context and the communicator. That keeps the loop
 * readable top to bottom, in the manner of llm.c's train_gpt2.c main().
 *
 * This file is the loop itself: start, steps, stop, end. Its parts, each in
 * a file of its own below it (train_rank.h): the start (train_start.c),
 * one step (train_step.c), the stop decision and requeue (train_stop.c),
 * the progress lines (train_progress.c), the guards (train_guard.c), the
 * device (train_device.c), checkpoints (daemon/engine/checkpoint/) and how
 * a rank fails (train_rank.c).
 */
#include "config.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/data/data.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/train/hang_report.h"
#include "daemon/engine/model/hf_model.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "daemon/engine/parallel/pipeline.h"
#include "daemon/engine/train/preflight_probe.h"
#include "daemon/node/rank_log.h"
#include "daemon/engine/parallel/zero.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/bounded.h"
#include "lib/bind/bind.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/slurm/slurm_job.h"
#include "lib/run/stage_path.h"
#include "lib/url.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void heartbeat(struct rank *r, int64_t steps_done)
{
	struct rank_progress *p = &r->node->progress[r->local];

	p->step = steps_done;
	p->beat = clock_monotonic();
}

/* The rank's phase outside the model's passes, for a hang's report. */
static void phase(struct rank *r, int what)
{
	struct gpt2_where *w = &r->node->progress[r->local].where;

	atomic_store_explicit(&w->layer, -1, memory_order_relaxed);
	atomic_store_explicit(&w->phase, what, memory_order_relaxed);
}

/* ------------------------------------------------------------- the loop */

/*
 * Fault injection (test builds): stall forever at a step, for the
 * watchdog's test; or make every step slower, so a test of Slurm's timed
 * signal gets a run whose length does not depend on the machine's speed.
 */
#ifdef STORK_FAULT_INJECTION
/*
 * STORK_FAULT_KILL_DAEMON=L@S[,L@S...]: launcher L's daemon (SLURM_PROCID)
 * kills itself with SIGKILL as step S begins, once per run directory (a
 * restart that comes back to step S goes on), for a benchmark of failures.
 */
static void kill_daemon_fault(const struct rank *r, int64_t step)
{
	const char *s = getenv("STORK_FAULT_KILL_DAEMON"), *me = getenv("SLURM_PROCID");
	long long l, at;
	char path[4200];
	int n, fd;

	if (!s || r->local != 0)
		return;
	for (; sscanf(s, "%lld@%lld%n", &l, &at, &n) == 2; s += n + (s[n] == ',')) {
		if (at != step || l != (me ? atoll(me) : 0))
			continue;
		snprintf(path, sizeof path, "%s/logs/.fault.%lld.%lld", r->node->run_dir, l, at);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
			return;
		close(fd);
		kill(getpid(), SIGKILL);
	}
}
#endif

static void inject_faults(struct rank *r, int64_t step)
{
#ifdef STORK_FAULT_INJECTION
	kill_daemon_fault(r, step);
	if (r->local == r->node->stall_rank && step == r->node->stall_step) {
		rank_logf(&r->log, "fault injection: stalling at step %" PRId64, step);
		for (;;)
			sleep(1);
	}
	fault_sleep(r->node->step_delay);
#else
	(void)r;
	(void)step;
#endif
}

/*
 * train.on_nonfinite or train.on_spike: rollback, after step bad_step
 * diverged or spiked on every rank. Each rank drops its model, optimizer
 * state and pipeline buffers and loads the latest checkpoint again (the
 * start when there is none yet) exactly as a resume does, the spike window
 * included; training goes on from there and skips bad_step's batch. The
 * metric rollback records it. Returns 0 with the step to go on from in
 * *start, or the exit code.
 */
static int rollback(struct rank *r, int64_t bad_step, int64_t *start)
{
	const char *what = r->rollback_pending == ROLLBACK_SPIKE ? "spiked" : "diverged";

	/* the checkpoint in flight was taken before the divergence: it is the one to go back to */
	if (checkpoint_async_drain(r))
		return r->res->exit_code;
	r->rollbacks++;
	r->skip_batch_cause = r->rollback_pending;
	r->rollback_pending = ROLLBACK_NONE;
	r->skip_batch_step = bad_step;
	pipeline_free(&r->pipe);
	zero_mirror_free(&r->mirror);
	zero_paged_free(&r->paged, &r->model);
	zero_plan_free(&r->zero);
	adamw_free(&r->opt);
	gpt2_free(&r->model);
	if (data_set_position(r->train, &r->data_start, r->err, sizeof r->err))
		return rank_fail(r, STORK_EXIT_DATA, r->err);
	if (rank_init_model(r, &r->shape, start) || rank_move_to_device(r) || rank_init_mirror(r) ||
	    rank_init_pipeline(r) || (r->lay.zero >= 2 && rank_start_zero_paged(r)))
		return r->res->exit_code;
	rank_metric_with(&r->log, bad_step + 1, "rollback", (double)*start, "step",
			 json_pack("{s:s}", "cause", r->skip_batch_cause == ROLLBACK_SPIKE ? "spike" :
									     "nonfinite"));
	rank_logf(&r->log, "rolled back to step %" PRId64 " (rollback %d of train.max_rollbacks %d); "
		  "step %" PRId64 "'s batch will be skipped", *start, r->rollbacks,
		  r->cfg->train.max_rollbacks, bad_step + 1);
	if (r->rank == 0) {
		printf("rolled back to step %" PRId64 " after step %" PRId64 " %s (rollback %d of %d)\n",
		       *start, bad_step + 1, what, r->rollbacks, r->cfg->train.max_rollbacks);
		fflush(stdout);
	}
	return 0;
}

/* Test builds: STORK_FAULT_SLOW_RANK=R:SECONDS makes rank R's compute slower
 * by that much every step, a straggler for the run report to find. */
static void slow_rank(const struct rank *r)
{
#ifdef STORK_FAULT_INJECTION
	const char *s = getenv("STORK_FAULT_SLOW_RANK");
	double seconds;
	int rank;

	if (s && sscanf(s, "%d:%lf", &rank, &seconds) == 2 && rank == r->rank)
		fault_sleep(seconds);
#else
	(void)r;
#endif
}

static int run_steps(struct rank *r, int64_t start)
{
	const struct stork_config *c = r->cfg;
	int64_t step;
	int stop = 0, no_room = 0, cancelled = 0, writing = 0, time_due = 0;
	char cause[32];

	checkpoint_schedule_start(r);
	rank_telemetry_start(r);
	for (step = start; step < c->train.steps; step++) {
		double c0;
		float loss = 0, norm = 0, lr = 0;
		double t0 = (clock_monotonic() * 1e3), step_ms;
		uint64_t sent0 = comm_ucx_thread_bytes_sent();

		heartbeat(r, step);
		r->model.where = &r->node->progress[r->local].where; /* a rollback makes a new model */
		phase(r, RANK_PHASE_STEP_START);
		inject_faults(r, step);
		phase(r, RANK_PHASE_VALIDATION);
		if (r->val && step % c->train.val_every == 0 && rank_validate(r, step))
			return r->res->exit_code;
		c0 = clock_monotonic();
		if (rank_compute_gradients(r, step, &loss))
			return r->res->exit_code;
		slow_rank(r);
		/* this rank's own work: under a pipeline, without the time it
		 * stood waiting for its neighbours (pipeline_wait_ms says that) */
		r->compute_ms = (clock_monotonic() - c0 - (r->lay.pp > 1 ? r->pipe.wait_seconds : 0.0)) *
				1e3;
		checkpoint_async_before_update(r); /* the update changes what it copies */
		phase(r, RANK_PHASE_UPDATE);
		if (rank_update(r, step, &loss, &norm, &lr))
			return r->res->exit_code;
		if (r->rollback_pending) { /* the same on every rank: norm and loss are global */
			int64_t from;

			if (rollback(r, step, &from))
				return r->res->exit_code;
			rank_mark_updated(r, from);
			step = from - 1; /* the loop's step++ makes it from */
			continue;
		}
		step_ms = (clock_monotonic() * 1e3) - t0;
		rank_report_step(r, step, loss, lr, norm, step_ms, comm_ucx_thread_bytes_sent() - sent0);
		rank_recovered_step(r, step + 1);
		r->res->last_step = step + 1;
		heartbeat(r, step + 1);
		phase(r, RANK_PHASE_STOP_DECISION);
		if (rank_agree_stop(r, step + 1, step_ms / 1e3, &stop, &no_room, &cancelled, &writing,
				    &time_due) ||
		    checkpoint_async_poll(r, writing))
			return r->res->exit_code;
		if (cancelled && *rank_stop_cause(r, cause, sizeof cause))
			rank_logf(&r->log, "stopping after step %" PRId64 " on request: the job was "
				  "cancelled (%s)", step + 1, cause);
		else if (cancelled)
			rank_logf(&r->log, "stopping after step %" PRId64 " on request: the job was "
				  "cancelled", step + 1);
		if (no_room && checkpoint_async_drain(r))
			return r->res->exit_code;
		if (no_room)
			return cancelled ? rank_stop_cancelled(r, step + 1, 0) :
					   rank_stop_without_checkpoint(r, step + 1);
		if (stop || step + 1 == c->train.steps || time_due ||
		    checkpoint_step_due(c, step + 1)) {
			phase(r, RANK_PHASE_CHECKPOINT);
			if (checkpoint_at(r, step + 1, stop || step + 1 == c->train.steps))
				return r->res->exit_code;
		}
		if (stop)
			return cancelled ? rank_stop_cancelled(r, step + 1, 1) :
					   rank_stop_and_requeue(r, step + 1);
	}
	snprintf(r->res->message, sizeof r->res->message, "completed %d steps", c->train.steps);
	return 0;
}

void train_rank(const struct train_node *n, int local, struct train_rank_result *res)
{
	struct rank r = { .node = n, .cfg = n->cfg, .local = local, .rank = n->rank_base + local,
			  .res = res, .skip_batch_step = -1, .nan_injected_step = -1,
			  .spike_injected_step = -1 };
	struct gpt2_config mc;
	int64_t start;
	char err[512];

	memset(res, 0, sizeof *res);
	heartbeat(&r, 0);
	r.comm = r.host_comm = n->rank_comm(n->rank_comm_arg, local);
	comm_describe(r.comm, "world", 0, n->world_size, 0);
	comm_trace_attach(&n->progress[local].trace);
	hang_stacks_attach(&n->progress[local]);
	atomic_store(&n->progress[local].where.layer, -1);
	if (rank_log_open(&r.log, n->run_dir, r.rank, local, n->host, n->job_id, err,
			  sizeof err) < 0) {
		rank_fail(&r, STORK_EXIT_INTERNAL, err);
		n->progress[local].done = 1; /* storkd waits for every rank to say it is done */
		return;
	}
	r.log.requeue = n->restart_count;
	r.log.attempt = n->attempt;
	if (n->restart_count > 0)
		rank_logf(&r.log, "=== requeue %d (job %s) ===", n->restart_count, n->job_id);
	if (n->attempt > 0)
		rank_logf(&r.log, "=== restart %d in the allocation ===", n->attempt);
	rank_logf(&r.log, "rank %d of %d (local %d of %d) on %s", r.rank, n->world_size, local,
		  n->local_ranks, n->host);
	if (n->spare) { /* restart.spares: nothing until it takes a lost node's place */
		if (rank_bind(&r) || rank_model_shape(&r, &mc) || rank_join_as_spare(&r, &mc, &start))
			goto out;
	} else if (rank_bind(&r) || rank_device_comm(&r) || rank_model_shape(&r, &mc) ||
		   rank_make_layout(&r, &mc) || preflight_run(&r, &mc) || rank_open_data(&r) ||
		   rank_init_model(&r, &mc, &start) || rank_move_to_device(&r) ||
		   rank_init_mirror(&r) || rank_init_pipeline(&r) || rank_start_grad_sync(&r)) {
		goto out;
	}
	rank_logf(&r.log, "model: %zu parameters; training steps %" PRId64 "..%d", r.model.num_params,
		  start + 1, n->cfg->train.steps);
	res->last_step = start;
	r.first_step = start;
	if (checkpoint_async_prepare(&r, start))
		goto out;
	rank_mark_updated(&r, start);
	while (run_steps(&r, start) && rank_recover(&r, &start) == 0)
		; /* restart.in_place: a lost node's replicas left, the others go on */
out:
	rank_logf(&r.log, "exit %d: %s", res->exit_code, res->message);
	grad_sync_stop(r.sync); /* first: its last pieces may point into the gradients */
	checkpoint_async_free(&r); /* and a checkpoint write: it copies the parameters */
	n->progress[local].done = 1;
	free(r.inputs);
	free(r.targets);
	if (r.train)
		data_close(r.train);
	if (r.val)
		data_close(r.val);
	adamw_free(&r.opt);
	zero_paged_free(&r.paged, &r.model);
	gpt2_free(&r.model);
	pipeline_free(&r.pipe);
	zero_mirror_free(&r.mirror);
	zero_plan_free(&r.zero);
	layout_groups_free(&r.grp);
	if (r.ckpt_host)
		r.ops->host_free(r.ckpt_host);
	if (r.comm != r.host_comm)
		comm_free(r.comm);
	rank_log_close(&r.log);
}
