/*
 * daemon/engine/train/train_recover_zero.c - ZeRO-1 under restart.in_place:
 * the mirror of the next replica's part of the optimizer state
 * (zero_mirror.h), and after a regroup the old replicas' parts cut again
 * for the new ones, without a checkpoint.
 *
 * After a loss every old part is still on a survivor, its owner or the
 * replica that keeps its copy, unless both were lost (two nodes at once). A step's end cut short
 * may have left some ranks' parts one update ahead of the rest (ZeRO-1
 * updates each part where it lives, then gathers the parameters; a
 * failure in the gathering leaves applied_steps ahead of updated_steps):
 * each part is taken at the newest step any rank applied, from a holder
 * that has applied it. When some part has no such holder the regroup
 * cannot go on exactly, and the run ends as it would without
 * restart.in_place.
 *
 * The parts go through a whole-model copy of both moments on every rank
 * of the group for the moment of the regroup (2 x 4 bytes per
 * parameter): simple, and brief.
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"

#include "lib/exit_codes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rank_init_mirror(struct rank *r)
{
	if (!r->lay.zero || !r->cfg->restart.in_place)
		return 0;
	if (zero_mirror_make(&r->mirror, &r->zero, &r->model, r->ops) < 0) {
		gpt2_oom_message(r->ops, "restart.in_place's copy of the next replica's optimizer state",
				 2 * r->mirror.plan.state_n * sizeof(float), r->err, sizeof r->err);
		return rank_fail(r, STORK_EXIT_INTERNAL, r->err);
	}
	if (zero_mirror_fill(&r->mirror, &r->zero, &r->opt, r->grp.dp))
		return rank_fail_collective(r);
	if (r->mirror.on)
		rank_logf(&r->log, "restart.in_place: this rank keeps a copy of data-parallel rank "
			  "%d's part of the ZeRO-1 optimizer state (%.1f MiB)", r->mirror.plan.d,
			  2.0 * (double)r->mirror.plan.state_n * sizeof(float) / (1 << 20));
	return 0;
}

/* What a rank of the new group holds of the old parts (int64 each, for one all-gather). */
struct holding {
	int64_t part;     /* its own old part, or -1 (a spare or rejoiner holds nothing) */
	int64_t parts;    /* the old group's size (its D), 0 for nothing */
	int64_t applied;  /* the updates applied to its parts, -1 for nothing */
	int64_t opt_step; /* its moments' update count */
	int64_t kept;     /* 1: its copy of another part (zero_mirror.h) is whole */
};

#define HOLDING_N (sizeof(struct holding) / sizeof(int64_t))

static int gather_holdings(struct rank *r, struct holding *all)
{
	struct holding mine = { -1, 0, -1, 0, 0 };

	if (r->updated_steps >= 0)
		mine = (struct holding){ r->zero.d, r->zero.D, r->applied_steps, r->opt.step,
					 r->mirror.on && r->mirror.filled };
	if (!r->grp.dp) {
		all[0] = mine;
		return 0;
	}
	return comm_allgather(r->grp.dp, &mine, all, HOLDING_N, COMM_INT64);
}

/* Old part s's holder at step newest: its owner, else the keeper of its copy; -1 none. */
static int holder_of(const struct holding *all, int n, int64_t parts, int64_t s, int64_t newest)
{
	int64_t keeper = parts > 1 ? zero_mirror_keeper((int)parts, (int)s) : -1;

	for (int j = 0; j < n; j++)
		if (all[j].part == s && all[j].applied == newest)
			return j;
	for (int j = 0; j < n; j++)
		if (keeper >= 0 && all[j].part == keeper && all[j].kept && all[j].applied == newest)
			return j;
	return -1;
}

/* This rank's copy of old part s, piece k (at state offset off, n long), into M and V. */
static void take_piece(struct rank *r, int64_t s, size_t off, size_t lo, size_t n, float *M,
		       float *V)
{
	const struct adamw_state *o = r->zero.d == s ? &r->opt : &r->mirror.opt;

	r->ops->copy(M + lo, o->m + off, n * sizeof(float));
	r->ops->copy(V + lo, o->v + off, n * sizeof(float));
}

/*
 * Every old part's moments into M and V and its parameters into the
 * model, each broadcast from its holder over the new group.
 */
static int gather_parts(struct rank *r, const int *holder, int64_t parts, float *M, float *V)
{
	struct gpt2 *m = &r->model;

	for (int64_t s = 0; s < parts; s++) {
		struct zero_plan p;
		size_t off = 0;

		zero_plan_layout(&p, m->sizes, (int)parts, (int)s);
		for (int k = 0; k < p.nseg; k++) {
			size_t lo = p.seg[k].lo, n = p.seg[k].hi - lo;

			if (!n)
				continue;
			if (holder[s] == r->lay.dp_rank)
				take_piece(r, s, off, lo, n, M, V);
			off += n;
			if (r->grp.dp &&
			    (comm_broadcast(r->grp.dp, M + lo, n, COMM_FLOAT32, holder[s]) < 0 ||
			     comm_broadcast(r->grp.dp, V + lo, n, COMM_FLOAT32, holder[s]) < 0 ||
			     comm_broadcast(r->grp.dp, m->params + lo, n, COMM_FLOAT32, holder[s]) < 0))
				return -1;
		}
	}
	return 0;
}

