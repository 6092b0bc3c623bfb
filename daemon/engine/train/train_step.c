/*
 * daemon/engine/train/train_step.c - one training step of a rank: the
 * validation loss, the gradients of the step's micro-batches, their
 * reduction over the replicas, the guards against a non-finite or spiking
 * loss, and the optimizer's update.
 */
#include "config.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"

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
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * The mean over the D replicas of a per-replica scalar that the last
 * stage's ranks know (the loss): one rank per replica contributes it, in
 * the collectives' fixed order, and every rank gets the same value.
 */
static int mean_over_replicas(struct rank *r, float *v)
{
	if (r->node->world_size == 1)
		return 0;
	/* under plain data parallelism every rank is a replica's last stage */
	if (r->lay.stage != r->lay.pp - 1 || r->lay.tp_rank != 0)
		*v = 0.0f;
	if (comm_allreduce(r->comm, v, 1, COMM_FLOAT32, COMM_SUM) < 0)
		return -1;
	*v /= (float)r->lay.dp;
	return 0;
}

/* How a failed pass ends the run: out_of_memory when an allocation failed, else code. */
static int pass_failure(const struct rank *r, int code)
{
	return r->model.out_of_memory ? STORK_EXIT_OUT_OF_MEMORY : code;
}

int rank_validate(struct rank *r, int64_t step)
{
	const struct stork_config *c = r->cfg;
	int B = c->train.batch_size, T = c->train.seq_len;
	float sum = 0, l;
	int rc;

	data_rewind(r->val);
	if (r->lay.pp > 1) {
		rc = pipeline_eval(&r->pipe, &r->model, r->val, c->train.val_batches, &sum, r->err,
				   sizeof r->err);
		if (rc)
			return rank_fail(r, rc > 0 ? rc : STORK_EXIT_RANK_FAILED, r->err);
	} else {
		for (int i = 0; i < c->train.val_batches; i++) {
			rc = data_next(r->val, r->inputs, r->targets, r->err, sizeof r->err);
			if (rc)
				return rank_fail(r, rc, r->err);
			l = gpt2_forward(&r->model, r->inputs, r->targets, B, T);
			/* a failed pass (a collective inside it, or memory) must not
			 * leave the tensor-parallel peers waiting */
			if (isnan(l) && r->model.err[0])
				return comm_abort_reason(r->comm)[0] ? rank_fail_collective(r) :
								       rank_fail(r, pass_failure(r, STORK_EXIT_INTERNAL),
										 r->model.err);
			sum += l;
		}
		sum /= (float)c->train.val_batches;
	}
	if (mean_over_replicas(r, &sum) < 0)
		return rank_fail_collective(r);
	rank_metric(&r->log, step + 1, "val_loss", sum, "nats");
	rank_logf(&r->log, "step %" PRId64 " val_loss %.6f", step + 1, sum);
	if (r->rank == 0)
		printf("step %" PRId64 "/%d | val loss %.4f\n", step + 1, c->train.steps, sum);
	return 0;
}

/*
 * After a rollback: the batch of the step that diverged or spiked is drawn and
 * dropped (every rank, as every pipeline stage draws each micro-batch), so
 * the step trains on the next one instead.
 */
static int skip_batch(struct rank *r, int64_t step)
{
	int rc;

	if (step != r->skip_batch_step)
		return 0;
	r->skip_batch_step = -1;
	for (int micro = 0; micro < r->cfg->train.grad_accum; micro++)
		if ((rc = data_next(r->train, r->inputs, r->targets, r->err, sizeof r->err)))
			return rank_fail(r, rc, r->err);
	rank_logf(&r->log, "step %" PRId64 ": skipping the batch that %s", step + 1,
		  r->skip_batch_cause == ROLLBACK_SPIKE ? "spiked" : "diverged");
	return 0;
}

/*
 * The gradients zeroed for a step. ZeRO-3 first gives back the layers'
 * parameters a checkpoint gathered (once a background checkpoint has
 * copied them); ZeRO-2 and 3 zero only what the rank keeps.
 */
