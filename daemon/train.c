/*
 * daemon/train.c - the training loop of one rank; see train.h.
 *
 * A rank owns everything it computes with (model replica, optimizer state,
 * data loaders, log files); the only things shared between rank threads are
 * the read-only node context and the communicator. That keeps the loop
 * readable top to bottom, in the manner of llm.c's train_gpt2.c main().
 */
#include "config.h"
#include "daemon/train.h"

#include "daemon/checkpoint.h"
#include "daemon/data.h"
#include "daemon/model.h"
#include "daemon/optimizer.h"
#include "daemon/rank_log.h"
#include "kernels/ops.h"
#include "lib/bind.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/slurm_job.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A stop this close to the job's end (seconds) is a timeout, not a preemption. */
#define STOP_NEAR_END_S 300

struct rank {
	const struct train_node *node;
	const struct stork_config *cfg;
	int local, rank;
	struct comm *comm;
	struct rank_log log;
	struct gpt2 model;
	struct adamw_state opt;
	struct data_loader *train, *val;
	int *inputs, *targets;
	struct train_rank_result *res;
	double ckpt_seconds;           /* how long the last checkpoint took; 0 = none yet */
	char err[1024];
};

static void heartbeat(struct rank *r, int64_t steps_done)
{
	struct rank_progress *p = &r->node->progress[r->local];

	p->step = steps_done;
	p->beat = clock_monotonic();
}

static int fail(struct rank *r, int code, const char *msg);

/*
 * A collective failed: another rank failed or aborted first (its own
 * record names the cause), so this failure is a consequence, marked
 * secondary so that exit_info.json names the first cause.
 */
static int fail_collective(struct rank *r)
{
	int code = fail(r, STORK_EXIT_RANK_FAILED, comm_abort_reason(r->comm));

	r->res->secondary = 1;
	return code;
}

/* Record why this rank stops; the first reason wins. */
static int fail(struct rank *r, int code, const char *msg)
{
	if (r->res->exit_code == 0) {
		r->res->exit_code = code;
		r->res->fail_time = clock_wall();
		snprintf(r->res->message, sizeof r->res->message, "%s", msg);
	}
	rank_logf(&r->log, "error: %s", msg);
	fprintf(stderr, "storkd: rank %d on %s: %s\n", r->rank, r->node->host, msg);
	/* Wake the other ranks out of any collective instead of leaving them
	 * waiting for this one. */
	if (r->comm)
		comm_abort(r->comm, msg);
	return code;
}

static void model_config_of(const struct stork_config *c, struct gpt2_config *g)
{
	g->max_seq_len = c->model.max_seq_len;
	g->vocab_size = c->model.vocab_size;
	g->padded_vocab_size = c->model.padded_vocab_size;
	g->num_layers = c->model.layers;
	g->num_heads = c->model.heads;
	g->channels = c->model.channels;
}

static void notice_to_log(void *arg, const char *msg)
{
	struct rank *r = arg;

	rank_logf(&r->log, "%s", msg);
	if (r->rank == 0)
		fprintf(stderr, "storkd: %s\n", msg);
}

/* ----------------------------------------------------------------- setup */

/* Pin this thread as storkd planned (the plan is the launcher's own code in lib/bind). */
static int bind_rank(struct rank *r)
{
	const struct bind_plan *plan = &r->node->plans[r->local];
	char desc[256], err[512];

	if (bind_apply(plan, err, sizeof err) < 0)
		rank_logf(&r->log, "warning: %s", err);
	bind_plan_describe(plan, desc, sizeof desc);
	rank_logf(&r->log, "bound: %s, %d thread(s)", desc, plan->omp_threads);
	ops_cpu_set_threads(plan->omp_threads);
	return 0;
}

