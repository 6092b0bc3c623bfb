/*
 * daemon/engine/checkpoint/train_checkpoint_state.c - what a rank's
 * checkpoint holds and whether one fits: the layout and settings it
 * records, this rank's shard, its parameters and moments in host memory,
 * and the time a checkpoint needs against the time the job has left. Below
 * every way of committing one (train_checkpoint.c, train_checkpoint_async.c,
 * train_checkpoint_local.c).
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
double checkpoint_commit_estimate(const struct rank *r)
{
	/* parameters and two moments in fp32, at 100 MB/s */
	return r->ckpt_seconds > 0 ? r->ckpt_seconds : (double)r->model.num_params * 12.0 / 100e6;
}

double checkpoint_need(const struct rank *r)
{
	/* half as long again as the last one, and half a second for the requeue RPC */
	return checkpoint_commit_estimate(r) * 1.5 + 0.5;
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
