/*
 * daemon/engine/parallel/zero_paged.c - see zero_paged.h.
 */
#include "config.h"
#include "daemon/engine/parallel/zero_paged.h"

#include "daemon/engine/parallel/comm_queue.h"
#include "kernels/ops.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* The segment of the plan that holds parameter offset x. */
static const struct zero_segment *segment_of(const struct zero_plan *z, size_t x)
{
	for (int k = 0; k < z->nseg; k++)
		if (x >= z->seg[k].off && x < z->seg[k].off + z->seg[k].n)
			return &z->seg[k];
	return NULL;
}

static size_t clamp(size_t x, size_t lo, size_t hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/*
 * Give back the whole pages of floats [a, b) of base (they read as zeros
 * from now on). Pages shared with what stays are kept.
 */
static void give_back(float *base, size_t a, size_t b)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)(base + a) + page - 1) / page * page;
	uintptr_t hi = (uintptr_t)(base + b) / page * page;

	if (b > a && hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/*
 * No transparent huge pages under floats [0, n) of base: a 2 MiB page
 * that lost only part of itself stays charged until the kernel splits
 * it, and khugepaged would build one again around the pages kept.
 */
static void no_huge_pages(float *base, size_t n)
{
#ifdef MADV_NOHUGEPAGE
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)base + page - 1) / page * page;
	uintptr_t hi = (uintptr_t)(base + n) / page * page;

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE);
#else
	(void)base;
	(void)n;
#endif
}

/* Give back what of [off, off + n) of base is not this rank's. */
static void give_back_others(const struct zero_plan *z, float *base, size_t off, size_t n)
{
	const struct zero_segment *s = segment_of(z, off);

	if (!s)
		return;
	give_back(base, off, clamp(s->lo, off, off + n));
	give_back(base, clamp(s->hi, off, off + n), off + n);
}

/*
 * Parameters [off, off + n) from their owners, one broadcast per owner,
 * into dst: in place (dst is m->params + off) or into a one-layer buffer
 * (this rank's part copied there first).
 */
static int gather_into(struct zero_paged *zp, struct gpt2 *m, size_t off, size_t n, float *dst)
{
	const struct zero_segment *s = segment_of(zp->z, off);

	for (int r = 0; s && r < zp->z->D; r++) {
		size_t a, b;
		int rc;

		zero_part(s, r, &a, &b);
		a = clamp(a, off, off + n);
		b = clamp(b, off, off + n);
		if (b <= a)
			continue;
		if (r == zp->z->d && dst != m->params + off)
			m->ops->copy(dst + (a - off), m->params + a, (b - a) * sizeof(float));
		if ((rc = comm_broadcast(zp->dp, dst + (a - off), b - a, COMM_FLOAT32, r)))
			return rc;
	}
	return 0;
}

/* Layer l's pieces (parameter offsets and lengths); their places in a one-layer buffer follow in the same order. */
static int layer_pieces(const struct gpt2 *m, int l, size_t *off, size_t *n)
{
	float *p[GPT2_NUM_TENSORS];
	int k = gpt2_layer_params(m, l, p, n);

	for (int i = 0; i < k; i++)
		off[i] = (size_t)(p[i] - m->params);
	return k;
}

/* Layer l's parameters into a one-layer buffer. */
static int gather_layer(struct zero_paged *zp, struct gpt2 *m, int l, float *buf)
{
	size_t off[GPT2_NUM_TENSORS], n[GPT2_NUM_TENSORS], at = 0;
	int k = layer_pieces(m, l, off, n), rc;

	for (int i = 0; i < k; at += n[i], i++)
		if ((rc = gather_into(zp, m, off[i], n[i], buf + at)))
			return rc;
	return 0;
}

/* A collective failed: the other replicas must not wait for this one (any thread). */
static int job_end(struct zero_paged *zp, int rc)
{
	if (rc && rc != COMM_EABORTED)
		comm_abort(zp->dp, "parallel.zero: a replica could not gather or sum a layer");
	return rc;
}