static int open_data(struct rank *r)
{
	const struct stork_config *c = r->cfg;
	struct data_config dc = {
		.key = "data.train",
		.globs = (const char *const *)c->data.train.v,
		.nglobs = (int)c->data.train.n,
		.batch_size = c->train.batch_size,
		.seq_len = c->train.seq_len,
		.rank = r->rank,
		.nranks = r->node->world_size,
		.shuffle = c->data.shuffle,
		.seed = c->model.seed,
		.vocab_size = c->model.vocab_size,
	};
	int rc;

	rc = data_open(&r->train, &dc, r->err, sizeof r->err);
	if (rc)
		return fail(r, rc, r->err);
	if (c->data.val.n > 0 && c->train.val_every > 0) {
		dc.key = "data.val";
		dc.globs = (const char *const *)c->data.val.v;
		dc.nglobs = (int)c->data.val.n;
		dc.shuffle = 0;
		rc = data_open(&r->val, &dc, r->err, sizeof r->err);
		if (rc)
			return fail(r, rc, r->err);
	}
	r->inputs = malloc(sizeof(int) * (size_t)c->train.batch_size * (size_t)c->train.seq_len);
	r->targets = malloc(sizeof(int) * (size_t)c->train.batch_size * (size_t)c->train.seq_len);
	if (!r->inputs || !r->targets)
		return fail(r, STORK_EXIT_INTERNAL, "out of memory for the batch");
	return 0;
}

/*
 * The model and optimizer: from the newest valid checkpoint, else from
 * model.init_from, else built from the configured sizes and seed. Every rank
 * does the same, so the replicas start identical without a broadcast.
 */
static int init_model(struct rank *r, int64_t *start_step)
{
	const struct stork_config *c = r->cfg;
	char root[4096], dir[4096];
	struct gpt2_config want;
	struct ckpt_state st;

	model_config_of(c, &want);
	*start_step = 0;
	snprintf(root, sizeof root, "%s/checkpoints", r->node->run_dir);
	if (ckpt_find(root, dir, sizeof dir, notice_to_log, r)) {
		if (ckpt_read_state(dir, &st, r->err, sizeof r->err) < 0)
			return fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
		if (ckpt_load(dir, c->model.init_from[0] ? NULL : &want, &r->model, &r->opt,
			      r->err, sizeof r->err) < 0)
			return fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
		if (data_set_position(r->train, &st.train, r->err, sizeof r->err))
			return fail(r, STORK_EXIT_DATA, r->err);
		*start_step = st.step;
		rank_logf(&r->log, "resumed from %s at step %" PRId64, dir, st.step);
		if (r->rank == 0)
			printf("resumed from %s at step %" PRId64 "\n", dir, st.step);
		return 0;
	}
	if (c->model.init_from[0]) {
		if (gpt2_load(&r->model, c->model.init_from, r->err, sizeof r->err) < 0)
			return fail(r, STORK_EXIT_DATA, r->err);
		rank_logf(&r->log, "weights from %s", c->model.init_from);
	} else {
		int rc = gpt2_build(&r->model, &want, c->model.seed);

		if (rc < 0)
			return fail(r, rc == -2 ? STORK_EXIT_INTERNAL : STORK_EXIT_CONFIG, r->model.err);
	}
	if (adamw_init(&r->opt, r->model.num_params) < 0)
		return fail(r, STORK_EXIT_INTERNAL, "out of memory for the optimizer state");
	return 0;
}

/* ----------------------------------------------------------------- steps */

/* Mean over ranks of a per-rank scalar, in the collectives' fixed order. */
static int mean_over_ranks(struct rank *r, float *v)
{
	int rc = comm_allreduce(r->comm, v, 1, COMM_FLOAT32, COMM_SUM);

	if (rc < 0)
		return rc;
	*v /= (float)r->node->world_size;
	return 0;
}

static int validate(struct rank *r, int64_t step)
{
	const struct stork_config *c = r->cfg;
	int B = c->train.batch_size, T = c->train.seq_len;
	float sum = 0;
	int rc;

	data_rewind(r->val);
	for (int i = 0; i < c->train.val_batches; i++) {
		rc = data_next(r->val, r->inputs, r->targets, r->err, sizeof r->err);
		if (rc)
			return fail(r, rc, r->err);
		sum += gpt2_forward(&r->model, r->inputs, r->targets, B, T);
	}
	sum /= (float)c->train.val_batches;
	if (mean_over_ranks(r, &sum) < 0)
		return fail_collective(r);
	rank_metric(&r->log, step + 1, "val_loss", sum, "nats");
	rank_logf(&r->log, "step %" PRId64 " val_loss %.6f", step + 1, sum);
	if (r->rank == 0)
		printf("step %" PRId64 "/%d | val loss %.4f\n", step + 1, c->train.steps, sum);
	return 0;
}