/* The new plan of this rank, its own parts of M and V as its moments, and its mirror. */
static int cut_again(struct rank *r, const float *M, const float *V, int64_t opt_step,
		     int64_t newest)
{
	struct gpt2 *m = &r->model;
	const struct ops *o = r->ops;
	size_t off = 0;

	adamw_free(&r->opt);
	zero_mirror_free(&r->mirror);
	zero_plan_free(&r->zero);
	if (m->grads && (size_t)r->lay.dp > m->grad_pad) { /* the reduce-scatter reads further */
		o->free(m->grads);
		m->grads = NULL;
	}
	if (zero_plan_make(&r->zero, m, r->lay.dp, r->lay.dp_rank) < 0 ||
	    adamw_init_on(&r->opt, r->zero.state_n, o) < 0 || gpt2_zero_grad(m) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "restart.in_place: out of memory for the "
				 "new ZeRO-1 parts");
	for (int k = 0; k < r->zero.nseg; k++) {
		size_t lo = r->zero.seg[k].lo, n = r->zero.seg[k].hi - lo;

		o->copy(r->opt.m + off, M + lo, n * sizeof(float));
		o->copy(r->opt.v + off, V + lo, n * sizeof(float));
		off += n;
	}
	r->opt.step = opt_step;
	/* this rank's part is whole from here: a regroup that cuts the rest
	 * short finds it at newest (the copy counts once it is filled) */
	r->updated_steps = r->applied_steps = newest;
	if (r->ckpt_host) { /* sized for the old part */
		o->host_free(r->ckpt_host);
		r->ckpt_host = NULL;
	}
	return rank_init_mirror(r);
}

/* Holders for every old part at step newest, agreed by the whole world; 0 or -1 (failed). */
static int find_holders(struct rank *r, const struct holding *all, int64_t parts, int64_t newest,
			int src, int *holder)
{
	int64_t ok = src >= 0 && parts > 0, lost = -1;

	for (int64_t s = 0; s < parts && ok; s++)
		if ((holder[s] = holder_of(all, r->lay.dp, parts, s, newest)) < 0)
			ok = 0, lost = s;
	if (comm_allreduce(r->comm, &ok, 1, COMM_INT64, COMM_MIN) < 0)
		return rank_fail_collective(r), -1;
	if (ok)
		return 0;
	if (lost >= 0)
		snprintf(r->err, sizeof r->err, "restart.in_place: part %" PRId64 " of %" PRId64 " of "
			 "the ZeRO-1 optimizer state was held only by lost replicas (its owner and the "
			 "replica that keeps its copy were both lost) or not at step %" PRId64
			 ": the run cannot go on exactly without them", lost, parts, newest);
	else if (ok == 0 && (src < 0 || parts == 0))
		snprintf(r->err, sizeof r->err, "restart.in_place: no rank of this replica group holds "
			 "the ZeRO-1 optimizer state at step %" PRId64 ": the run cannot go on exactly",
			 newest);
	else
		snprintf(r->err, sizeof r->err, "restart.in_place: another replica group lost a part "
			 "of its ZeRO-1 optimizer state: the run cannot go on exactly without it");
	rank_fail_agreed(r, STORK_EXIT_RANK_FAILED, r->err);
	return -1;
}

int rank_regather_zero(struct rank *r, int64_t *start)
{
	int D = r->lay.dp, src = -1, rc = -1;
	struct holding *all = calloc((size_t)D, sizeof *all);
	int64_t newest = r->updated_steps >= 0 ? r->applied_steps : -1, parts = 0;
	int *holder = NULL;
	float *M = NULL, *V = NULL;
	size_t n = r->model.num_params;

	if (!all)
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory"), -1;
	if (comm_allreduce(r->comm, &newest, 1, COMM_INT64, COMM_MAX) < 0 ||
	    gather_holdings(r, all) < 0) {
		rank_fail_collective(r);
		goto out;
	}
	for (int j = 0; j < D; j++) {
		parts = all[j].parts > parts ? all[j].parts : parts;
		if (src < 0 && all[j].applied == newest)
			src = j; /* its spike window and data position are the newest */
	}
	if (!(holder = calloc((size_t)(parts ? parts : 1), sizeof *holder)) ||
	    find_holders(r, all, parts, newest, src, holder) < 0)
		goto out;
	if (!(M = r->ops->alloc(n * sizeof(float))) || !(V = r->ops->alloc(n * sizeof(float)))) {
		rank_fail(r, STORK_EXIT_INTERNAL, "restart.in_place: out of memory for the ZeRO-1 "
			  "parts' regather");
		goto out;
	}
	if (gather_parts(r, holder, parts, M, V) < 0 ||
	    (r->grp.dp && (comm_broadcast(r->grp.dp, &r->applied_pos, sizeof r->applied_pos,
					  COMM_UINT8, src) < 0 ||
			   comm_broadcast(r->grp.dp, &r->spike, sizeof r->spike, COMM_UINT8, src) < 0))) {
		rank_fail_collective(r);
		goto out;
	}
	if (r->updated_steps != newest)
		rank_logf(&r->log, "restart.in_place: the ZeRO-1 parts taken at step %" PRId64
			  " (this rank had completed %" PRId64 ")", newest, r->updated_steps);
	r->updated_pos = r->applied_pos;
	if (cut_again(r, M, V, all[src].opt_step, newest))
		goto out;
	rc = rank_sync_replicated(r, 1);
	*start = newest;
out:
	if (M)
		r->ops->free(M);
	if (V)
		r->ops->free(V);
	free(holder);
	free(all);
	return rc;
}
