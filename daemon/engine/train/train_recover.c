/*
 * daemon/engine/train/train_recover.c - restart.in_place on a rank's side:
 * after a node was lost, the rank lets go of the world, waits for its
 * node's regroup (daemon/node/regroup.h), and goes on in the new world
 * from the last step every replica completed, without reading a
 * checkpoint.
 *
 * What carries over: the rank's parameters and optimizer moments (every
 * replica holds the same at a step boundary; under ZeRO-1 the parts of
 * the moments are gathered and cut again, train_recover_zero.c), its tensor and pipeline
 * place (a regroup drops whole replicas only), and the data stream's
 * position. What is made again: the layout's groups, the pipeline's
 * buffers, the overlap thread, the data loaders over the new number of
 * replicas. The global batch stays: node 0's verdict raised
 * train.grad_accum so that the replicas that remain read, in each step,
 * exactly the samples the full layout would (data.h: the sample stream
 * does not depend on the replica count), only grouped into other
 * micro-batches, so the gradients are added in another order: the losses
 * follow an uninterrupted run's to within float rounding, not bit for bit.
 */
#include "config.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"

#include "daemon/node/regroup.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Let go of everything made over the old world: its groups and threads. */
static void let_go(struct rank *r)
{
	grad_sync_stop(r->sync);
	r->sync = NULL;
	checkpoint_async_free(r); /* a write in flight was never committed: it stays so */
	pipeline_free(&r->pipe);
	layout_groups_free(&r->grp);
	if (r->comm != r->host_comm)
		comm_free(r->comm);
	r->comm = r->host_comm = NULL;
}

/*
 * The replicas agree on the steps done: when a failure cut a step's end
 * short on some of them (applied here, not there), the replica of the
 * lowest rank among those that applied it sends its parameters, moments
 * and data position to the others of its data-parallel group.
 */
static int agree_state(struct rank *r, int64_t *start)
{
	int64_t hi = r->updated_steps, lo = r->updated_steps, src;
	struct gpt2 *m = &r->model;

	if (comm_allreduce(r->comm, &hi, 1, COMM_INT64, COMM_MAX) < 0 ||
	    comm_allreduce(r->comm, &lo, 1, COMM_INT64, COMM_MIN) < 0)
		return -1;
	if (lo != hi) {
		if (!r->grp.dp) {
			rank_fail(r, STORK_EXIT_RANK_FAILED, "restart.in_place: the ranks of the one "
				  "replica left stopped at different steps");
			return -1;
		}
		src = r->updated_steps == hi ? r->lay.dp_rank : INT64_MAX;
		if (comm_allreduce(r->grp.dp, &src, 1, COMM_INT64, COMM_MIN) < 0 ||
		    comm_broadcast(r->grp.dp, m->params, m->num_params, COMM_FLOAT32, (int)src) < 0 ||
		    comm_broadcast(r->grp.dp, r->opt.m, r->opt.n, COMM_FLOAT32, (int)src) < 0 ||
		    comm_broadcast(r->grp.dp, r->opt.v, r->opt.n, COMM_FLOAT32, (int)src) < 0 ||
		    comm_broadcast(r->grp.dp, &r->opt.step, 1, COMM_INT64, (int)src) < 0 ||
		    comm_broadcast(r->grp.dp, &r->updated_pos, sizeof r->updated_pos, COMM_UINT8,
				   (int)src) < 0 ||
		    comm_broadcast(r->grp.dp, &r->spike, sizeof r->spike, COMM_UINT8, (int)src) < 0)
			return -1;
		r->updated_steps = hi;
		rank_logf(&r->log, "restart.in_place: step %" PRId64 " was applied on some replicas "
			  "only; replica %" PRId64 "'s state taken", hi, src);
	}
	if (rank_sync_replicated(r, 1) < 0)
		return -1;
	*start = r->updated_steps;
	return 0;
}

/* The loaders again, over the new replicas, at the position of step *start. */
static int reopen_data(struct rank *r)
{
	struct data_position pos = r->updated_pos;

	data_close(r->train); /* none yet on a spare */
	data_close(r->val);
	r->train = r->val = NULL;
	free(r->inputs);
	free(r->targets);
	r->inputs = r->targets = NULL;
	if (rank_open_data(r))
		return r->res->exit_code;
	if (data_set_position(r->train, &pos, r->err, sizeof r->err))
		return rank_fail(r, STORK_EXIT_DATA, r->err);
	r->updated_pos = pos;
	return 0;
}