static int zero_gradients(struct rank *r)
{
	int rc;

	if (r->lay.zero >= 3 && r->paged.gathered) {
		checkpoint_async_before_update(r);
		zero_paged_release_all(&r->paged, &r->model);
	}
	rc = r->lay.zero >= 2 ? zero_paged_zero_grad(&r->paged, &r->model) :
				gpt2_zero_grad(&r->model);
	if (rc)
		return rank_fail(r, STORK_EXIT_OUT_OF_MEMORY, r->model.err);
	return 0;
}

/*
 * Forward and backward over grad_accum micro-batches; returns the mean loss
 * (on the last stage; the pipeline schedules the micro-batches 1F1B).
 */
int rank_compute_gradients(struct rank *r, int64_t step, float *loss)
{
	const struct stork_config *c = r->cfg;
	int B = c->train.batch_size, T = c->train.seq_len, rc;
	float scale = 1.0f / (float)c->train.grad_accum;

	*loss = 0;
	scale *= spike_fault(r, step); /* test builds: 1 but at an injected spike */
	if (skip_batch(r, step))
		return r->res->exit_code;
	if ((rc = zero_gradients(r)))
		return rc;
	if (r->lay.pp > 1) {
		rc = pipeline_step(&r->pipe, &r->model, r->train, loss, r->err, sizeof r->err);
		if (rc > 0)
			return rank_fail(r, rc, r->err);
		if (rc < 0)
			return comm_abort_reason(r->comm)[0] ? rank_fail_collective(r) :
							       rank_fail(r, STORK_EXIT_DATA, r->err);
		if (r->sync) /* the stage's embeddings or final LayerNorm */
			grad_sync_push_rest(r->sync, &r->model);
		inject_nan(r, step, loss);
		return 0;
	}
	for (int micro = 0; micro < c->train.grad_accum; micro++) {
		float l;

		rc = data_next(r->train, r->inputs, r->targets, r->err, sizeof r->err);
		if (rc)
			return rank_fail(r, rc, r->err);
		l = gpt2_forward(&r->model, r->inputs, r->targets, B, T);
		if (isnan(l) && r->model.err[0])
			return comm_abort_reason(r->comm)[0] ? rank_fail_collective(r) :
							       rank_fail(r, pass_failure(r, STORK_EXIT_DATA),
									 r->model.err);
		/* the last micro-batch's backward pass makes the gradients final */
		if (r->sync && micro == c->train.grad_accum - 1)
			gpt2_set_layer_hook(&r->model, grad_sync_layer_done, r->sync);
		else if (r->lay.zero >= 2 && micro == c->train.grad_accum - 1)
			gpt2_set_layer_hook(&r->model, zero_paged_layer_done, &r->paged);
		rc = gpt2_backward(&r->model, scale);
		gpt2_set_layer_hook(&r->model, NULL, NULL);
		if (rc)
			return comm_abort_reason(r->comm)[0] ? rank_fail_collective(r) :
							       rank_fail(r, pass_failure(r, STORK_EXIT_INTERNAL),
									 r->model.err);
		*loss += l * scale;
	}
	if (r->sync) /* the embeddings and the final LayerNorm: final only now */
		grad_sync_push_rest(r->sync, &r->model);
	inject_nan(r, step, loss);
	return 0;
}

/*
 * Sum of squares of the gradients over the whole model, each parameter
 * counted once: replicas (tensor-parallel copies of replicated tensors, the
 * last stage's tied embedding) are left out, and the rest is added over
 * the replica's ranks (or, under ZeRO-1, over every rank's part).
 */