/* A collective of a hook failed: noted for the step (the rank's thread). */
static int hook_failed(struct zero_paged *zp, int rc)
{
	if (!zp->failed)
		zp->failed = job_end(zp, rc);
	return zp->failed;
}

/* The job of gathering layer `layer` into parameter buffer b. */
static int job_gather(void *arg, int layer, int b)
{
	struct zero_paged *zp = arg;

	return job_end(zp, gather_layer(zp, zp->m, layer, zp->pbuf[b]));
}

/* The job of summing gradient buffer g (layer `layer`) over the replicas; this rank's parts of it into the gradients. */
static int job_reduce_buffer(void *arg, int layer, int g)
{
	struct zero_paged *zp = arg;
	struct gpt2 *m = zp->m;
	size_t off[GPT2_NUM_TENSORS], n[GPT2_NUM_TENSORS], at = 0;
	int k = layer_pieces(m, layer, off, n), rc;

	if ((rc = comm_allreduce(zp->dp, zp->gbuf[g], zp->layer_n, COMM_FLOAT32, COMM_SUM)))
		return job_end(zp, rc);
	for (int i = 0; i < k; at += n[i], i++) {
		const struct zero_segment *s = segment_of(zp->z, off[i]);
		size_t a, b;

		if (!s)
			continue;
		a = clamp(s->lo, off[i], off[i] + n[i]);
		b = clamp(s->hi, off[i], off[i] + n[i]);
		if (b > a)
			m->ops->copy(m->grads + a, zp->gbuf[g] + at + (a - off[i]), (b - a) * sizeof(float));
	}
	return 0;
}

/* The job of summing layer `layer`'s gradients in place over the replicas, and giving back all but this rank's part. */
static int job_reduce_in_place(void *arg, int layer, int unused)
{
	struct zero_paged *zp = arg;
	struct gpt2 *m = zp->m;
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];
	int k = gpt2_layer_grads(m, layer, p, n), rc;

	(void)unused;
	for (int i = 0; i < k; i++) {
		if ((rc = comm_allreduce(zp->dp, p[i], n[i], COMM_FLOAT32, COMM_SUM)))
			return job_end(zp, rc);
		give_back_others(zp->z, m->grads, (size_t)(p[i] - m->grads), n[i]);
	}
	return 0;
}

/* The rank ran collectives itself since t0: that time counts as run and as waited for. */
static void ran_here(struct zero_paged *zp, double t0)
{
	double dt = clock_monotonic() - t0;

	zp->busy_s += dt;
	zp->wait_s += dt;
}

/* A job handed to the thread (its ticket), or run now without one (0; a failure noted). */
static long issue(struct zero_paged *zp, comm_job_fn fn, int a, int b)
{
	double t0;
	int rc;

	if (zp->q)
		return comm_queue_push(zp->q, fn, zp, a, b);
	t0 = clock_monotonic();
	rc = fn(zp, a, b);
	ran_here(zp, t0);
	if (rc)
		hook_failed(zp, rc);
	return 0;
}

/* Wait for a job (ticket 0: one run already): 0, or the step's failure. */
static int await(struct zero_paged *zp, long ticket)
{
	int rc = 0;

	if (zp->q && ticket) {
		double t0 = clock_monotonic();

		rc = comm_queue_wait(zp->q, ticket);
		zp->wait_s += clock_monotonic() - t0;
	}
	return rc ? hook_failed(zp, rc) : zp->failed;
}

/* Every job handed has run: the rank may use the communicator again. */
static int settle(struct zero_paged *zp)
{
	int rc = 0;

	if (zp->q) {
		double t0 = clock_monotonic();

		rc = comm_queue_drain(zp->q);
		zp->wait_s += clock_monotonic() - t0;
	}
	return rc ? hook_failed(zp, rc) : zp->failed;
}

void zero_paged_times(struct zero_paged *zp, double *busy_s, double *wait_s)
{
	*busy_s = zp->busy_s + (zp->q ? comm_queue_busy(zp->q) : 0.0);
	*wait_s = zp->wait_s;
	zp->busy_s = zp->wait_s = 0.0;
}