/* One loss of the last regroup, in the rank's metrics and log, and (rank 0) on stdout. */
static void record_loss(struct rank *r, const struct regroup *g, const struct regroup_loss *x,
			int64_t start, double seconds)
{
	rank_metric_with(&r->log, start, "membership", seconds, "s",
			 json_pack("{s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:i, s:i}", "event", "left",
				   "lost", x->host, "launcher", x->node, "why", x->why, "by", x->by,
				   "ranks", r->node->world_size, "dp", r->lay.dp,
				   "grad_accum", r->cfg->train.grad_accum, "dp_before", g->dp_before));
	rank_logf(&r->log, "restart.in_place: %s lost after step %" PRId64 " (%s)%s%s; now rank %d "
		  "of %d, dp %d, train.grad_accum %d -> %d; going on from step %" PRId64
		  " (%.2f s)", x->host, x->step, x->why, x->by[0] ? "; in its place: " : "", x->by,
		  r->rank, r->node->world_size, r->lay.dp, g->accum_before,
		  r->cfg->train.grad_accum, start + 1, seconds);
	if (r->rank != 0)
		return;
	if (x->by[0])
		printf("restart.in_place: %s lost after step %" PRId64 "; %s takes its place; %d "
		       "ranks go on from step %" PRId64 "\n", x->host, x->step, x->by,
		       r->node->world_size, start + 1);
	else
		printf("restart.in_place: %s lost after step %" PRId64 "; %d ranks go on from step %"
		       PRId64 " with the global batch kept\n", x->host, x->step,
		       r->node->world_size, start + 1);
	fflush(stdout);
}

/* One node the last regroup let back in (restart.rejoin), as record_loss. */
static void record_join(struct rank *r, const struct regroup_join *j, int64_t start,
			double seconds)
{
	rank_metric_with(&r->log, start, "membership", seconds, "s",
			 json_pack("{s:s, s:s, s:i, s:i, s:i, s:i}", "event", "joined", "came",
				   j->host, "launcher", j->node, "ranks", r->node->world_size,
				   "dp", r->lay.dp, "grad_accum", r->cfg->train.grad_accum));
	rank_logf(&r->log, "restart.rejoin: %s is back in the run; now rank %d of %d, dp %d, "
		  "train.grad_accum %d; going on from step %" PRId64 " (%.2f s)", j->host, r->rank,
		  r->node->world_size, r->lay.dp, r->cfg->train.grad_accum, start + 1, seconds);
	if (r->rank != 0)
		return;
	printf("restart.rejoin: %s is back; %d ranks go on from step %" PRId64 " with the global "
	       "batch kept\n", j->host, r->node->world_size, start + 1);
	fflush(stdout);
}

/* Each loss and each rejoin of the last regroup. */
static void record(struct rank *r, const struct regroup *g, int64_t start, double seconds)
{
	for (int i = g->last_first; i < g->nlosses; i++)
		record_loss(r, g, &g->losses[i], start, seconds);
	for (int i = g->last_join_first; i < g->njoins; i++)
		record_join(r, &g->joins[i], start, seconds);
}

/* The new world's communicator and this rank's place in it. */
static void take_place(struct rank *r)
{
	const struct train_node *n = r->node;

	r->comm = r->host_comm = n->rank_comm(n->rank_comm_arg, r->local);
	r->rank = n->rank_base + r->local;
	comm_describe(r->comm, "world", 0, n->world_size, 0);
}

/*
 * In the new world, with the layout's groups made: the state of the last
 * step every replica completed, the data from there, the rank's own parts
 * again, and the regroup in its log and metrics. 0, or -1 (failed).
 */
static int go_on(struct rank *r, int64_t *start)
{
	const struct regroup *g = r->node->regroup;

	if (r->lay.zero ? rank_regather_zero(r, start) : agree_state(r, start)) {
		if (!r->res->exit_code)
			rank_fail_collective(r);
		return -1;
	}
	if (reopen_data(r) || rank_init_pipeline(r) || rank_start_grad_sync(r))
		return -1;
	r->res->last_step = *start;
	r->first_step = *start;
	r->recover_since = g->last_since;
	record(r, g, *start, clock_monotonic() - g->last_since);
	return 0;
}

