/*
 * daemon/engine/parallel/layout_cost.c - see layout_cost.h.
 */
#include "config.h"
#include "daemon/engine/parallel/layout_cost.h"

#include "daemon/engine/parallel/zero.h"
#include "daemon/engine/parallel/zero_paged.h"

#include <stdio.h>
#include <string.h>

void layout_rank_memory(const struct gpt2_config *g, const struct par_layout *l, int B, int T,
			int micro, int overlap, enum gpt2_recompute r, struct rank_memory *m)
{
	struct gpt2_shard s;
	size_t sizes[GPT2_NUM_TENSORS], n;
	int slots = l->pp > 1 ? (l->pp - l->stage < micro ? l->pp - l->stage : micro) : 1;

	layout_shard(l, &s);
	n = gpt2_shard_sizes(g, &s, sizes);
	m->params = n;
	m->grads = n + (l->zero ? (size_t)l->dp : 0);
	m->optimizer = 2 * n;
	if (l->zero) {
		struct zero_plan z;

		zero_plan_layout(&z, sizes, l->dp, l->dp_rank);
		m->optimizer = 2 * z.state_n;
		/* ZeRO-1's reduce-scatter receives a part at a time */
		m->grads += l->zero == 1 && l->dp > 1 ? z.recv_n : 0;
		if (l->zero >= 2 && l->dp > 1)
			zero_paged_floats(&z, sizes, s.last_layer - s.first_layer, l->zero, micro, overlap,
					  &m->params, &m->grads);
	}
	m->activations = gpt2_activation_floats(g, &s, B, T, r) * (size_t)slots;
}

size_t layout_memory_floats(const struct rank_memory *m)
{
	return m->params + m->grads + m->optimizer + m->activations;
}

double layout_shard_flops(const struct gpt2_config *g, const struct gpt2_shard *s, int T,
			  enum gpt2_recompute r)
{
	size_t sizes[GPT2_NUM_TENSORS];
	double products = 0.0, blocks = 0.0, attention;
	int layers = s->last_layer - s->first_layer, last = s->last_layer == g->num_layers;

	gpt2_shard_sizes(g, s, sizes);
	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		/* the position embedding is a lookup; so is the token embedding but
		 * where it is also the head (tied, on the last stage) */
		if (t == GPT2_WPE || (t == GPT2_WTE && !(model_tied(g) && last)))
			continue;
		products += (double)sizes[t];
		if (gpt2_tensor_per_layer(t))
			blocks += (double)sizes[t];
	}
	attention = 12.0 * layers * (double)g->channels * T / s->tp_size;
	if (r == GPT2_RECOMPUTE_BLOCK) /* the blocks' forward pass again: a third of 6 and of 12 */
		return 6.0 * products + attention + 2.0 * blocks + attention / 3.0;
	return 6.0 * products + attention;
}

/* Time and bytes of some collectives. */
struct traffic {
	double s, intra, inter;
};

/*
 * The nodes (*k) a group of count ranks first + i * stride spans, and its
 * most members on one node (*j).
 */
static void group_spread(const struct cost_machine *x, int first, int stride, int count, int *k,
			 int *j)
{
	int node = -1, run = 0;

	*k = *j = 0;
	for (int i = 0; i < count; i++) {
		int n = (first + i * stride) / x->ranks_per_node;

		run = n == node ? run + 1 : 1;
		*k += n != node;
		node = n;
		*j = run > *j ? run : *j;
	}
}

/*
 * The ranks of a node that move bytes between nodes at the same moment
 * and so share its link: the node's ranks of one pipeline stage (they run
 * in step), one per group (the group's leader on the node, lib/comm/hier.c)
 * when groups have j members there.
 */
static double link_sharers(const struct cost_machine *x, const struct cost_layout *l, int j)
{
	int stage = x->ranks_per_node < l->dp * l->tp ? x->ranks_per_node : l->dp * l->tp;

	return (double)((stage + j - 1) / (j > 1 ? j : 1));
}

/*
 * `calls` all-reduces of `bytes` over a group spanning k nodes with at
 * most j members on one (lib/comm/hier.c: in node, then between nodes),
 * each taking `latencies` latencies (2 for a reduce-scatter and an
 * all-gather, which move the bytes of one all-reduce); the bytes between
 * nodes share the link with the node's other groups (link_sharers).
 */
static void allreduce_cost(const struct cost_machine *x, const struct cost_layout *l, int k, int j,
			   double bytes, double calls, int latencies, struct traffic *t)
{
	if (j > 1) {
		double b = 2.0 * (j - 1) / j * bytes;

		t->s += calls * (latencies * x->intra.latency_s + b / x->intra.bytes_per_s);
		t->intra += calls * b;
	}
	if (k > 1) {
		double b = 2.0 * (k - 1) / k * bytes;

		t->s += calls * (latencies * x->inter.latency_s +
				 b * link_sharers(x, l, j) / x->inter.bytes_per_s);
		t->inter += calls * b;
	}
}

