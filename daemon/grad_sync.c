/*
 * daemon/grad_sync.c - see grad_sync.h.
 *
 * A queue of pieces (pointer, length) under one mutex: the rank appends,
 * the thread takes them in order and all-reduces each outside the lock.
 * The queue is reset at each grad_sync_wait, once everything is done.
 */
#include "config.h"
#include "daemon/grad_sync.h"

#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct piece {
	float *p;
	size_t n;
};

struct grad_sync {
	struct comm *dp;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t more, done;   /* pieces queued; a piece reduced */
	struct piece *q;
	size_t cap, queued, reduced; /* pieces [reduced, queued) are waiting or in flight */
	int err;                     /* the first failed reduction's code */
	int (*thread_init)(void *arg);
	void *init_arg;
	int stop;
	double busy_s;               /* reducing, since the last wait */
};

static void *sync_main(void *arg)
{
	struct grad_sync *g = arg;
	int init_failed = g->thread_init && g->thread_init(g->init_arg);

	pthread_mutex_lock(&g->mu);
	for (;;) {
		struct piece pc;
		double t0;
		int rc = 0;

		while (g->reduced == g->queued && !g->stop)
			pthread_cond_wait(&g->more, &g->mu);
		if (g->reduced == g->queued)
			break; /* stop, and nothing left */
		pc = g->q[g->reduced];
		pthread_mutex_unlock(&g->mu);
		t0 = clock_monotonic();
		if (init_failed)
			rc = COMM_ESYS;
		else if (!g->err) /* after a failure the pieces are only counted */
			rc = comm_allreduce(g->dp, pc.p, pc.n, COMM_FLOAT32, COMM_SUM);
		pthread_mutex_lock(&g->mu);
		g->busy_s += clock_monotonic() - t0;
		if (rc < 0 && !g->err)
			g->err = rc;
		g->reduced++;
		pthread_cond_signal(&g->done);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int grad_sync_start(struct grad_sync **out, struct comm *dp, size_t max_pieces,
		    int (*thread_init)(void *arg), void *arg)
{
	struct grad_sync *g = calloc(1, sizeof *g);
	int rc;

	*out = NULL;
	if (!g || !(g->q = calloc(max_pieces ? max_pieces : 1, sizeof *g->q))) {
		free(g);
		errno = ENOMEM;
		return -1;
	}
	g->dp = dp;
	g->cap = max_pieces;
	g->thread_init = thread_init;
	g->init_arg = arg;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->more, NULL);
	pthread_cond_init(&g->done, NULL);
	if ((rc = pthread_create(&g->thread, NULL, sync_main, g))) {
		pthread_mutex_destroy(&g->mu);
		pthread_cond_destroy(&g->more);
		pthread_cond_destroy(&g->done);
		free(g->q);
		free(g);
		errno = rc;
		return -1;
	}
	*out = g;
	return 0;
}

void grad_sync_push(struct grad_sync *g, float *p, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&g->mu);
	if (g->queued < g->cap) {
		g->q[g->queued++] = (struct piece){ p, n };
		pthread_cond_signal(&g->more);
	} else if (!g->err) {
		g->err = COMM_EINVAL; /* more pieces than the plan said: a bug, not a hang */
	}
	pthread_mutex_unlock(&g->mu);
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
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->more);
	pthread_cond_destroy(&g->done);
	free(g->q);
	free(g);
}
