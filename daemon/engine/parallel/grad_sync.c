/*
 * daemon/engine/parallel/grad_sync.c - see grad_sync.h.
 *
 * A queue of groups of pieces (pointer, length) under one mutex: the rank
 * appends a group at a time, the thread takes whole groups in order and
 * reduces them outside the lock. The queue is reset at each
 * grad_sync_wait, once everything is done.
 *
 * Buckets: one collective per small piece would cost a round of latency
 * each (a layer has a dozen tensors, half of them LayerNorm weights and
 * biases of C floats), so the small pieces of a group are packed into one
 * buffer, reduced in one call and unpacked. Which pieces share a bucket
 * depends only on their sizes and on the groups the rank pushed, never on
 * timing, so every rank makes the same calls in the same order.
 */
#include "config.h"
#include "daemon/engine/parallel/grad_sync.h"

#include "daemon/engine/model/model.h"
#include "kernels/ops.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* Floats per bucket: pieces above it are reduced in place, on their own. */
#define BUCKET_FLOATS ((size_t)1 << 20)

struct piece {
	float *p;
	size_t n;
	int last;                    /* the last piece of its group */
};

struct grad_sync {
	struct comm *dp;
	const struct ops *o;         /* the gradients' memory: bucket, copies, sync */
	float *bucket;               /* BUCKET_FLOATS in o's memory */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t more, done;   /* pieces queued; a group reduced */
	struct piece *q;
	size_t cap, queued, reduced; /* pieces [reduced, queued) are waiting or in flight */
	int err;                     /* the first failed reduction's code */
	int (*thread_init)(void *arg);
	void *init_arg;
	int stop;
	double busy_s;               /* reducing, since the last wait */
	struct comm_trace *trace;    /* where the thread's collectives are recorded; NULL */
};

/* Reduce pieces [a, b) of q: in place when one, else packed into the bucket. */
static int reduce_pack(struct grad_sync *g, const struct piece *q, size_t a, size_t b)
{
	size_t off = 0;
	int rc;

	if (b - a == 1)
		return comm_allreduce(g->dp, q[a].p, q[a].n, COMM_FLOAT32, COMM_SUM);
	for (size_t i = a; i < b; off += q[i].n, i++)
		g->o->copy(g->bucket + off, q[i].p, q[i].n * sizeof(float));
	rc = comm_allreduce(g->dp, g->bucket, off, COMM_FLOAT32, COMM_SUM);
	off = 0;
	for (size_t i = a; i < b; off += q[i].n, i++)
		g->o->copy(q[i].p, g->bucket + off, q[i].n * sizeof(float));
	g->o->sync(); /* the unpacked gradients are final before the rank hears of it */
	return rc;
}

/* Reduce pieces [a, b) (one group): consecutive small ones share buckets, large ones go alone. */
static int reduce_group(struct grad_sync *g, const struct piece *q, size_t a, size_t b)
{
	size_t start = a, fill = 0;
	int rc = 0;

	for (size_t i = a; i < b && !rc; i++) {
		if (fill && fill + q[i].n > BUCKET_FLOATS) {
			rc = reduce_pack(g, q, start, i);
			start = i;
			fill = 0;
		}
		if (!rc && q[i].n > BUCKET_FLOATS) {
			rc = reduce_pack(g, q, i, i + 1);
			start = i + 1;
		} else {
			fill += q[i].n;
		}
	}
	if (!rc && start < b)
		rc = reduce_pack(g, q, start, b);
	return rc;
}