/* Nothing gathered is current any more (the parameters changed, or were given back). */
static void forget_layers(struct zero_paged *zp)
{
	zp->held[0] = zp->held[1] = -1;
}

static int holding(const struct zero_paged *zp, int layer)
{
	for (int b = 0; b < zp->nbuf; b++)
		if (zp->held[b] == layer)
			return b;
	return -1;
}

static void start_gather(struct zero_paged *zp, int layer, int b)
{
	zp->held[b] = layer;
	zp->pticket[b] = issue(zp, job_gather, layer, b);
}

/* The layer a pass fetches after this one for certain (a pass goes through its stage's layers), or -1. */
static int next_layer(const struct gpt2 *m, int layer, int backward)
{
	int next = backward ? layer - 1 : layer + 1;

	return next >= m->shard.first_layer && next < m->shard.last_layer ? next : -1;
}

/*
 * zero 3: layer `layer`'s parameters for its pass: from the buffer that
 * holds them (the forward pass's last layer is the backward pass's first;
 * a prefetch), or gathered now; with the thread, the pass's next layer
 * gathered into the other buffer while this one computes.
 */
static int fetch_params(struct zero_paged *zp, struct gpt2 *m, int layer, int backward)
{
	int b = holding(zp, layer), next;

	if (b < 0) {
		b = zp->nbuf > 1 && zp->held[0] >= 0 ? 1 - zp->cur : 0;
		start_gather(zp, layer, b);
	}
	if (await(zp, zp->pticket[b]))
		return zp->failed;
	zp->cur = b;
	m->param_view = zp->pview[b];
	next = next_layer(m, layer, backward);
	if (zp->q && next >= 0 && holding(zp, next) < 0)
		start_gather(zp, next, 1 - b);
	return 0;
}

static int fetch(void *arg, struct gpt2 *m, int layer, int backward)
{
	struct zero_paged *zp = arg;

	if (zp->level >= 3 && fetch_params(zp, m, layer, backward))
		return zp->failed;
	/* the step's only micro-batch: its gradients go to a one-layer buffer (zero_paged_layer_done),
	 * once the thread has done with what it read of that buffer's last layer */
	if (backward && zp->grad_buffer && m->layer_done == zero_paged_layer_done) {
		int g = zp->nbuf > 1 ? 1 - zp->gcur : 0;

		if (await(zp, zp->gticket[g]))
			return zp->failed;
		zp->gcur = g;
		m->ops->zero(zp->gbuf[g], zp->layer_n);
		m->grad_view = zp->gview[g];
	}
	return 0;
}

static void release(void *arg, struct gpt2 *m, int layer)
{
	(void)arg;
	(void)layer;
	m->param_view = NULL;
}

void zero_paged_layer_done(void *arg, struct gpt2 *m, int layer)
{
	struct zero_paged *zp = arg;

	if (!zp->dp || zp->failed)
		return;
	if (m->grad_view) {
		m->grad_view = NULL;
		zp->gticket[zp->gcur] = issue(zp, job_reduce_buffer, layer, zp->gcur);
		return;
	}
	/* gradients summed over micro-batches in place: summed over the replicas there */
	issue(zp, job_reduce_in_place, layer, 0);
}

/* A one-layer buffer and its tensors (block_weights' layer 0 is its start). */
static float *layer_buffer(const struct gpt2 *m, float *view[GPT2_NUM_TENSORS], size_t layer_n)
{
	size_t L = (size_t)(m->shard.last_layer - m->shard.first_layer), at = 0;
	float *buf = m->ops->alloc((layer_n ? layer_n : 1) * sizeof(float));

	for (int t = 0; buf && t < GPT2_NUM_TENSORS; t++) {
		size_t per = gpt2_tensor_per_layer(t) && L ? m->sizes[t] / L : 0;

		view[t] = per ? buf + at : NULL;
		at += per;
	}
	return buf;
}

int zero_paged_attach(struct zero_paged *zp, const struct zero_plan *z, struct comm *dp,
		      int level, int grad_accum, int overlap, struct comm_trace *trace,
		      struct gpt2 *m)
{
	size_t off[GPT2_NUM_TENSORS], n[GPT2_NUM_TENSORS];
	int k = layer_pieces(m, m->shard.first_layer, off, n);