static int global_sumsq(struct rank *r, double *out)
{
	struct gpt2 *m = &r->model;
	double sum = 0.0;
	int replicas = 0, rc;

	if (r->lay.zero) {
		sum = zero_sumsq(&r->zero, m);
		rc = r->node->world_size > 1 ?
			     comm_allreduce(r->comm, &sum, 1, COMM_FLOAT64, COMM_SUM) : 0;
		*out = sum;
		return rc;
	}
	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		replicas |= m->sizes[t] && gpt2_shard_is_replica(&m->config, &m->shard, t);
	if (!replicas) {
		sum = grad_sumsq(m->ops, m->grads, m->num_params);
	} else {
		for (int t = 0; t < GPT2_NUM_TENSORS; t++)
			if (!gpt2_shard_is_replica(&m->config, &m->shard, t))
				sum += grad_sumsq(m->ops, m->grad_tensors[t], m->sizes[t]);
	}
	if (r->lay.dp > 1 && r->lay.tp * r->lay.pp > 1) {
		/* one world all-reduce with replica 0's ranks contributing: every
		 * rank gets the same bits, whatever the replicas' groups look like */
		if (r->lay.dp_rank != 0)
			sum = 0.0;
		rc = comm_allreduce(r->comm, &sum, 1, COMM_FLOAT64, COMM_SUM);
	} else {
		rc = r->grp.mp ? comm_allreduce(r->grp.mp, &sum, 1, COMM_FLOAT64, COMM_SUM) : 0;
	}
	*out = sum;
	return rc;
}

void rank_mark_updated(struct rank *r, int64_t steps)
{
	r->updated_steps = steps;
	data_get_position(r->train, &r->updated_pos);
	r->applied_steps = steps;
	r->applied_pos = r->updated_pos;
}

/*
 * ZeRO-1 applied this step's update to the rank's own parts (and its
 * mirror's): they are one step ahead of the rest of its parameters until
 * the all-gather ends, and a regroup in between must know.
 */
static void mark_applied(struct rank *r, int64_t steps)
{
	r->applied_steps = steps;
	data_get_position(r->train, &r->applied_pos);
}

/*
 * The tensors every tensor-parallel rank holds whole (LayerNorms, wpe, the
 * projection biases) get identical gradients inside the group, but each
 * rank averages them over its own data-parallel group, and groups that
 * span nodes differently round differently: tensor-parallel rank 0's
 * updated copy is the one every rank of the group keeps.
 */
int rank_sync_replicated(struct rank *r, int always)
{
	struct gpt2 *m = &r->model;

	if (!r->grp.tp || (r->lay.dp == 1 && !always))
		return 0;
	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		if (m->sizes[t] && !gpt2_tensor_is_split(&m->config, t) &&
		    comm_broadcast(r->grp.tp, m->tensors[t], m->sizes[t], COMM_FLOAT32, 0) < 0)
			return -1;
	return 0;
}

/*
 * The data-parallel sum of the gradients: what the overlap thread has not
 * finished yet, or the whole collective now: an all-reduce, or under
 * ZeRO-1 a reduce-scatter of this rank's part (which it also averages;
 * overlapped, the thread all-reduced every gradient and the part is
 * averaged here). Times it (sync_ms, and sync_wait_ms: the part the
 * backward pass did not hide).
 */
static int reduce_gradients(struct rank *r)
{
	struct gpt2 *m = &r->model;
	double t0 = clock_monotonic(), busy, wait;
	int rc;

	if (r->sync) {
		rc = grad_sync_wait(r->sync, &busy, &wait);
		r->sync_ms = 1e3 * busy;
		r->sync_wait_ms = 1e3 * wait;
		if (!rc && r->lay.zero) /* as zero_reduce_scatter ends (comm.h: the same bits) */
			zero_scale(&r->zero, m, 1.0f / (float)r->zero.D);
		return rc;
	}
	if (r->lay.zero >= 2) { /* the layers' collectives in the passes, and the rest's */
		rc = zero_paged_reduce_rest(&r->paged, m);
		zero_paged_times(&r->paged, &busy, &wait);
		r->sync_ms = 1e3 * busy;
		r->sync_wait_ms = 1e3 * wait;
		return rc;
	}
	if (r->lay.zero)
		rc = zero_reduce_scatter(&r->zero, m, r->grp.dp);
	else
		rc = comm_allreduce(r->grp.dp, m->grads, m->num_params, COMM_FLOAT32, COMM_SUM);
	r->sync_ms = r->sync_wait_ms = 1e3 * (clock_monotonic() - t0);
	return rc;
}