/* Forward and backward over grad_accum micro-batches; returns the mean loss. */
static int compute_gradients(struct rank *r, float *loss)
{
	const struct stork_config *c = r->cfg;
	int B = c->train.batch_size, T = c->train.seq_len, rc;
	float scale = 1.0f / (float)c->train.grad_accum;

	*loss = 0;
	if (gpt2_zero_grad(&r->model) < 0)
		return fail(r, STORK_EXIT_INTERNAL, "out of memory for the gradients");
	for (int micro = 0; micro < c->train.grad_accum; micro++) {
		float l;

		rc = data_next(r->train, r->inputs, r->targets, r->err, sizeof r->err);
		if (rc)
			return fail(r, rc, r->err);
		l = gpt2_forward(&r->model, r->inputs, r->targets, B, T);
		if (isnan(l) && r->model.err[0])
			return fail(r, STORK_EXIT_DATA, r->model.err);
		gpt2_backward(&r->model, scale);
		*loss += l * scale;
	}
	return 0;
}

/* Average gradients over ranks, clip, update. Returns the global norm. */
static int update(struct rank *r, int64_t step, float *norm_out, float *lr_out)
{
	const struct stork_config *c = r->cfg;
	struct adamw_params hp = {
		.beta1 = (float)c->train.beta1, .beta2 = (float)c->train.beta2,
		.eps = (float)c->train.eps, .weight_decay = (float)c->train.weight_decay,
	};
	struct lr_schedule sched = {
		.kind = c->train.lr_schedule == STORK_LR_COSINE ? LR_COSINE : LR_CONSTANT,
		.lr = (float)c->train.lr, .min_lr = (float)c->train.min_lr,
		.warmup = c->train.warmup_steps, .total = c->train.steps,
	};
	size_t n = r->model.num_params;
	float norm, clip;

	if (r->node->world_size > 1) {
		if (comm_allreduce(r->comm, r->model.grads, n, COMM_FLOAT32, COMM_SUM) < 0)
			return fail_collective(r);
		grad_scale(r->model.grads, n, 1.0f / (float)r->node->world_size);
	}
	norm = (float)sqrt(grad_sumsq(r->model.grads, n));
	clip = grad_clip_scale(norm, (float)c->train.grad_clip);
	if (clip != 1.0f)
		grad_scale(r->model.grads, n, clip);
	*lr_out = lr_at(&sched, step);
	adamw_step_model(&r->opt, &hp, *lr_out, &r->model);
	*norm_out = norm;
	return 0;
}

/*
 * Whether a checkpoint still fits before the job's end: it must, with a
 * margin, take no longer than the last one did (the first one is guessed at
 * 100 MB/s for the model and both moments). A checkpoint that cannot finish
 * would only be cut by the kill; better to keep the previous one and say so.
 */
static int checkpoint_fits(struct rank *r, double *left, double *need)
{
	time_t end = r->node->job_end_time;

	*need = r->ckpt_seconds > 0 ? r->ckpt_seconds :
				      (double)r->model.num_params * 12.0 / 100e6;
	*need = *need * 1.5 + 5.0;
	*left = end ? (double)(end - time(NULL)) : 1e30;
	return *left >= *need;
}

static int checkpoint(struct rank *r, int64_t steps_done)
{
	struct ckpt_state st = {
		.step = steps_done,
		.config_hash = config_hash(r->cfg),
		.model_hash = config_model_hash(r->cfg),
		.restart_count = r->node->restart_count,
	};
	char root[4096];
	double t0 = (clock_monotonic() * 1e3);

	/* Replicas are identical under data parallelism: rank 0 writes. */
	if (r->rank != 0)
		return 0;
	data_get_position(r->train, &st.train);
	snprintf(root, sizeof root, "%s/checkpoints", r->node->run_dir);
	if (ckpt_save(root, &r->model, &r->opt, &st, r->cfg->checkpoint.keep, r->err,
		      sizeof r->err) < 0)
		return fail(r, STORK_EXIT_CHECKPOINT_FAILED, r->err);
	r->ckpt_seconds = ((clock_monotonic() * 1e3) - t0) / 1e3;
	rank_logf(&r->log, "checkpoint step_%08" PRId64 " committed in %.0f ms", steps_done,
		  (clock_monotonic() * 1e3) - t0);
	snprintf(r->res->checkpoint, sizeof r->res->checkpoint, "%s/step_%08" PRId64, root,
		 steps_done);
	r->res->checkpoint_step = steps_done;
	printf("checkpoint step_%08" PRId64 " committed\n", steps_done);
	fflush(stdout);
	return 0;
}

