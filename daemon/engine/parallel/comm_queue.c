/*
 * daemon/engine/parallel/comm_queue.c - see comm_queue.h.
 */
#include "config.h"
#include "daemon/engine/parallel/comm_queue.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define QUEUE_SLOTS 16

struct job {
	comm_job_fn fn;
	void *arg;
	int a, b;
};

struct comm_queue {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t more, done;    /* a job handed; a job run */
	struct job slot[QUEUE_SLOTS]; /* ticket t waits in slot (t - 1) % QUEUE_SLOTS */
	long pushed, finished;        /* the last ticket handed, and the last run */
	int failed;                   /* the first failure, 0 */
	int stop;
	struct comm_trace *trace;
	double busy_s;                /* running jobs, since comm_queue_busy */
};

static void *queue_main(void *arg)
{
	struct comm_queue *q = arg;

	comm_trace_attach(q->trace);
	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct job j;
		int failed, rc;
		double t0;

		while (q->finished == q->pushed && !q->stop)
			pthread_cond_wait(&q->more, &q->mu);
		if (q->finished == q->pushed)
			break; /* stop, and nothing left */
		j = q->slot[q->finished % QUEUE_SLOTS];
		failed = q->failed;
		pthread_mutex_unlock(&q->mu);
		t0 = clock_monotonic();
		rc = failed ? failed : j.fn(j.arg, j.a, j.b); /* after a failure: only counted */
		pthread_mutex_lock(&q->mu);
		q->busy_s += clock_monotonic() - t0;
		if (rc && !q->failed)
			q->failed = rc;
		q->finished++;
		pthread_cond_broadcast(&q->done);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int comm_queue_start(struct comm_queue **out, struct comm_trace *trace)
{
	struct comm_queue *q = calloc(1, sizeof *q);
	int rc;

	*out = NULL;
	if (!q)
		return -1;
	q->trace = trace;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->more, NULL);
	pthread_cond_init(&q->done, NULL);
	if ((rc = pthread_create(&q->thread, NULL, queue_main, q))) {
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->more);
		pthread_cond_destroy(&q->done);
		free(q);
		errno = rc;
		return -1;
	}
	*out = q;
	return 0;
}

long comm_queue_push(struct comm_queue *q, comm_job_fn fn, void *arg, int a, int b)
{
	long ticket;

	pthread_mutex_lock(&q->mu);
	while (q->pushed - q->finished >= QUEUE_SLOTS)
		pthread_cond_wait(&q->done, &q->mu);
	q->slot[q->pushed % QUEUE_SLOTS] = (struct job){ fn, arg, a, b };
	ticket = ++q->pushed;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->mu);
	return ticket;
}

int comm_queue_wait(struct comm_queue *q, long ticket)
{
	int rc;

	pthread_mutex_lock(&q->mu);
	while (q->finished < ticket)
		pthread_cond_wait(&q->done, &q->mu);
	rc = q->failed;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int comm_queue_drain(struct comm_queue *q)
{
	long last;

	pthread_mutex_lock(&q->mu);
	last = q->pushed;
	pthread_mutex_unlock(&q->mu);
	return comm_queue_wait(q, last);
}

double comm_queue_busy(struct comm_queue *q)
{
	double s;

	pthread_mutex_lock(&q->mu);
	s = q->busy_s;
	q->busy_s = 0.0;
	pthread_mutex_unlock(&q->mu);
	return s;
}

void comm_queue_stop(struct comm_queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = 1;
	pthread_cond_signal(&q->more);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->more);
	pthread_cond_destroy(&q->done);
	free(q);
}
