/*
 * daemon/engine/train/train.c - the training loop of one rank; see train.h.
 *
 * A rank owns everything it computes with (model replica, optimizer state,
 * data loaders, log files); the only things shared between rank threads are
 * the read-only node context and the communicator. That keeps the loop
 * readable top to bottom, in the manner of llm.c's train_gpt2.c main().
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

/* A stop this close to the job's end (seconds) is a timeout, not a preemption. */
#define STOP_NEAR_END_S 300

static void heartbeat(struct rank *r, int64_t steps_done)
{
	struct rank_progress *p = &r->node->progress[r->local];

	p->step = steps_done;
	p->beat = clock_monotonic();
}

const char *rank_phase_name(int phase)
{
	switch (phase) {
	case GPT2_PHASE_FORWARD: return "in forward";
	case GPT2_PHASE_BACKWARD: return "in backward";
	case RANK_PHASE_STEP_START: return "at the start";
	case RANK_PHASE_UPDATE: return "in the update";
	case RANK_PHASE_VALIDATION: return "in validation";
	case RANK_PHASE_STOP_DECISION: return "in the stop decision";
	case RANK_PHASE_CHECKPOINT: return "in a checkpoint";
	}
	return "";
}

/* The rank's phase outside the model's passes, for a hang's report. */
static void phase(struct rank *r, int what)
{
	struct gpt2_where *w = &r->node->progress[r->local].where;

	atomic_store_explicit(&w->layer, -1, memory_order_relaxed);
	atomic_store_explicit(&w->phase, what, memory_order_relaxed);
}

/*
 * A collective failed: another rank failed or aborted first (its own
 * record names the cause), so this failure is a consequence, marked
 * secondary so that exit_info.json names the first cause.
 */
int rank_fail_collective(struct rank *r)
{
	int first = r->res->exit_code == 0;
	int code = rank_fail(r, STORK_EXIT_RANK_FAILED, comm_abort_reason(r->comm));

	if (first)      /* a rank that failed on its own first keeps that cause */
		r->res->secondary = 1;
	return code;
}

/*
 * Record why this rank stops (the first reason wins), for a stop every rank
 * has agreed on: no one is left waiting, so nothing is aborted (an abort
 * could break a peer still finishing the agreement's collective).
 */
int rank_fail_agreed(struct rank *r, int code, const char *msg)
{
	if (r->res->exit_code == 0) {
		r->res->exit_code = code;
		r->res->fail_time = clock_wall();
		snprintf(r->res->message, sizeof r->res->message, "%s", msg);
	}
	rank_logf(&r->log, "error: %s", msg);
	fprintf(stderr, "storkd: rank %d on %s: %s\n", r->rank, r->node->host, msg);
	return code;
}

/* Record why this rank stops, on its own: the other ranks must hear of it. */
int rank_fail(struct rank *r, int code, const char *msg)
{
	rank_fail_agreed(r, code, msg);
	/* Wake the other ranks out of any collective instead of leaving them
	 * waiting for this one. */
	if (r->comm)
		comm_abort(r->comm, msg);
	return code;
}

static void notice_to_log(void *arg, const char *msg)
{
	struct rank *r = arg;

	rank_logf(&r->log, "%s", msg);
	if (r->rank == 0)
		fprintf(stderr, "storkd: %s\n", msg);
}

/* ----------------------------------------------------------------- setup */

/* The model's shape: the configuration's, or model.init_from's. */
static int model_shape(struct rank *r, struct gpt2_config *mc)
{
	int rc = layout_model_shape(r->cfg, mc, r->err, sizeof r->err);

	if (rc < 0)
		return rank_fail(r, rc == -2 ? STORK_EXIT_CONFIG : STORK_EXIT_DATA, r->err);
	return 0;
}

/*
 * This rank's place in dp x tp x pp and the communicators of its groups;
 * the layout goes to the rank's log and, once, to stdout.
 */
static int make_layout(struct rank *r, const struct gpt2_config *mc)
{
	const struct stork_config *c = r->cfg;
	char desc[256];
	int rc;

	if (layout_make(&r->lay, mc, r->node->world_size, c->parallel.tensor, c->parallel.pipeline,
			c->parallel.zero, c->parallel.stage_split, c->train.seq_len, r->rank, r->err,
			sizeof r->err) < 0)
		return rank_fail(r, STORK_EXIT_CONFIG, r->err);
	if ((rc = layout_groups(&r->lay, r->comm, &r->grp))) {
		snprintf(r->err, sizeof r->err, "cannot make the parallel groups of dp %d x tp %d x pp %d: %s",
			 r->lay.dp, r->lay.tp, r->lay.pp,
			 rc == COMM_EINVAL ? "groups across nodes need a UCX built with thread "
					     "support (UCS_THREAD_MODE_MULTI), or there are more "
					     "groups than communicator ids" :
					     comm_strerror(rc));
		return rc == COMM_EABORTED ? rank_fail_collective(r) : rank_fail(r, STORK_EXIT_CONFIG, r->err);
	}
	layout_describe(&r->lay, desc, sizeof desc);
	rank_logf(&r->log, "layout: %s", desc);
	if (r->rank == 0) {
		printf("layout: %s\n", desc);
		fflush(stdout);
	}
	return 0;
}

/*
 * What the forward pass keeps (train.recompute), whether it runs fused
 * kernels (train.fused; every backward pass scales the loss by
 * 1/grad_accum), and the pipeline schedule's buffers and activation
 * slots (pipeline parallelism only).
 */