/* Whether any rank has seen the stop signal: all ranks get the same answer. */
static int agree_stop(struct rank *r, int64_t steps_done, int *stop)
{
	int32_t flag = *r->node->stop_requested ? 1 : 0;

	if (r->node->stop_at_step > 0 && steps_done == r->node->stop_at_step)
		flag = 1;

	if (comm_allreduce(r->comm, &flag, 1, COMM_INT32, COMM_MAX) < 0)
		return fail_collective(r);
	*stop = flag;
	return 0;
}

static void report_step(struct rank *r, int64_t step, float loss, float lr, float norm, double ms)
{
	const struct stork_config *c = r->cfg;
	double tokens = (double)c->train.batch_size * c->train.seq_len * c->train.grad_accum *
			r->node->world_size;
	double tps = tokens / (ms / 1e3);

	rank_metric(&r->log, step + 1, "train_loss", loss, "nats");
	rank_metric(&r->log, step + 1, "lr", lr, "");
	rank_metric(&r->log, step + 1, "grad_norm", norm, "");
	rank_metric(&r->log, step + 1, "step_time_ms", ms, "ms");
	rank_metric(&r->log, step + 1, "tokens_per_sec", tps, "tokens/s");
	if (c->train.log_every > 0 && (step + 1) % c->train.log_every == 0)
		rank_logf(&r->log, "step %" PRId64 " loss %.6f lr %.3e norm %.4f %.1f ms", step + 1,
			  loss, lr, norm, ms);
	if (r->rank == 0) {
		printf("step %" PRId64 "/%d | loss %.4f | lr %.2e | norm %.2f | %.1f ms | %.0f tok/s\n",
		       step + 1, c->train.steps, loss, lr, norm, ms, tps);
		fflush(stdout);
	}
}

/*
 * After the stop checkpoint is committed: global rank 0 requeues the job,
 * exactly once; every rank then ends with the same reason. A stop close to
 * the job's end time is a timeout (the --signal=USR1@N route), any other a
 * preemption.
 */
static int stop_and_requeue(struct rank *r, int64_t steps_done)
{
	const struct train_node *n = r->node;
	time_t now = time(NULL);
	int timeout = n->job_end_time && n->job_end_time - now <= STOP_NEAR_END_S;
	int code = timeout ? STORK_EXIT_TIMEOUT : STORK_EXIT_PREEMPTED;
	char err[768];

	rank_logf(&r->log, "stopping after step %" PRId64 " on request%s", steps_done,
		  timeout ? " (the job's time limit is near)" : "");
	if (r->rank == 0) {
		if (!n->slurm_job) {
			snprintf(err, sizeof err, "not a Slurm job: nothing to requeue; run the same command again to resume");
			code = STORK_EXIT_REQUEUE_FAILED;
		} else if (slurm_job_requeue(n->slurm_job, err, sizeof err) < 0) {
			code = STORK_EXIT_REQUEUE_FAILED;
		} else {
			rank_logf(&r->log, "job %u requeued", n->slurm_job);
			printf("job %u requeued after step %" PRId64 "\n", n->slurm_job, steps_done);
			fflush(stdout);
		}
		if (code == STORK_EXIT_REQUEUE_FAILED) {
			rank_logf(&r->log, "requeue failed: %s", err);
			fprintf(stderr, "storkd: checkpoint committed but the requeue failed: %s\n", err);
			snprintf(r->res->message, sizeof r->res->message,
				 "stopped after step %" PRId64 ", checkpoint committed, requeue failed: %s",
				 steps_done, err);
			r->res->exit_code = code;
			return code;
		}
	}
	snprintf(r->res->message, sizeof r->res->message,
		 "stopped after step %" PRId64 " (%s), checkpoint committed, job requeued", steps_done,
		 timeout ? "time limit near" : "preempted");
	r->res->exit_code = code;
	return code;
}