/*
 * The guards before an update (train_guard.c): the divergence guard when
 * the norm is not finite, else the spike guard, which judges the loss
 * averaged over the replicas (done here, for every step: *loss becomes
 * that mean on every rank). 0 with *drop set when the update is dropped,
 * or the exit code.
 */
static int guards(struct rank *r, int64_t step, float *loss, float norm, int *drop)
{
	int rc;

	*drop = !isfinite(norm);
	if (*drop && (rc = diverged(r, step, *loss, norm)))
		return rc;
	if (mean_over_replicas(r, loss) < 0)
		return rank_fail_collective(r);
	return *drop ? 0 : spike_guard(r, step, *loss, norm, drop);
}

/*
 * Average the gradients over the replicas (all-reduce, or ZeRO-1's
 * reduce-scatter), add the tied embedding's two halves (first and last
 * stage), clip to the global norm, update (ZeRO-1: the rank's parts and,
 * under restart.in_place, its neighbour's copy, zero_mirror.h), and
 * (ZeRO-1) gather the parameters back. Returns 0 with the norm before clipping and
 * *loss averaged over the replicas.
 */
int rank_update(struct rank *r, int64_t step, float *loss, float *norm_out, float *lr_out)
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
	struct gpt2 *m = &r->model;
	size_t n = m->num_params;
	float *wte = m->grad_tensors[GPT2_WTE];
	size_t nwte = m->sizes[GPT2_WTE];
	double sumsq;
	float norm, clip;
	int drop, rc;

	if (r->lay.zero) {
		if (reduce_gradients(r) < 0)
			return rank_fail_collective(r);
		/* the embedding segment: this rank's rows, the same on both stages */
		wte = m->grads + r->zero.seg[0].lo;
		nwte = m->sizes[GPT2_WTE] ? r->zero.seg[0].hi - r->zero.seg[0].lo : 0;
	} else if (r->grp.dp) {
		if (reduce_gradients(r) < 0)
			return rank_fail_collective(r);
		grad_scale(m->ops, m->grads, n, 1.0f / (float)r->lay.dp);
	}
	if (r->grp.emb && comm_allreduce(r->grp.emb, wte, nwte, COMM_FLOAT32, COMM_SUM) < 0)
		return rank_fail_collective(r);
	if (global_sumsq(r, &sumsq) < 0)
		return rank_fail_collective(r);
	norm = (float)sqrt(sumsq);
	*norm_out = norm;
	*lr_out = lr_at(&sched, step);
	/* a dropped update leaves parameters and moments untouched, replicas still equal */
	if ((rc = guards(r, step, loss, norm, &drop)))
		return rc;
	if (drop) {
		rank_mark_updated(r, step + 1);
		return 0;
	}
	clip = grad_clip_scale(norm, (float)c->train.grad_clip);
	if (r->lay.zero) {
		if (clip != 1.0f)
			zero_scale(&r->zero, m, clip);
		if (zero_mirror_grads(&r->mirror, &r->zero, m, r->grp.dp) < 0)
			return rank_fail_collective(r);
		zero_adamw(&r->zero, &r->opt, &hp, *lr_out, m);
		zero_mirror_adamw(&r->mirror, &hp, *lr_out, m);
		mark_applied(r, step + 1);
		if ((r->lay.zero >= 2 ? zero_paged_after_update(&r->paged, m) :
					zero_allgather(&r->zero, m, r->grp.dp)) < 0)
			return rank_fail_collective(r);
	} else {
		if (clip != 1.0f)
			grad_scale(m->ops, m->grads, n, clip);
		adamw_step_model(&r->opt, &hp, *lr_out, m);
	}
	rank_mark_updated(r, step + 1);
	if (rank_sync_replicated(r, 0) < 0)
		return rank_fail_collective(r);
	*norm_out = norm;
	return 0;
}