static int init_pipeline(struct rank *r)
{
	const struct stork_config *c = r->cfg;

	gpt2_set_recompute(&r->model, layout_recompute(c));
	gpt2_set_fused(&r->model, c->train.fused, 1.0f / (float)c->train.grad_accum);
	if (r->lay.pp == 1)
		return 0;
	if (pipeline_init(&r->pipe, r->grp.pp, &r->model, r->lay.stage, r->lay.pp,
			  c->train.batch_size, c->train.seq_len, c->train.grad_accum) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the pipeline");
	return 0;
}

/*
 * The shard patterns to open: the configured globs, each URL replaced by
 * the file its launcher staged it as (launcher/run/stage.c). NULL when out of
 * memory or a path does not fit.
 */
static char **local_globs(const struct stork_config *c, const struct stork_globs *g)
{
	char dir[4096], path[4096], **v = calloc(g->n + 1, sizeof *v);

	if (!v || stage_dir_resolve(c->data.stage_dir, dir, sizeof dir) < 0)
		goto fail;
	for (size_t i = 0; i < g->n; i++) {
		if (!url_is_http(g->v[i]))
			v[i] = strdup(g->v[i]);
		else if (stage_local_path(dir, g->v[i], path, sizeof path) == 0)
			v[i] = strdup(path);
		if (!v[i])
			goto fail;
	}
	return v;
fail:
	for (size_t i = 0; v && i < g->n; i++)
		free(v[i]);
	free(v);
	return NULL;
}

static void free_globs(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static int open_data(struct rank *r)
{
	const struct stork_config *c = r->cfg;
	char **train = local_globs(c, &c->data.train), **val = local_globs(c, &c->data.val);
	struct data_config dc = {
		.key = "data.train",
		.globs = (const char *const *)train,
		.nglobs = (int)c->data.train.n,
		.batch_size = c->train.batch_size,
		.seq_len = c->train.seq_len,
		.rank = r->lay.dp_rank,
		.nranks = r->lay.dp,
		.shuffle = c->data.shuffle,
		.seed = c->model.seed,
		.vocab_size = c->model.vocab_size,
		.prefetch = c->data.prefetch,
	};
	int rc = 0;

	if (!train || !val) {
		free_globs(train, c->data.train.n);
		free_globs(val, c->data.val.n);
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory (or a path too long) for the data shards");
	}
	rc = data_open(&r->train, &dc, r->err, sizeof r->err);
	if (rc == 0)
		data_get_position(r->train, &r->data_start);
	if (rc == 0 && c->data.val.n > 0 && c->train.val_every > 0) {
		dc.key = "data.val";
		dc.globs = (const char *const *)val;
		dc.nglobs = (int)c->data.val.n;
		dc.shuffle = 0;
		dc.prefetch = 0; /* rewound before every evaluation */
		rc = data_open(&r->val, &dc, r->err, sizeof r->err);
	}
	free_globs(train, c->data.train.n);
	free_globs(val, c->data.val.n);
	if (rc)
		return rank_fail(r, rc, r->err);
	r->inputs = malloc(sizeof(int) * (size_t)c->train.batch_size * (size_t)c->train.seq_len);
	r->targets = malloc(sizeof(int) * (size_t)c->train.batch_size * (size_t)c->train.seq_len);
	if (!r->inputs || !r->targets)
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the batch");
	return 0;
}

/*
 * Optimizer state for the model's parameters, or this rank's ZeRO-1 part
 * of them, in o's memory: the host's where a checkpoint is read into it;
 * a fresh state straight in the rank's device memory (zeroed there).
 */
static int init_optimizer(struct rank *r, const struct ops *o)
{
	size_t n = r->model.num_params;

	if (r->lay.zero) {
		if (zero_plan_make(&r->zero, &r->model, r->lay.dp, r->lay.dp_rank) < 0)
			return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the ZeRO-1 plan");
		n = r->zero.state_n;
	}
	if (adamw_init_on(&r->opt, n, o) < 0) {
		gpt2_oom_message(o, "the optimizer state", 2 * n * sizeof(float), r->err,
				 sizeof r->err);
		return rank_fail(r, STORK_EXIT_INTERNAL, r->err);
	}
	return 0;
}

/*
 * Resume from a checkpoint of this very layout: each rank reads its own
 * shard only. Returns 1 when done, 0 when the layout differs, -1 failed.
 */
static int load_own_shard(struct rank *r, const char *dir, const struct gpt2_config *mc,
			  const struct gpt2_shard *shard)
{
	struct ckpt_layout l;
	struct ckpt_shard_info info;
	const struct par_layout *p = &r->lay;

	if (ckpt_read_layout(dir, &l, r->err, sizeof r->err) < 0 || !l.sharded ||
	    l.world != p->world || l.dp != p->dp || l.tp != p->tp || l.pp != p->pp ||
	    l.zero != p->zero)
		return 0;
	if (gpt2_shard_from_full(&r->model, mc, shard, NULL) < 0) {
		rank_fail(r, STORK_EXIT_CONFIG, r->model.err);
		return -1;
	}
	r->model.shard.tp = shard->tp;
	if (init_optimizer(r, &ops_cpu))
		return -1;
	shard_info(r, &info);
	/* only a node-local tier holds a plain layout's shards: the node's one replica */
	if (plain_layout(p))
		info.rank = r->node->rank_base;
	if (ckpt_read_own_shard(dir, &info, r->model.params, r->opt.m, r->opt.v, &r->opt.step,
				r->err, sizeof r->err) < 0) {
		rank_fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
		return -1;
	}
	return 1;
}

/*
 * Resume from checkpoint dir, whatever layout wrote it: this rank reads its
 * own shard's parameters and its part of the moments from the pieces of
 * the files that hold them (the whole model is never in memory). The same
 * bits whatever the layout, so a requeued job may come back on another
 * number of nodes or ranks.
 */
static int load_checkpoint(struct rank *r, const char *dir, const struct gpt2_config *expect,
			   const struct gpt2_shard *shard)
{
	struct ckpt_shard_info info;
	int own;

	if ((own = load_own_shard(r, dir, expect, shard)))
		return own < 0 ? r->res->exit_code : 0;
	if (gpt2_shard_from_full(&r->model, expect, shard, NULL) < 0)
		return rank_fail(r, STORK_EXIT_CONFIG, r->model.err);
	r->model.shard.tp = shard->tp;
	if (init_optimizer(r, &ops_cpu))
		return r->res->exit_code;
	shard_info(r, &info);
	if (ckpt_read_resharded(dir, &info, r->model.params, r->opt.m, r->opt.v, &r->opt.step,
				r->err, sizeof r->err) < 0)
		return rank_fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
	return 0;
}

/*
 * run.resume_from: a checkpoint directory, a checkpoints/ directory, or a
 * run directory; its newest usable checkpoint goes in dir. Returns 1, or 1
 * with the rank failed (exit code set) when it holds none.
 */
static int resume_from(struct rank *r, char *dir, size_t len)
{
	const char *from = r->cfg->run.resume_from;

	if (ckpt_find_any(from, dir, len, notice_to_log, r)) {
		rank_logf(&r->log, "run.resume_from: starting from %s", dir);
		return 1;
	}
	snprintf(r->err, sizeof r->err,
		 "run.resume_from: %s holds no usable checkpoint (a step_N directory, its checkpoints/ "
		 "directory or a run directory)", from);
	rank_fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
	return 1;
}

/*
 * The checkpoint to resume from (the run's own, else run.resume_from), in
 * dir: rank 0 looks and verifies every file against the manifest, and the
 * world learns its answer, so each checkpoint is read through once, not
 * once per rank. Returns 1 when there is one (or 1 with the rank failed).
 */
static int find_checkpoint(struct rank *r, const char *root, char *dir, size_t len)
{
	int32_t found = 0;
	long long step = -1;
	char local[4096];

	dir[0] = '\0';
	if (r->rank == 0)
		found = ckpt_find(root, dir, len, notice_to_log, r) ||
			(r->cfg->run.resume_from[0] && resume_from(r, dir, len));
	if (r->node->world_size > 1 &&
	    (comm_broadcast(r->comm, &found, 1, COMM_INT32, 0) < 0 ||
	     comm_broadcast(r->comm, dir, len, COMM_UINT8, 0) < 0)) {
		rank_fail_collective(r);
		return 1;
	}
	dir[len - 1] = '\0';
	/* the node-local tiers, when newer than the run directory's (or another run's) */
	if (found && !r->res->exit_code && r->cfg->checkpoint.local_dir[0]) {
		if (!strstr(dir, root) || sscanf(strrchr(dir, '/') + 1, "step_%lld", &step) != 1)
			step = -1;
		if (local_tier_find(r, step, local, sizeof local))
			snprintf(dir, len, "%s", local);
	}
	return found;
}

/*
 * Whether keys other than those say_changes lists changed since the
 * checkpoint: the checkpoint's configuration hash against this
 * configuration's with the listed keys put back to the checkpoint's values
 * (a copy that shares the strings, only read by config_hash).
 */
static int other_keys_changed(const struct rank *r, const struct ckpt_state *st)
{
	struct stork_config then = *r->cfg;

	if (!st->config_hash)
		return 0;
	then.train.batch_size = (int)st->was.batch_size;
	then.train.grad_accum = (int)st->was.grad_accum;
	then.train.seq_len = (int)st->was.seq_len;
	then.train.steps = (int)st->was.steps;
	then.train.lr = st->was.lr;
	then.parallel.tensor = (int)st->was.tp;
	then.parallel.pipeline = (int)st->was.pp;
	then.parallel.zero = (int)st->was.zero;
	return config_hash(&then) != st->config_hash;
}

/*
 * Rank 0 says, in one block at the start, every setting that differs from
 * the checkpoint's: a resume that trains differently should never do so
 * silently. Nothing for checkpoints that did not record their settings.
 */
static void say_changes(struct rank *r, const struct ckpt_state *st, const char *dir)
{
	const struct ckpt_settings was = st->was, now = settings_now(r);
	const struct {
		const char *key;
		int64_t was, now;
	} rows[] = {
		{ "train.batch_size", was.batch_size, now.batch_size },
		{ "train.grad_accum", was.grad_accum, now.grad_accum },
		{ "train.seq_len", was.seq_len, now.seq_len },
		{ "train.steps", was.steps, now.steps },
		{ "data-parallel replicas", was.dp, now.dp },
		{ "parallel.tensor", was.tp, now.tp },
		{ "parallel.pipeline", was.pp, now.pp },
		{ "parallel.zero", was.zero, now.zero },
	};
	char block[1024];
	size_t n = 0;

	if (r->rank != 0 || was.batch_size == 0)
		return;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0] && n < sizeof block; i++)
		if (rows[i].was != rows[i].now)
			n += (size_t)snprintf(block + n, sizeof block - n, "\n  %s: %" PRId64 " -> %" PRId64,
					      rows[i].key, rows[i].was, rows[i].now);
	if (was.lr != now.lr && n < sizeof block)
		n += (size_t)snprintf(block + n, sizeof block - n, "\n  train.lr: %g -> %g", was.lr,
				      now.lr);
	if (other_keys_changed(r, st) && n < sizeof block)
		n += (size_t)snprintf(block + n, sizeof block - n, "\n  other settings (the "
				      "configuration's hash differs; config/stork.N.yaml keeps each "
				      "launch's)");
	if (n == 0)
		return;
	rank_logf(&r->log, "resume: changed since %s (step %" PRId64 "):%s", dir, st->step, block);
	printf("resume: changed since %s (step %" PRId64 "):%s\n", dir, st->step, block);
}