/*
 * Whether a regroup mends how this rank stopped: a collective that failed
 * because another node was lost or called a regroup, not the rank's own
 * error.
 */
static int mendable(const struct rank *r)
{
	return r->node->regroup && r->res->secondary &&
	       r->res->exit_code == STORK_EXIT_RANK_FAILED;
}

/*
 * Park until the node's regroup decides, then take the new world's place.
 * 0; -1 when taking it failed; REGROUP_END when the verdict ends the node.
 */
static int regroup_once(struct rank *r, const struct par_layout *before)
{
	const struct train_node *n = r->node;

	rank_logf(&r->log, "restart.in_place: %s; waiting for the node's regroup",
		  r->res->message);
	let_go(r);
	if (regroup_park(n->regroup, &n->progress[r->local], r->updated_steps) != REGROUP_GO)
		return REGROUP_END;
	/* the failure is mended: the rank's result starts again (its checkpoint stays) */
	r->res->exit_code = 0;
	r->res->secondary = 0;
	r->res->fail_time = 0;
	r->res->message[0] = '\0';
	take_place(r);
	if (rank_device_comm(r) || rank_make_layout(r, &r->shape))
		return -1;
	if (r->lay.tp_rank != before->tp_rank || r->lay.stage != before->stage) {
		rank_fail(r, STORK_EXIT_RANK_FAILED, "restart.in_place: the new layout moves this "
			  "rank to another tensor or pipeline place");
		return -1;
	}
	r->model.shard.tp = r->grp.tp; /* the model's passes talk in the new group */
	return 0;
}

/*
 * Another regroup may cut this one short: a node that comes back (or is
 * lost) while the ranks still exchange their state aborts the exchange.
 * The state is taken again in the next one: nothing it changed counts
 * until it ends (train_recover_zero.c keeps the same rule).
 */
int rank_recover(struct rank *r, int64_t *start)
{
	struct par_layout before = r->lay;
	int rc;

	while (mendable(r)) {
		if ((rc = regroup_once(r, &before)) == REGROUP_END)
			return -1;
		if (rc == 0 && go_on(r, start) == 0)
			return 0;
	}
	return -1;
}

/* A spare's rank log, once it has a rank: that rank's file, where its predecessor's ends. */
static int log_as_rank(struct rank *r)
{
	const struct train_node *n = r->node;
	char err[512];

	rank_logf(&r->log, "restart.spares: this spare is rank %d now; its log goes on in "
		  "rank-%03d's", n->rank_base + r->local, n->rank_base + r->local);
	rank_log_close(&r->log);
	if (rank_log_open(&r->log, n->run_dir, n->rank_base + r->local, r->local, n->host,
			  n->job_id, err, sizeof err) < 0) {
		fprintf(stderr, "storkd: %s\n", err);
		return -1;
	}
	r->log.requeue = n->restart_count;
	r->log.attempt = n->attempt;
	return 0;
}

int rank_join_as_spare(struct rank *r, const struct gpt2_config *mc, int64_t *start)
{
	const struct train_node *n = r->node;
	int verdict;

	rank_logf(&r->log, "a spare (restart.spares): waiting to take a lost node's place");
	while ((verdict = regroup_park(n->regroup, &n->progress[r->local], -1)) == REGROUP_WAIT)
		;
	if (verdict != REGROUP_GO) {
		snprintf(r->res->message, sizeof r->res->message, "a spare, not needed: %.400s",
			 n->regroup->message);
		rank_logf(&r->log, "%s", r->res->message);
		return -1;
	}
	if (log_as_rank(r) < 0)
		return rank_fail(r, STORK_EXIT_INTERNAL, "cannot open the rank's log"), -1;
	take_place(r);
	r->updated_steps = -1; /* nothing: a live replica sends it all */
	if (rank_device_comm(r) || rank_make_layout(r, mc) || rank_init_model_blank(r, mc) ||
	    rank_move_to_device(r))
		return -1;
	if (go_on(r, start) == 0)
		return 0;
	return rank_recover(r, start); /* another regroup cut this one short */
}

void rank_recovered_step(struct rank *r, int64_t steps)
{
	if (r->recover_since == 0)
		return;
	rank_metric(&r->log, steps, "recovery", clock_monotonic() - r->recover_since, "s");
	r->recover_since = 0;
}