	zero_paged_free(zp, m);
	*zp = (struct zero_paged){ .z = z, .dp = dp, .m = m, .level = level, .gathered = 1,
				   .grad_buffer = grad_accum == 1, .nbuf = 1, .held = { -1, -1 } };
	if (!dp)
		return 0;
	for (int i = 0; i < k; i++)
		zp->layer_n += n[i];
	if (overlap) {
		if (comm_queue_start(&zp->q, trace) < 0)
			return -1;
		zp->nbuf = 2;
	}
	for (int b = 0; b < zp->nbuf; b++)
		if ((level >= 3 && !(zp->pbuf[b] = layer_buffer(m, zp->pview[b], zp->layer_n))) ||
		    (zp->grad_buffer && !(zp->gbuf[b] = layer_buffer(m, zp->gview[b], zp->layer_n))))
			return -1;
	gpt2_set_layer_params(m, fetch, release, zp);
	if (level >= 3)
		no_huge_pages(m->params, m->num_params);
	zero_paged_release_all(zp, m);
	return 0;
}

void zero_paged_free(struct zero_paged *zp, struct gpt2 *m)
{
	comm_queue_stop(zp->q); /* what it was handed runs first (or fails at once, aborted) */
	zp->q = NULL;
	for (int b = 0; b < 2; b++) {
		if (zp->pbuf[b])
			m->ops->free(zp->pbuf[b]);
		if (zp->gbuf[b])
			m->ops->free(zp->gbuf[b]);
		zp->pbuf[b] = zp->gbuf[b] = NULL;
	}
	m->param_view = m->grad_view = NULL;
	gpt2_set_layer_params(m, NULL, NULL, NULL);
}

/*
 * Zero floats [a, b) of base that are not this rank's part: whole pages
 * given back, the ends written (the backward pass adds into them).
 */
static void wipe_others(const struct zero_plan *z, const struct ops *o, float *base, size_t off,
			size_t n)
{
	const struct zero_segment *s = segment_of(z, off);
	size_t ends[2][2];
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE) / sizeof(float);

	if (!s)
		return;
	/* before this rank's part, and after it */
	ends[0][0] = off;
	ends[0][1] = clamp(s->lo, off, off + n);
	ends[1][0] = clamp(s->hi, off, off + n);
	ends[1][1] = off + n;
	for (int e = 0; e < 2; e++) {
		size_t a = ends[e][0], b = ends[e][1];
		/* the first and last whole pages of [a, b), in floats from base */
		size_t lo = ((uintptr_t)(base + a) / sizeof(float) + page - 1) / page * page -
			    (uintptr_t)base / sizeof(float);
		size_t hi = (uintptr_t)(base + b) / sizeof(float) / page * page -
			    (uintptr_t)base / sizeof(float);

		if (b <= a)
			continue;
		if (hi <= lo || lo > b || hi < a) {
			o->zero(base + a, b - a);
			continue;
		}
		o->zero(base + a, lo - a);
		give_back(base, lo, hi);
		o->zero(base + hi, b - hi);
	}
}

int zero_paged_zero_grad(struct zero_paged *zp, struct gpt2 *m)
{
	const struct ops *o = m->ops;
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];
	int rc, first = !m->grads;

	(void)settle(zp); /* nothing of the last step is still in flight */
	zp->failed = 0;
	zero_paged_times(zp, &(double){ 0 }, &(double){ 0 }); /* the step's figures start here */
	/* the first time: made and zeroed whole */
	if (first || !zp->dp) {
		if ((rc = gpt2_zero_grad(m)) || !zp->dp)
			return rc;
		no_huge_pages(m->grads, m->num_params);
	} else {
		for (int i = 0, k = gpt2_global_grads(m, p, n); i < k; i++)
			o->zero(p[i], n[i]);
		for (int seg = 0; seg < zp->z->nseg; seg++)
			o->zero(m->grads + zp->z->seg[seg].lo, zp->z->seg[seg].hi - zp->z->seg[seg].lo);
	}
	/* every layer's parts but this rank's: zero, and given back (touching none of it);
	 * through the one-layer buffer they stay untouched, once given back */
	for (int l = m->shard.first_layer; (first || !zp->grad_buffer) && l < m->shard.last_layer; l++)
		for (int i = 0, k = gpt2_layer_grads(m, l, p, n); i < k; i++)
			wipe_others(zp->z, o, m->grads, (size_t)(p[i] - m->grads), n[i]);
	return 0;
}