/*
 * The model and optimizer: from the newest valid checkpoint, else from
 * model.init_from, else built from the configured sizes and seed. Every rank
 * does the same for its shard, so replicas start identical without a
 * broadcast.
 */
static int init_model(struct rank *r, const struct gpt2_config *mc, int64_t *start_step)
{
	const struct stork_config *c = r->cfg;
	char root[4096], dir[4096];
	struct gpt2_shard shard;
	struct ckpt_state st;

	layout_shard(&r->lay, &shard);
	shard.tp = r->grp.tp;
	*start_step = 0;
	r->shape = *mc;
	spike_init(&r->spike);
	snprintf(root, sizeof root, "%s/checkpoints", r->node->run_dir);
	if (find_checkpoint(r, root, dir, sizeof dir) ||
	    (c->checkpoint.local_dir[0] && local_tier_find(r, -1, dir, sizeof dir))) {
		if (r->res->exit_code)
			return r->res->exit_code;
		if (ckpt_read_state(dir, &st, r->err, sizeof r->err) < 0)
			return rank_fail(r, STORK_EXIT_CHECKPOINT_BAD, r->err);
		/* mc: the configuration's shape, or model.init_from's: the layout was cut for it */
		if (load_checkpoint(r, dir, mc, &shard))
			return r->res->exit_code;
		if (data_set_position(r->train, &st.train, r->err, sizeof r->err))
			return rank_fail(r, STORK_EXIT_DATA, r->err);
		/* the spike window as it was: a resumed run judges its steps alike */
		r->spike = st.spike;
		spike_trim(&r->spike, c->train.spike_window);
		*start_step = st.step;
		rank_logf(&r->log, "resumed from %s at step %" PRId64, dir, st.step);
		if (r->rank == 0)
			printf("resumed from %s at step %" PRId64 "\n", dir, st.step);
		say_changes(r, &st, dir);
		if (st.step >= c->train.steps && r->node->restart_count == 0 &&
		    r->node->attempt == 0) {
			msg_format(r->err, sizeof r->err,
				   "train.steps = %d (%s) is not above the step of the checkpoint it "
				   "resumes, %" PRId64 " (%s): nothing would train; set train.steps above "
				   "%" PRId64, c->train.steps, config_origin(c, "train.steps"), st.step,
				   dir, st.step);
			return rank_fail(r, STORK_EXIT_CONFIG, r->err);
		}
		if (st.step >= c->train.steps && r->node->restart_count > 0) {
			/* Stork requeues only a run it stopped early: this attempt
			 * comes from a requeue outside Stork, typically a batch
			 * script's trap that runs once srun has returned */
			rank_logf(&r->log, "the run was already complete (step %" PRId64 " of %d): this "
				  "attempt (restart %d) was requeued from outside Stork, e.g. by a trap "
				  "in the batch script; nothing to do", st.step, c->train.steps,
				  r->node->restart_count);
			if (r->rank == 0)
				printf("run already complete at step %" PRId64 ": this attempt was requeued "
				       "from outside Stork (a trap in the batch script?); exiting\n",
				       st.step);
		}
		return 0;
	}
	if (c->model.init_from[0]) {
		int rc = hf_is_model_dir(c->model.init_from) ?
				 hf_model_load_shard(&r->model, c->model.init_from, &shard, r->err,
						     sizeof r->err) :
				 gpt2_load_shard(&r->model, c->model.init_from, &shard, r->err,
						 sizeof r->err);

		if (rc < 0)
			return rank_fail(r, rc == -2 ? STORK_EXIT_INTERNAL : STORK_EXIT_DATA, r->err);
		rank_logf(&r->log, "weights from %s", c->model.init_from);
	} else {
		int rc = gpt2_build_shard(&r->model, mc, &shard, c->model.seed);

		if (rc < 0)
			return rank_fail(r, rc == -2 ? STORK_EXIT_INTERNAL : STORK_EXIT_CONFIG, r->model.err);
	}
	return init_optimizer(r, r->ops);
}