/*
 * `calls` sends of `bytes` from rank a to rank b; between nodes, every
 * rank of the stage sends at once.
 */
static void send_cost(const struct cost_machine *x, const struct cost_layout *l, int a, int b,
		      double bytes, double calls, struct traffic *t)
{
	int inter = a / x->ranks_per_node != b / x->ranks_per_node;
	const struct link_figure *f = inter ? &x->inter : &x->intra;
	double share = inter ? link_sharers(x, l, 1) : 1.0;

	t->s += calls * (f->latency_s + bytes * share / f->bytes_per_s);
	*(inter ? &t->inter : &t->intra) += calls * bytes;
}

/* What one pipeline stage costs (its first rank's: dp 0, tp 0, the largest ZeRO part). */
struct stage_cost {
	double micro_s;             /* t(s): one micro-batch's compute and traffic */
	struct traffic micro;       /* one micro-batch's tensor and pipeline traffic */
	struct traffic step;        /* per step: gradients and tied embedding */
	double flops;               /* per step */
	double work_s;              /* per step, thread-seconds of compute and update */
	double update_s;
	struct rank_memory mem;
};

/* Tensor-parallel and pipeline traffic of one micro-batch of stage s (rank r0). */
static void stage_micro_traffic(const struct gpt2_config *g, const struct cost_layout *l,
				const struct cost_machine *x, const struct par_layout *pl,
				struct traffic *t)
{
	double btc = 4.0 * l->B * l->T * g->channels, bt = 4.0 * l->B * l->T;
	int layers = pl->last_layer - pl->first_layer, s = pl->stage, k, j;
	int stride = l->dp * l->tp;

	group_spread(x, pl->rank, 1, l->tp, &k, &j);
	allreduce_cost(x, l, k, j, btc,
		       layers * (l->recompute == GPT2_RECOMPUTE_BLOCK ? 6 : 4) + (s == 0) +
			       (s == l->pp - 1),
		       1, t);
	if (s == l->pp - 1)
		allreduce_cost(x, l, k, j, bt, 3, 1, t);
	if (s < l->pp - 1) /* activations forward */
		send_cost(x, l, pl->rank, pl->rank + stride, btc, 1, t);
	if (s > 0) /* their gradient back */
		send_cost(x, l, pl->rank, pl->rank - stride, btc, 1, t);
}

/* Per-step traffic of stage s: the replicas' gradients, the tied embedding's. */
static void stage_step_traffic(const struct gpt2_config *g, const struct cost_layout *l,
			       const struct cost_machine *x, const struct par_layout *pl,
			       const size_t sizes[GPT2_NUM_TENSORS], size_t n, struct traffic *t)
{
	int stride = l->dp * l->tp, k, j;

	group_spread(x, pl->rank, l->tp, l->dp, &k, &j);
	allreduce_cost(x, l, k, j, 4.0 * (double)n, 1, l->zero ? 2 : 1, t);
	/* ZeRO-2 sums each layer's gradients whole, an all-reduce where ZeRO-1
	 * reduce-scatters (half an all-reduce's bytes more, two latencies a
	 * layer); ZeRO-3 gathers each layer's parameters for both passes instead
	 * of once after the update (another all-gather's bytes, one broadcast
	 * latency per piece of a layer and pass) */
	if (l->zero >= 2)
		allreduce_cost(x, l, k, j, 2.0 * (double)n, 1, 2 * (pl->last_layer - pl->first_layer), t);
	if (l->zero >= 3)
		allreduce_cost(x, l, k, j, 2.0 * (double)n, 1,
			       2 * GPT2_NUM_TENSORS * (pl->last_layer - pl->first_layer), t);
	if (l->pp > 1 && model_tied(g) && (pl->stage == 0 || pl->stage == l->pp - 1)) {
		group_spread(x, pl->rank % stride, (l->pp - 1) * stride, 2, &k, &j);
		allreduce_cost(x, l, k, j, 4.0 * (double)sizes[GPT2_WTE], 1, 1, t);
	}
}

static void stage_cost(const struct gpt2_config *g, const struct cost_layout *l,
		       const struct cost_machine *x, const struct par_layout *pl,
		       struct stage_cost *c)
{
	struct gpt2_shard sh;
	size_t sizes[GPT2_NUM_TENSORS], n;
	int threads = x->gpu || x->threads_per_rank < 1 ? 1 : x->threads_per_rank;
	double micro_flops;

	memset(c, 0, sizeof *c);
	layout_shard(pl, &sh);
	n = gpt2_shard_sizes(g, &sh, sizes);
	layout_rank_memory(g, pl, l->B, l->T, l->micro, l->overlap, l->recompute, &c->mem);
	micro_flops = layout_shard_flops(g, &sh, l->T, l->recompute) * l->B * l->T;
	c->flops = micro_flops * l->micro;
	stage_micro_traffic(g, l, x, pl, &c->micro);
	stage_step_traffic(g, l, x, pl, sizes, n, &c->step);
	c->micro_s = micro_flops / (x->flops_per_s * threads) + c->micro.s;
	c->update_s = x->update_s_per_param * (double)c->mem.optimizer / 2 / threads;
	c->work_s = c->flops / x->flops_per_s + x->update_s_per_param * (double)c->mem.optimizer / 2;
}