/*
 * Fault injection (test builds): stall forever at a step, for the
 * watchdog's test; or make every step slower, so a test of Slurm's timed
 * signal gets a run whose length does not depend on the machine's speed.
 */
static void inject_faults(struct rank *r, int64_t step)
{
#ifdef STORK_FAULT_INJECTION
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

static int run_steps(struct rank *r, int64_t start)
{
	const struct stork_config *c = r->cfg;
	int64_t step;
	int stop = 0;

	for (step = start; step < c->train.steps; step++) {
		float loss = 0, norm = 0, lr = 0;
		double t0 = (clock_monotonic() * 1e3);

		heartbeat(r, step);
		inject_faults(r, step);
		if (r->val && step % c->train.val_every == 0 && validate(r, step))
			return r->res->exit_code;
		if (compute_gradients(r, &loss) || update(r, step, &norm, &lr))
			return r->res->exit_code;
		if (r->node->world_size > 1 && mean_over_ranks(r, &loss) < 0)
			return fail_collective(r);
		report_step(r, step, loss, lr, norm, (clock_monotonic() * 1e3) - t0);
		r->res->last_step = step + 1;
		heartbeat(r, step + 1);
		if (agree_stop(r, step + 1, &stop))
			return r->res->exit_code;
		if (stop) {
			double left, need;

			if (!checkpoint_fits(r, &left, &need)) {
				snprintf(r->err, sizeof r->err,
					 "stopped after step %" PRId64 " with %.0f s left before the job's end, "
					 "too little for a checkpoint (~%.0f s): no new checkpoint, the previous "
					 "one stays the latest", step + 1, left, need);
				/* Still requeue: the job resumes from the previous one. */
				if (r->rank == 0 && r->node->slurm_job) {
					char why[512];
					size_t l = strlen(r->err);

					if (slurm_job_requeue(r->node->slurm_job, why, sizeof why) == 0)
						snprintf(r->err + l, sizeof r->err - l, "; job requeued");
					else
						snprintf(r->err + l, sizeof r->err - l, "; requeue failed: %s", why);
				}
				return fail(r, STORK_EXIT_CHECKPOINT_FAILED, r->err);
			}
		}
		if (stop || step + 1 == c->train.steps ||
		    (c->checkpoint.every > 0 && (step + 1) % c->checkpoint.every == 0))
			if (checkpoint(r, step + 1))
				return r->res->exit_code;
		if (stop)
			return stop_and_requeue(r, step + 1);
	}
	snprintf(r->res->message, sizeof r->res->message, "completed %d steps", c->train.steps);
	return 0;
}

void train_rank(const struct train_node *n, int local, struct train_rank_result *res)
{
	struct rank r = { .node = n, .cfg = n->cfg, .local = local, .rank = n->rank_base + local,
			  .res = res };
	int64_t start;
	char err[512];

	memset(res, 0, sizeof *res);
	heartbeat(&r, 0);
	r.comm = n->rank_comm(n->rank_comm_arg, local);
	if (rank_log_open(&r.log, n->run_dir, r.rank, local, n->host, n->job_id, err,
			  sizeof err) < 0) {
		fail(&r, STORK_EXIT_INTERNAL, err);
		return;
	}
	if (n->restart_count > 0)
		rank_logf(&r.log, "=== restart %d (job %s) ===", n->restart_count, n->job_id);
	rank_logf(&r.log, "rank %d of %d (local %d of %d) on %s", r.rank, n->world_size, local,
		  n->local_ranks, n->host);
	if (bind_rank(&r) || open_data(&r) || init_model(&r, &start))
		goto out;
	rank_logf(&r.log, "model: %zu parameters; training steps %" PRId64 "..%d", r.model.num_params,
		  start + 1, n->cfg->train.steps);
	res->last_step = start;
	run_steps(&r, start);
out:
	rank_logf(&r.log, "exit %d: %s", res->exit_code, res->message);
	n->progress[local].done = 1;
	free(r.inputs);
	free(r.targets);
	if (r.train)
		data_close(r.train);
	if (r.val)
		data_close(r.val);
	adamw_free(&r.opt);
	gpt2_free(&r.model);
	rank_log_close(&r.log);
}