static void *sync_main(void *arg)
{
	struct grad_sync *g = arg;
	int init_failed = g->thread_init && g->thread_init(g->init_arg);

	pthread_mutex_lock(&g->mu);
	for (;;) {
		size_t a, b;
		double t0;
		int rc = 0, failed;

		while (g->reduced == g->queued && !g->stop)
			pthread_cond_wait(&g->more, &g->mu);
		if (g->reduced == g->queued)
			break; /* stop, and nothing left */
		a = b = g->reduced;
		while (!g->q[b++].last) /* a group is queued whole, under one lock */
			;
		failed = g->err; /* read under the lock: grad_sync_push may set it */
		comm_trace_attach(g->trace);
		pthread_mutex_unlock(&g->mu);
		t0 = clock_monotonic();
		if (init_failed)
			rc = COMM_ESYS;
		else if (!failed) /* after a failure the pieces are only counted */
			rc = reduce_group(g, g->q, a, b);
		pthread_mutex_lock(&g->mu);
		g->busy_s += clock_monotonic() - t0;
		if (rc < 0 && !g->err)
			g->err = rc;
		g->reduced = b;
		pthread_cond_signal(&g->done);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void free_sync(struct grad_sync *g)
{
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->more);
	pthread_cond_destroy(&g->done);
	if (g->bucket)
		g->o->free(g->bucket);
	free(g->q);
	free(g);
}

int grad_sync_start(struct grad_sync **out, struct comm *dp, const struct ops *o,
		    size_t max_pieces, int (*thread_init)(void *arg), void *arg)
{
	struct grad_sync *g = calloc(1, sizeof *g);
	int rc;

	*out = NULL;
	if (!g)
		goto nomem;
	g->dp = dp;
	g->o = o;
	g->cap = max_pieces;
	g->thread_init = thread_init;
	g->init_arg = arg;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->more, NULL);
	pthread_cond_init(&g->done, NULL);
	if (!(g->q = calloc(max_pieces ? max_pieces : 1, sizeof *g->q)) ||
	    !(g->bucket = o->alloc(BUCKET_FLOATS * sizeof(float)))) {
		free_sync(g);
		goto nomem;
	}
	if ((rc = pthread_create(&g->thread, NULL, sync_main, g))) {
		free_sync(g);
		errno = rc;
		return -1;
	}
	*out = g;
	return 0;
nomem:
	errno = ENOMEM;
	return -1;
}

void grad_sync_push(struct grad_sync *g, float *const *p, const size_t *n, int k)
{
	size_t first;

	pthread_mutex_lock(&g->mu);
	first = g->queued;
	for (int i = 0; i < k; i++) {
		if (!n[i])
			continue;
		if (g->queued == g->cap) { /* more pieces than the plan said: a bug, not a hang */
			if (!g->err)
				g->err = COMM_EINVAL;
			break;
		}
		g->q[g->queued++] = (struct piece){ p[i], n[i], 0 };
	}
	if (g->queued > first) {
		g->q[g->queued - 1].last = 1;
		pthread_cond_signal(&g->more);
	}
	pthread_mutex_unlock(&g->mu);
}

void grad_sync_trace(struct grad_sync *g, struct comm_trace *t)
{
	pthread_mutex_lock(&g->mu);
	g->trace = t;
	pthread_mutex_unlock(&g->mu);
}

void grad_sync_layer_done(void *grad_sync, struct gpt2 *m, int l)
{
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];
	int k = gpt2_layer_grads(m, l, p, n);

	m->ops->sync();
	grad_sync_push(grad_sync, p, n, k);
}

void grad_sync_push_rest(struct grad_sync *g, struct gpt2 *m)
{
	float *p[GPT2_NUM_TENSORS];
	size_t n[GPT2_NUM_TENSORS];
	int k = gpt2_global_grads(m, p, n);

	m->ops->sync();
	grad_sync_push(g, p, n, k);
}

int grad_sync_wait(struct grad_sync *g, double *busy_s, double *wait_s)
{
	double t0 = clock_monotonic();
	int err;

	pthread_mutex_lock(&g->mu);
	while (g->reduced < g->queued)
		pthread_cond_wait(&g->done, &g->mu);
	err = g->err;
	*busy_s = g->busy_s;
	g->busy_s = 0.0;
	g->queued = g->reduced = 0;
	g->err = 0;
	pthread_mutex_unlock(&g->mu);
	*wait_s = clock_monotonic() - t0;
	return err;
}

void grad_sync_stop(struct grad_sync *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = 1;
	pthread_cond_signal(&g->more);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	free_sync(g);
}