int zero_paged_reduce_rest(struct zero_paged *zp, struct gpt2 *m)
{
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];
	int k, rc;
	double t0;

	if (settle(zp)) /* the layers' sums are done, and the thread lets go of the communicator */
		return zp->failed;
	k = gpt2_global_grads(m, p, n);
	t0 = clock_monotonic();
	for (int i = 0; zp->dp && i < k; i++)
		if ((rc = comm_allreduce(zp->dp, p[i], n[i], COMM_FLOAT32, COMM_SUM)))
			return rc;
	ran_here(zp, t0);
	zero_scale(zp->z, m, 1.0f / (float)zp->z->D); /* the mean over the replicas */
	return 0;
}

int zero_paged_after_update(struct zero_paged *zp, struct gpt2 *m)
{
	int rc;

	if ((rc = settle(zp)))
		return rc;
	forget_layers(zp); /* the update changed the parameters */
	if (zp->level < 3)
		return zero_allgather(zp->z, m, zp->dp);
	for (int t = 0; zp->dp && t < GPT2_NUM_TENSORS; t++)
		if (!gpt2_tensor_per_layer(t) && m->sizes[t] &&
		    (rc = gather_into(zp, m, (size_t)(m->tensors[t] - m->params), m->sizes[t],
				      m->tensors[t])))
			return rc;
	return 0;
}

int zero_paged_gather_all(struct zero_paged *zp, struct gpt2 *m)
{
	int rc;

	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];

	if ((rc = settle(zp)))
		return rc;
	for (int l = m->shard.first_layer; zp->level >= 3 && zp->dp && l < m->shard.last_layer; l++)
		for (int i = 0, k = gpt2_layer_params(m, l, p, n); i < k; i++)
			if ((rc = gather_into(zp, m, (size_t)(p[i] - m->params), n[i], p[i])))
				return rc;
	zp->gathered = 1;
	return 0;
}

void zero_paged_release_all(struct zero_paged *zp, struct gpt2 *m)
{
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];

	(void)settle(zp);
	forget_layers(zp);
	for (int l = m->shard.first_layer; zp->level >= 3 && zp->dp && l < m->shard.last_layer; l++)
		for (int i = 0, k = gpt2_layer_params(m, l, p, n); i < k; i++)
			give_back_others(zp->z, m->params, (size_t)(p[i] - m->params), n[i]);
	zp->gathered = 0;
}

void zero_paged_floats(const struct zero_plan *z, const size_t sizes[GPT2_NUM_TENSORS],
		       int layers, int level, int micro, int overlap, size_t *params, size_t *grads)
{
	size_t total = 0, layer_all = 0, off = 0, mine_global = 0, global;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		if (gpt2_tensor_per_layer(t)) {
			layer_all += sizes[t];
		} else {
			/* this rank's part of a tensor of no layer */
			for (int k = 0; k < z->nseg; k++) {
				size_t a = clamp(z->seg[k].lo, off, off + sizes[t]);
				size_t b = clamp(z->seg[k].hi, off, off + sizes[t]);

				mine_global += b - a;
			}
		}
		total += sizes[t];
		off += sizes[t];
	}
	global = total - layer_all;
	/* the tensors of no layer whole, this rank's parts of the layers, one layer's buffer
	 * (two with overlap: one in use, the next filling) */
	*params = *grads = global + (z->state_n - mine_global) +
			   (layers ? layer_all / (size_t)layers * (overlap ? 2 : 1) : 0);
	if (level < 3)
		*params = total;
	if (level < 2 || micro > 1) /* summed in place over the micro-batches */
		*grads = total;
}
