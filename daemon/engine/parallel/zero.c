/*
 * daemon/engine/parallel/zero.c - see zero.h.
 */
#include "config.h"
#include "daemon/engine/parallel/zero.h"

#include "lib/comm/comm.h"

#include <stdlib.h>
#include <string.h>

void zero_plan_layout(struct zero_plan *z, const size_t sizes[GPT2_NUM_TENSORS], int D, int d)
{
	size_t total = 0;

	memset(z, 0, sizeof *z);
	z->D = D;
	z->d = d;
	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		total += sizes[t];
	if (sizes[GPT2_WTE])
		z->seg[z->nseg++] = (struct zero_segment){ .off = 0, .n = sizes[GPT2_WTE] };
	z->seg[z->nseg++] = (struct zero_segment){ .off = sizes[GPT2_WTE],
						   .n = total - sizes[GPT2_WTE] };
	for (int k = 0; k < z->nseg; k++) {
		struct zero_segment *s = &z->seg[k];
		size_t a, b;

		s->per = (s->n + (size_t)D - 1) / (size_t)D;
		a = s->per * (size_t)d;
		b = a + s->per;
		s->lo = s->off + (a < s->n ? a : s->n);
		s->hi = s->off + (b < s->n ? b : s->n);
		z->state_n += s->hi - s->lo;
		z->recv_n = s->per > z->recv_n ? s->per : z->recv_n;
	}
	if (!z->recv_n)
		z->recv_n = 1;
}

int zero_plan_make(struct zero_plan *z, struct gpt2 *m, int D, int d)
{
	zero_plan_layout(z, m->sizes, D, d);
	/* the last segment's reduce-scatter reads up to D - 1 floats past the
	 * end; kept when a regroup shrinks D, so it may grow back */
	if (m->grad_pad < (size_t)D)
		m->grad_pad = (size_t)D;
	z->recv = NULL; /* in the gradients' memory, made at the first reduce-scatter */
	return 0;
}

void zero_part(const struct zero_segment *s, int r, size_t *a, size_t *b)
{
	size_t lo = s->per * (size_t)r, hi = lo + s->per;

	*a = s->off + (lo < s->n ? lo : s->n);
	*b = s->off + (hi < s->n ? hi : s->n);
}

void zero_plan_free(struct zero_plan *z)
{
	if (z->recv)
		z->recv_mem->free(z->recv);
	z->recv = NULL;
}

int zero_reduce_scatter(struct zero_plan *z, struct gpt2 *m, struct comm *dp)
{
	const struct ops *o = m->ops;

	if (dp && z->recv_mem != o) {
		zero_plan_free(z);
		if (!(z->recv = o->alloc(z->recv_n * sizeof(float))))
			return COMM_ENOMEM;
		z->recv_mem = o;
	}
	for (int k = 0; k < z->nseg; k++) {
		struct zero_segment *s = &z->seg[k];
		int rc;

		if (dp && (rc = comm_reduce_scatter(dp, m->grads + s->off, z->recv, s->per,
						    COMM_FLOAT32, COMM_SUM)))
			return rc;
		if (dp)
			o->copy(m->grads + s->lo, z->recv, (s->hi - s->lo) * sizeof(float));
	}
	zero_scale(z, m, 1.0f / (float)z->D); /* the mean over the replicas */
	return 0;
}

/*
 * Call fn on every piece of this rank's parts that falls in one tensor:
 * (tensor, offset in the parameters, length, offset in the optimizer state).
 */
static void for_each_piece(const struct zero_plan *z, const struct gpt2 *m,
			   void (*fn)(void *arg, int t, size_t off, size_t n, size_t state_off),
			   void *arg)
{
	size_t toff = 0, state_off = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t tend = toff + m->sizes[t];

		for (int k = 0; k < z->nseg; k++) {
			const struct zero_segment *s = &z->seg[k];
			size_t a = s->lo > toff ? s->lo : toff, b = s->hi < tend ? s->hi : tend;
			size_t before = 0;

			if (a >= b)
				continue;
			for (int j = 0; j < k; j++)
				before += z->seg[j].hi - z->seg[j].lo;
			state_off = before + (a - s->lo);
			fn(arg, t, a, b - a, state_off);
		}
		toff = tend;
	}
}

struct sumsq_args {
	const struct gpt2 *m;
	double sum;
};

static void sumsq_piece(void *arg, int t, size_t off, size_t n, size_t state_off)
{
	struct sumsq_args *a = arg;

	(void)state_off;
	if (!gpt2_shard_is_replica(&a->m->config, &a->m->shard, t))
		a->sum += grad_sumsq(a->m->ops, a->m->grads + off, n);
}

double zero_sumsq(const struct zero_plan *z, const struct gpt2 *m)
{
	struct sumsq_args a = { m, 0.0 };

	for_each_piece(z, m, sumsq_piece, &a);
	return a.sum;
}

void zero_scale(const struct zero_plan *z, struct gpt2 *m, float s)
{
	for (int k = 0; k < z->nseg; k++)
		grad_scale(m->ops, m->grads + z->seg[k].lo, z->seg[k].hi - z->seg[k].lo, s);
}

struct adamw_args {
	struct adamw_state *opt;
	const struct adamw_params *h;
	float lr;
	struct gpt2 *m;
};

static void adamw_piece(void *arg, int t, size_t off, size_t n, size_t state_off)
{
	struct adamw_args *a = arg;

	adamw_update(a->m->ops, a->opt, a->h, a->lr, gpt2_tensor_decays(t), a->m->params + off,
		     a->m->grads + off, state_off, n);
}

void zero_adamw(const struct zero_plan *z, struct adamw_state *opt, const struct adamw_params *h,
		float lr, struct gpt2 *m)
{
	struct adamw_args a = { opt, h, lr, m };

	for_each_piece(z, m, adamw_piece, &a);
	adamw_step_done(opt);
}

int zero_allgather(const struct zero_plan *z, struct gpt2 *m, struct comm *dp)
{
	if (!dp)
		return 0;
	for (int k = 0; k < z->nseg; k++) {
		const struct zero_segment *s = &z->seg[k];

		for (int r = 0; r < z->D; r++) {
			size_t a, b;
			int rc;

			zero_part(s, r, &a, &b);
			if (b > a && (rc = comm_broadcast(dp, m->params + a, b - a, COMM_FLOAT32, r)))
				return rc;
		}
	}
	return 0;
}