/* ----------------------------------------------------------------- steps */

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

static int validate(struct rank *r, int64_t step)
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
								       rank_fail(r, STORK_EXIT_INTERNAL, r->model.err);
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

/* The all-reduce thread of a GPU rank works on the rank's GPU. */
static int sync_thread_on_gpu(void *arg)
{
	struct rank *r = arg;
	char desc[160], err[256];

	if (kernels_cuda_use_device(r->gpu, desc, sizeof desc, err, sizeof err) < 0) {
		rank_logf(&r->log, "parallel.overlap: the all-reduce thread cannot use gpu %d: %s",
			  r->gpu, err);
		return -1;
	}
	return 0;
}

/* parallel.overlap: a communication thread for the data-parallel group (nothing to do without replicas). */
static int start_grad_sync(struct rank *r)
{
	int gpu = r->ops != &ops_cpu;

	if (!r->cfg->parallel.overlap || !r->grp.dp)
		return 0;
	if (grad_sync_start(&r->sync, r->grp.dp, r->ops, gpt2_grad_pieces(&r->model),
			    gpu ? sync_thread_on_gpu : NULL, r) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "cannot start the gradient all-reduce thread");
	if (r->lay.pp > 1) /* the stage's last micro-batch makes its layers' gradients final */
		pipeline_set_layer_hook(&r->pipe, grad_sync_layer_done, r->sync);
	rank_logf(&r->log, "parallel.overlap: each layer's gradients are all-reduced during the "
		  "backward pass");
	return 0;
}

