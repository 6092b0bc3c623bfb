/*
 * daemon/engine/train/train_start.c - a training rank's start: the model's
 * shape and the rank's place in the layout, its data, its model and
 * optimizer (new, from the run's own checkpoint or run.resume_from, from
 * the node-local tier), the pipeline and the overlapped gradient sync.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void notice_to_log(void *arg, const char *msg)
{
	struct rank *r = arg;

	rank_logf(&r->log, "%s", msg);
	if (r->rank == 0)
		fprintf(stderr, "storkd: %s\n", msg);
}

/* The model's shape: the configuration's, or model.init_from's. */
int rank_model_shape(struct rank *r, struct gpt2_config *mc)
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
int rank_make_layout(struct rank *r, const struct gpt2_config *mc)
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
int rank_init_pipeline(struct rank *r)
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

int rank_open_data(struct rank *r)
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
		return rank_fail(r, STORK_EXIT_OUT_OF_MEMORY, r->err);
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
 * The configuration checkpoint dir (RUN/checkpoints/step_N) was written
 * under: of the config/stork.N.yaml the launcher keeps of each launch of
 * RUN, the newest whose hash is the checkpoint's. 0 with it in then, or -1.
 */
static int checkpoint_config(const char *dir, uint64_t hash, struct stork_config *then)
{
	char run[4096], path[4200], err[512], *slash;
	struct stat st;
	int last = 0;

	snprintf(run, sizeof run, "%s", dir);
	for (int up = 0; up < 2; up++) {
		if (!(slash = strrchr(run, '/')))
			return -1;
		*slash = '\0';
	}
	do
		snprintf(path, sizeof path, "%s/config/stork.%d.yaml", run, ++last);
	while (last < 100000 && stat(path, &st) == 0);
	for (int k = last - 1; k >= 1; k--) {
		snprintf(path, sizeof path, "%s/config/stork.%d.yaml", run, k);
		if (config_load(then, path, err, sizeof err) < 0)
			continue;
		if (config_hash(then) == hash)
			return 0;
		config_free(then);
	}
	return -1;
}

/*
 * The other keys that changed since the checkpoint, named with both values
 * when its launch's configuration is at hand, else said in general. Returns
 * what it wrote into buf.
 */
static size_t other_changes(const struct rank *r, const struct ckpt_state *st, const char *dir,
			    char *buf, size_t len)
{
	static const char *const listed[] = { "train.batch_size", "train.grad_accum",
					      "train.seq_len", "train.steps", "train.lr",
					      "parallel.tensor", "parallel.pipeline",
					      "parallel.zero", NULL };
	struct stork_config then;
	int w;

	if (checkpoint_config(dir, st->config_hash, &then) == 0) {
		config_differences(&then, r->cfg, listed, buf, len);
		config_free(&then);
		if (buf[0])
			return strlen(buf);
	}
	w = snprintf(buf, len, "\n  other settings (the configuration's hash differs; "
		     "config/stork.N.yaml keeps each launch's)");
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
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
		n += other_changes(r, st, dir, block + n, sizeof block - n);
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
int rank_init_model(struct rank *r, const struct gpt2_config *mc, int64_t *start_step)
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
			return rank_fail(r, rc == -2 ? STORK_EXIT_OUT_OF_MEMORY : STORK_EXIT_DATA, r->err);
		rank_logf(&r->log, "weights from %s", c->model.init_from);
	} else {
		int rc = gpt2_build_shard(&r->model, mc, &shard, c->model.seed);

		if (rc < 0)
			return rank_fail(r, rc == -2 ? STORK_EXIT_OUT_OF_MEMORY : STORK_EXIT_CONFIG, r->model.err);
	}
	return init_optimizer(r, r->ops);
}

int rank_init_model_blank(struct rank *r, const struct gpt2_config *mc)
{
	struct gpt2_shard shard;
	int rc;

	layout_shard(&r->lay, &shard);
	shard.tp = r->grp.tp;
	r->shape = *mc;
	spike_init(&r->spike);
	if ((rc = gpt2_build_shard(&r->model, mc, &shard, r->cfg->model.seed)) < 0)
		return rank_fail(r, rc == -2 ? STORK_EXIT_OUT_OF_MEMORY : STORK_EXIT_CONFIG, r->model.err);
	return init_optimizer(r, r->ops);
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

int rank_start_zero_paged(struct rank *r)
{
	if (r->ops != &ops_cpu)
		return rank_fail(r, STORK_EXIT_CONFIG, "parallel.zero 2 and 3 give memory back page by "
				 "page, which only CPU ranks do so far; use parallel.zero: 1 on GPUs");
	if (zero_paged_attach(&r->paged, &r->zero, r->grp.dp, r->lay.zero, r->cfg->train.grad_accum,
			      r->cfg->parallel.overlap, &r->node->progress[r->local].comm_thread,
			      &r->model) < 0)
		return rank_fail(r, STORK_EXIT_OUT_OF_MEMORY, "out of memory for a layer's parameters "
				 "and gradients, or no thread for their collectives (parallel.zero)");
	if (r->lay.pp > 1 && r->grp.dp) /* the stage's last micro-batch makes its layers' gradients final */
		pipeline_set_layer_hook(&r->pipe, zero_paged_layer_done, &r->paged);
	if (r->paged.q)
		rank_logf(&r->log, "parallel.overlap: a thread %ssums each layer's gradients while "
			  "the layer below computes", r->lay.zero >= 3 ? "gathers the next layer's "
			  "parameters while this one computes, and " : "");
	return 0;
}

/* parallel.overlap: a communication thread for the data-parallel group (nothing to do without
 * replicas); parallel.zero 2 and 3 have their own (zero_paged.h). */
int rank_start_grad_sync(struct rank *r)
{
	int gpu = r->ops != &ops_cpu;

	if (r->lay.zero >= 2)
		return rank_start_zero_paged(r);
	if (!r->cfg->parallel.overlap || !r->grp.dp)
		return 0;
	if (grad_sync_start(&r->sync, r->grp.dp, r->ops, gpt2_grad_pieces(&r->model),
			    gpu ? sync_thread_on_gpu : NULL, r) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "cannot start the gradient all-reduce thread");
	grad_sync_trace(r->sync, &r->node->progress[r->local].comm_thread);
	if (r->lay.pp > 1) /* the stage's last micro-batch makes its layers' gradients final */
		pipeline_set_layer_hook(&r->pipe, grad_sync_layer_done, r->sync);
	rank_logf(&r->log, "parallel.overlap: each layer's gradients are all-reduced during the "
		  "backward pass");
	return 0;
}