static double mem_bytes(const struct rank_memory *m)
{
	return 4.0 * (double)layout_memory_floats(m);
}

/*
 * The lower bound of a machine whose ranks share its cores: every rank of
 * machine 0 (the first nodes_per_machine nodes) does its stage's work,
 * the cores do all of it.
 */
static double shared_floor(const struct cost_layout *l, const struct cost_machine *x,
			   const struct stage_cost *c)
{
	int ranks = x->ranks_per_node * (x->nodes_per_machine > 1 ? x->nodes_per_machine : 1);
	double work = 0.0;

	if (x->gpu || x->cores < 1 || ranks <= x->cores)
		return 0.0;
	if (ranks > x->nodes * x->ranks_per_node)
		ranks = x->nodes * x->ranks_per_node;
	for (int r = 0; r < ranks; r++)
		work += c[r / (l->dp * l->tp)].work_s;
	return work / x->cores;
}

/* The step of e from its stages' costs c. */
static void combine(const struct cost_layout *l, const struct cost_machine *x,
		    const struct stage_cost *c, struct cost_estimate *e)
{
	double tmax = 0.0, tsum = 0.0, after = 0.0, comm = 0.0;
	int world = x->nodes * x->ranks_per_node;

	for (int s = 0; s < l->pp; s++) {
		const struct stage_cost *sc = &c[s];
		double intra = l->micro * sc->micro.intra + sc->step.intra;
		double inter = l->micro * sc->micro.inter + sc->step.inter;

		tmax = sc->micro_s > tmax ? sc->micro_s : tmax;
		tsum += sc->micro_s;
		if (sc->step.s + sc->update_s > after) {
			after = sc->step.s + sc->update_s;
			e->dp_s = sc->step.s;
			e->update_s = sc->update_s;
		}
		if (l->micro * sc->micro.s > comm)
			comm = l->micro * sc->micro.s;
		e->intra_bytes = intra > e->intra_bytes ? intra : e->intra_bytes;
		e->inter_bytes = inter > e->inter_bytes ? inter : e->inter_bytes;
		e->flops = sc->flops > e->flops ? sc->flops : e->flops;
		if (mem_bytes(&sc->mem) > e->mem_bytes) {
			e->mem_bytes = mem_bytes(&sc->mem);
			e->mem = sc->mem;
		}
	}
	e->pipe_comm_s = comm;
	e->compute_s = (l->micro - 1) * tmax + tsum;
	/* the stages' mean idle share: (P-1)/(m+P-1) when they are equal */
	e->bubble = l->pp > 1 ? 1.0 - l->micro * tsum / l->pp / e->compute_s : 0.0;
	e->small_s = 4.0 * ((x->ranks_per_node > 1 && world > 1 ? x->intra.latency_s : 0) +
			    (x->nodes > 1 ? x->inter.latency_s : 0));
	e->step_s = e->compute_s + after + e->small_s;
	e->floor_s = shared_floor(l, x, c);
	/* the cores also idle through the pipeline's fill and drain: what the
	 * stages do at once is the floor's share of the step */
	if (e->floor_s > 0)
		e->floor_s = e->floor_s / (1.0 - e->bubble) + comm + e->dp_s + e->small_s;
	if (e->floor_s > e->step_s)
		e->step_s = e->floor_s;
	e->tokens_per_s = (double)l->dp * l->micro * l->B * l->T / e->step_s;
}

int layout_estimate(const struct gpt2_config *g, const struct cost_layout *l,
		    const struct cost_machine *x, struct cost_estimate *e, char *err,
		    size_t errlen)
{
	struct stage_cost c[256];
	int world = x->nodes * x->ranks_per_node;

	memset(e, 0, sizeof *e);
	if (l->tp < 1 || l->pp < 1 || l->micro < 1 || l->B < 1 || l->T < 1 ||
	    l->dp * l->tp * l->pp != world) {
		snprintf(err, errlen, "dp %d x tp %d x pp %d is not the %d ranks of %d node(s) x %d",
			 l->dp, l->tp, l->pp, world, x->nodes, x->ranks_per_node);
		return -1;
	}
	if (l->pp > (int)(sizeof c / sizeof c[0])) {
		snprintf(err, errlen, "parallel.pipeline (%d): at most %zu stages are estimated",
			 l->pp, sizeof c / sizeof c[0]);
		return -1;
	}
	for (int s = 0; s < l->pp; s++) {
		struct par_layout pl;

		if (layout_make(&pl, g, world, l->tp, l->pp, l->zero, l->split, l->T,
				s * l->dp * l->tp, err, errlen) < 0)
			return -1;
		stage_cost(g, l, x, &pl, &c[s]);
	}
	combine(l, x, c, e);
	return 0;
}