/*
 * Forward and backward over grad_accum micro-batches; returns the mean loss
 * (on the last stage; the pipeline schedules the micro-batches 1F1B).
 */
static int compute_gradients(struct rank *r, int64_t step, float *loss)
{
	const struct stork_config *c = r->cfg;
	int B = c->train.batch_size, T = c->train.seq_len, rc;
	float scale = 1.0f / (float)c->train.grad_accum;

	*loss = 0;
	scale *= spike_fault(r, step); /* test builds: 1 but at an injected spike */
	if (skip_batch(r, step))
		return r->res->exit_code;
	if (gpt2_zero_grad(&r->model) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the gradients");
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
							       rank_fail(r, STORK_EXIT_DATA, r->model.err);
		/* the last micro-batch's backward pass makes the gradients final */
		if (r->sync && micro == c->train.grad_accum - 1)
			gpt2_set_layer_hook(&r->model, grad_sync_layer_done, r->sync);
		rc = gpt2_backward(&r->model, scale);
		gpt2_set_layer_hook(&r->model, NULL, NULL);
		if (rc)
			return comm_abort_reason(r->comm)[0] ? rank_fail_collective(r) :
							       rank_fail(r, STORK_EXIT_INTERNAL, r->model.err);
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

/*
 * The tensors every tensor-parallel rank holds whole (LayerNorms, wpe, the
 * projection biases) get identical gradients inside the group, but each
 * rank averages them over its own data-parallel group, and groups that
 * span nodes differently round differently: tensor-parallel rank 0's
 * updated copy is the one every rank of the group keeps.
 */
static int sync_replicated(struct rank *r)
{
	struct gpt2 *m = &r->model;

	if (!r->grp.tp || r->lay.dp == 1)
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
 * stage), clip to the global norm, update, and (ZeRO-1) gather the
 * parameters back. Returns 0 with the norm before clipping and
 * *loss averaged over the replicas.
 */
static int update(struct rank *r, int64_t step, float *loss, float *norm_out, float *lr_out)
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
	if ((rc = guards(r, step, loss, norm, &drop)) || drop)
		return rc;
	clip = grad_clip_scale(norm, (float)c->train.grad_clip);
	if (r->lay.zero) {
		if (clip != 1.0f)
			zero_scale(&r->zero, m, clip);
		zero_adamw(&r->zero, &r->opt, &hp, *lr_out, m);
		if (zero_allgather(&r->zero, m, r->grp.dp) < 0)
			return rank_fail_collective(r);
	} else {
		if (clip != 1.0f)
			grad_scale(m->ops, m->grads, n, clip);
		adamw_step_model(&r->opt, &hp, *lr_out, m);
	}
	if (sync_replicated(r) < 0)
		return rank_fail_collective(r);
	*norm_out = norm;
	return 0;
}

/*
 * The deadline guard (rank 0): whether another step and then a checkpoint
 * would no longer fit before the job's end, with preempt.deadline_lead
 * seconds to spare. Then the run stops now, without waiting for a signal
 * that may never come (a batch-shell trap, --signal forgotten).
 */
static int deadline_near(struct rank *r, double step_s)
{
	const struct stork_config *c = r->cfg;
	time_t end = r->node->job_end_time;
	double left, need;

	if (r->rank != 0 || !c->preempt.deadline_guard || !end)
		return 0;
	left = (double)(end - time(NULL));
	need = step_s + checkpoint_need(r) + c->preempt.deadline_lead;
	if (left >= need)
		return 0;
	rank_logf(&r->log,
		  "deadline guard: %.0f s left before the job's end; a step takes %.1f s, a "
		  "checkpoint about %.1f s, preempt.deadline_lead %.0f s: stopping now",
		  left, step_s, checkpoint_need(r), c->preempt.deadline_lead);
	printf("deadline guard: %.0f s left before the job's end: checkpointing and requeueing now\n",
	       left);
	fflush(stdout);
	return 1;
}

/*
 * The stop decision, the same on every rank: whether any rank has seen the
 * stop signal or rank 0's deadline guard fired (step_s: the step that just
 * ended took that long), and whether a stop checkpoint still fits before
 * the job's end. Only rank 0 answers the second (it timed the last commit,
 * which waits for every rank); the other ranks contribute 0, so one MAX
 * all-reduce carries both answers and no rank can stop differently. A stop
 * in a Slurm job then asks whether it is a cancellation (agree_cancelled).
 */
static int agree_cancelled(struct rank *r, int *no_room, int *cancelled);

static int agree_stop(struct rank *r, int64_t steps_done, double step_s, int *stop,
		      int *no_room, int *cancelled, int *writing)
{
	int32_t v[3] = { atomic_load(r->node->stop_requested) ? 1 : 0, 0,
			 checkpoint_async_busy(r) };
	double left, need;

	if (r->node->stop_at_step > 0 && steps_done == r->node->stop_at_step)
		v[0] = 1;
	if (!v[0] && r->cfg->train.steps > steps_done && deadline_near(r, step_s))
		v[0] = 1;
	if (r->rank == 0 && !checkpoint_fits(r, &left, &need))
		v[1] = 1;
	if (comm_allreduce(r->comm, v, 3, COMM_INT32, COMM_MAX) < 0)
		return rank_fail_collective(r);
	*writing = v[2]; /* some rank's checkpoint.async write still runs */
	*stop = v[0];
	*no_room = v[0] && v[1];
	*cancelled = 0;
	return *stop && r->node->slurm_job ? agree_cancelled(r, no_room, cancelled) : 0;
}

/* Rank 0: whether slurmctld says the job was cancelled (0 when it cannot
 * be asked: then the stop is a preemption, as the requeue will find out). */
static int job_cancelled(struct rank *r)
{
	struct slurm_job job;
	char err[512];

	if (slurm_job_query(r->node->slurm_job, &job, err, sizeof err) < 0) {
		rank_logf(&r->log, "warning: %s; the stop is taken for a preemption", err);
		return 0;
	}
	return job.cancelled;
}

/*
 * A stop agreed in a Slurm job: is it a cancellation? scancel (with or
 * without --signal=KILL) ends a job with SIGCONT and SIGTERM to every task
 * and SIGKILL KillWait seconds later; but preemption (PreemptMode=REQUEUE
 * or CANCEL) and the time limit send the same TERM, and scancel --signal
 * sends anything. The signal cannot tell them apart; slurmctld can, since
 * scancel sets the job's state to CANCELLED before any signal leaves
 * (preemption sets PENDING or PREEMPTED, the time limit TIMEOUT). Rank 0
 * asks, once, and a second MAX all-reduce gives every rank the answer and,
 * for a cancellation, whether the checkpoint fits before the KILL.
 */
static int agree_cancelled(struct rank *r, int *no_room, int *cancelled)
{
	int32_t v[2] = { 0, 0 };
	double left, need;

	if (r->rank == 0 && job_cancelled(r)) {
		v[0] = 1;
		v[1] = !checkpoint_fits_kill(r, &left, &need);
	}
	if (comm_allreduce(r->comm, v, 2, COMM_INT32, COMM_MAX) < 0)
		return rank_fail_collective(r);
	*cancelled = v[0];
	if (v[0])
		*no_room = v[1];
	return 0;
}

/* Seconds as "1h12m", "5m03s" or "42s", for the progress line. */
static void duration(double s, char *buf, size_t len)
{
	long t = s > 0 ? (long)(s + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

/*
 * Rank 0, after a few steps: what the whole run costs at this pace, in
 * GPU-hours (one GPU per rank) or core-hours (every rank's threads,
 * counted as this rank's), said once and kept in the metrics.
 */
static void project_cost(struct rank *r, int64_t step)
{
	int gpu = r->ops != &ops_cpu;
	double units = (double)r->node->world_size * (gpu ? 1 : (r->threads > 0 ? r->threads : 1));
	double hours = (double)r->cfg->train.steps * r->step_ms_avg / 3.6e6 * units;

	rank_metric(&r->log, step + 1, "projected_device_hours", hours, gpu ? "GPU-h" : "core-h");
	printf("projected: %d steps x %.1f ms x %.0f %s = %.3g %s-hours for the whole run\n",
	       r->cfg->train.steps, r->step_ms_avg, units, gpu ? "GPUs" : "cores", hours,
	       gpu ? "GPU" : "core");
	/* The budget was checked at start against the allocation; a run that
	 * needs more than it (requeues) is said, loudly, once. */
	if (r->cfg->run.max_gpu_hours > 0 && hours > r->cfg->run.max_gpu_hours)
		fprintf(stderr, "storkd: warning: the whole run's projected %.3g %s-hours exceed "
			"run.max_gpu_hours %g: it will need requeues beyond this budget\n", hours,
			gpu ? "GPU" : "core", r->cfg->run.max_gpu_hours);
}

/*
 * Rank 0's progress line ends with the time to the last step (from a
 * moving average of the step time, the first step left out: it pays for
 * warming up) and, when the job has a limit, the time to the job's end;
 * both go to the metrics as eta_s and job_left_s.
 */
static void progress_tail(struct rank *r, int64_t step, double ms, char *buf, size_t len)
{
	const struct stork_config *c = r->cfg;
	char eta[32], left[32];
	double eta_s, left_s = -1;

	r->step_ms_avg = r->step_ms_avg > 0 ? 0.9 * r->step_ms_avg + 0.1 * ms : ms;
	eta_s = (double)(c->train.steps - (step + 1)) * r->step_ms_avg / 1e3;
	duration(eta_s, eta, sizeof eta);
	rank_metric(&r->log, step + 1, "eta_s", eta_s, "s");
	if (step == r->first_step + 5) /* once the pace is known */
		project_cost(r, step);
	if (r->node->job_end_time) {
		left_s = (double)(r->node->job_end_time - time(NULL));
		duration(left_s, left, sizeof left);
		rank_metric(&r->log, step + 1, "job_left_s", left_s, "s");
	}
	if (left_s >= 0)
		snprintf(buf, len, " | eta %s, job ends in %s", eta, left);
	else
		snprintf(buf, len, " | eta %s", eta);
}

static void report_step(struct rank *r, int64_t step, float loss, float lr, float norm, double ms,
			uint64_t sent)
{
	const struct stork_config *c = r->cfg;
	double tokens = (double)c->train.batch_size * c->train.seq_len * c->train.grad_accum *
			r->lay.dp;
	double tps = tokens / (ms / 1e3);

	rank_metric(&r->log, step + 1, "train_loss", loss, "nats");
	rank_metric(&r->log, step + 1, "lr", lr, "");
	rank_metric(&r->log, step + 1, "grad_norm", norm, "");
	rank_metric(&r->log, step + 1, "step_time_ms", ms, "ms");
	/* this rank's own forward and backward, before the gradients are
	 * reduced: where a slow rank shows (everyone's step time waits for it) */
	rank_metric(&r->log, step + 1, "compute_ms", r->compute_ms, "ms");
	rank_metric(&r->log, step + 1, "tokens_per_sec", tps, "tokens/s");
	if (r->node->world_size > r->node->local_ranks) /* another node: traffic between nodes */
		rank_metric(&r->log, step + 1, "net_bytes_sent", (double)sent, "bytes");
	if (r->grp.dp) { /* the gradients' collective, and what of it the step waited for */
		rank_metric(&r->log, step + 1, "grad_sync_ms", r->sync_ms, "ms");
		rank_metric(&r->log, step + 1, "grad_sync_wait_ms", r->sync_wait_ms, "ms");
	}
	if (r->lay.pp > 1) /* the pipeline bubble: this stage waiting for its neighbours */
		rank_metric(&r->log, step + 1, "pipeline_wait_ms", 1e3 * r->pipe.wait_seconds, "ms");
	/* rank 0's eta_s and job_left_s every step (metrics are), the step
	 * lines every train.log_every steps and at the last */
	char tail[96] = "";

	if (r->rank == 0 && step > r->first_step) /* the first step of an attempt pays for warming up */
		progress_tail(r, step, ms, tail, sizeof tail);
	if ((step + 1) % c->train.log_every && step + 1 != c->train.steps)
		return;
	rank_logf(&r->log, "step %" PRId64 " loss %.6f lr %.3e norm %.4f %.1f ms", step + 1, loss, lr,
		  norm, ms);
	if (r->rank == 0) {
		printf("step %" PRId64 "/%d | loss %.4f | lr %.2e | norm %.2f | %.1f ms | %.0f tok/s%s\n",
		       step + 1, c->train.steps, loss, lr, norm, ms, tps, tail);
		fflush(stdout);
	}
}

/*
 * A cancellation (scancel): the job ends for good and nothing is requeued.
 * checkpointed: the checkpoint of steps_done was committed before Slurm's
 * KILL, for a new job to start from; else the previous one stays the
 * latest.
 */
static int stop_cancelled(struct rank *r, int64_t steps_done, int checkpointed)
{
	double left, need;

	rank_logf(&r->log, "job %s was cancelled: not requeued", r->node->job_id);
	if (checkpointed) {
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": checkpoint committed, job not requeued",
			 steps_done);
	} else if (r->rank == 0) {
		checkpoint_fits_kill(r, &left, &need);
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": %.0f s left before Slurm's KILL, too "
			 "little for a checkpoint (~%.0f s): the previous one stays the latest; job "
			 "not requeued", steps_done, left, need);
	} else {
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": no time for a checkpoint before Slurm's "
			 "KILL, the previous one stays the latest; job not requeued", steps_done);
	}
	if (r->rank == 0) {
		printf("job %s cancelled after step %" PRId64 ": not requeued\n", r->node->job_id,
		       steps_done);
		fflush(stdout);
	}
	r->res->exit_code = STORK_EXIT_CANCELLED;
	return STORK_EXIT_CANCELLED;
}

/* "SIGUSR2": the signal that asked this node to stop, for the log; "" when
 * none did here (another node's, STORK_STOP_AT_STEP). */
static const char *stop_cause(const struct rank *r, char *buf, size_t len)
{
	int sig = atomic_load(r->node->stop_requested);

	if (!sig || !sigabbrev_np(sig))
		return "";
	snprintf(buf, len, "SIG%s", sigabbrev_np(sig));
	return buf;
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
	int code = timeout ? STORK_EXIT_TIMEOUT : STORK_EXIT_PREEMPTED, rc;
	int32_t outcome;
	char err[768] = "", cause[32];

	if (*stop_cause(r, cause, sizeof cause))
		rank_logf(&r->log, "stopping after step %" PRId64 " on request (%s%s)", steps_done,
			  cause, timeout ? "; the job's time limit is near" : "");
	else
		rank_logf(&r->log, "stopping after step %" PRId64 " on request%s", steps_done,
			  timeout ? " (the job's time limit is near)" : "");
	if (r->rank == 0) {
		if (!n->slurm_job) {
			snprintf(err, sizeof err, "not a Slurm job: nothing to requeue; run the same command again to resume");
			code = STORK_EXIT_REQUEUE_FAILED;
		} else if ((rc = slurm_job_requeue(n->slurm_job, err, sizeof err)) < 0) {
			code = STORK_EXIT_REQUEUE_FAILED;
		} else if (rc == SLURM_JOB_WAS_CANCELLED) {
			code = STORK_EXIT_CANCELLED; /* scancel came after the ranks agreed on a preemption */
		} else {
			rank_logf(&r->log, "job %u requeued", n->slurm_job);
			printf("job %u requeued after step %" PRId64 "\n", n->slurm_job, steps_done);
			fflush(stdout);
		}
	}
	/* every rank ends as rank 0's requeue went (a job submitted with
	 * --no-requeue: requeue_failed on every node, not "requeued" on some) */
	outcome = code;
	if (n->world_size > 1 && comm_broadcast(r->comm, &outcome, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	code = outcome;
	if (code == STORK_EXIT_CANCELLED)
		return stop_cancelled(r, steps_done, 1);
	if (code == STORK_EXIT_REQUEUE_FAILED) {
		if (r->rank == 0) {
			rank_logf(&r->log, "requeue failed: %s", err);
			fprintf(stderr, "storkd: checkpoint committed but the requeue failed: %s\n", err);
			msg_format(r->res->message, sizeof r->res->message,
				   "stopped after step %" PRId64 ", checkpoint committed, requeue "
				   "failed: %s", steps_done, err);
		} else {
			msg_format(r->res->message, sizeof r->res->message,
				   "stopped after step %" PRId64 ", checkpoint committed, requeue "
				   "failed (rank 0's log says why)", steps_done);
		}
		r->res->exit_code = code;
		return code;
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
	zero_plan_free(&r->zero);
	adamw_free(&r->opt);
	gpt2_free(&r->model);
	if (data_set_position(r->train, &r->data_start, r->err, sizeof r->err))
		return rank_fail(r, STORK_EXIT_DATA, r->err);
	if (init_model(r, &r->shape, start) || rank_move_to_device(r) || init_pipeline(r))
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

/*
 * A stop with too little time left for its checkpoint (rank 0's verdict):
 * the previous checkpoint stays the latest, and the job is still requeued
 * so that it resumes from it.
 */
static int stop_without_checkpoint(struct rank *r, int64_t steps_done)
{
	double left, need;

	if (r->rank == 0) {
		checkpoint_fits(r, &left, &need);
		snprintf(r->err, sizeof r->err,
			 "stopped after step %" PRId64 " with %.0f s left before the job's end, too "
			 "little for a checkpoint (~%.0f s): no new checkpoint, the previous one stays "
			 "the latest", steps_done, left, need);
	} else {
		snprintf(r->err, sizeof r->err,
			 "stopped after step %" PRId64 ": rank 0 found too little time left before the "
			 "job's end for a checkpoint: no new checkpoint, the previous one stays the "
			 "latest", steps_done);
	}
	if (r->rank == 0 && r->node->slurm_job) {
		char why[512];
		size_t l = strlen(r->err);
		int rc = slurm_job_requeue(r->node->slurm_job, why, sizeof why);

		if (rc == 0)
			snprintf(r->err + l, sizeof r->err - l, "; job requeued");
		else
			snprintf(r->err + l, sizeof r->err - l, "; %s%s",
				 rc == SLURM_JOB_WAS_CANCELLED ? "" : "requeue failed: ", why);
	}
	return rank_fail_agreed(r, STORK_EXIT_CHECKPOINT_FAILED, r->err);
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
	int stop = 0, no_room = 0, cancelled = 0, writing = 0;
	char cause[32];

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
		if (r->val && step % c->train.val_every == 0 && validate(r, step))
			return r->res->exit_code;
		c0 = clock_monotonic();
		if (compute_gradients(r, step, &loss))
			return r->res->exit_code;
		slow_rank(r);
		/* this rank's own work: under a pipeline, without the time it
		 * stood waiting for its neighbours (pipeline_wait_ms says that) */
		r->compute_ms = (clock_monotonic() - c0 - (r->lay.pp > 1 ? r->pipe.wait_seconds : 0.0)) *
				1e3;
		checkpoint_async_before_update(r); /* the update changes what it copies */
		phase(r, RANK_PHASE_UPDATE);
		if (update(r, step, &loss, &norm, &lr))
			return r->res->exit_code;
		if (r->rollback_pending) { /* the same on every rank: norm and loss are global */
			int64_t from;

			if (rollback(r, step, &from))
				return r->res->exit_code;
			step = from - 1; /* the loop's step++ makes it from */
			continue;
		}
		step_ms = (clock_monotonic() * 1e3) - t0;
		report_step(r, step, loss, lr, norm, step_ms, comm_ucx_thread_bytes_sent() - sent0);
		r->res->last_step = step + 1;
		heartbeat(r, step + 1);
		phase(r, RANK_PHASE_STOP_DECISION);
		if (agree_stop(r, step + 1, step_ms / 1e3, &stop, &no_room, &cancelled, &writing) ||
		    checkpoint_async_poll(r, writing))
			return r->res->exit_code;
		if (cancelled && *stop_cause(r, cause, sizeof cause))
			rank_logf(&r->log, "stopping after step %" PRId64 " on request: the job was "
				  "cancelled (%s)", step + 1, cause);
		else if (cancelled)
			rank_logf(&r->log, "stopping after step %" PRId64 " on request: the job was "
				  "cancelled", step + 1);
		if (no_room && checkpoint_async_drain(r))
			return r->res->exit_code;
		if (no_room)
			return cancelled ? stop_cancelled(r, step + 1, 0) :
					   stop_without_checkpoint(r, step + 1);
		if (stop || step + 1 == c->train.steps ||
		    (c->checkpoint.every > 0 && (step + 1) % c->checkpoint.every == 0)) {
			phase(r, RANK_PHASE_CHECKPOINT);
			if (checkpoint_at(r, step + 1, stop || step + 1 == c->train.steps))
				return r->res->exit_code;
		}
		if (stop)
			return cancelled ? stop_cancelled(r, step + 1, 1) :
					   stop_and_requeue(r, step + 1);
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
	if (rank_bind(&r) || rank_device_comm(&r) || model_shape(&r, &mc) || make_layout(&r, &mc) ||
	    preflight_run(&r, &mc) || open_data(&r) || init_model(&r, &mc, &start) || rank_move_to_device(&r) ||
	    init_pipeline(&r) || start_grad_sync(&r))
		goto out;
	rank_logf(&r.log, "model: %zu parameters; training steps %" PRId64 "..%d", r.model.num_params,
		  start + 1, n->cfg->train.steps);
	res->last_step = start;
	r.first_step = start;
	if (checkpoint_async_prepare(&r, start))
		goto out;
	run_steps(&r, start);
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
	gpt2_free(&r.model);
	pipeline_free(&r.pipe);
	zero_plan_free(&r.zero);
	layout_groups_free(&r.grp);
	if (r.ckpt_host)
		r.ops->host_free(r.ckpt_host);
	if (r.comm != r.host_comm)
		comm_free(r.comm);
	rank_log_close(&r.log);
}
