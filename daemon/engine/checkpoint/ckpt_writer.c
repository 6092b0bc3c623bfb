/*
 * daemon/engine/checkpoint/ckpt_writer.c - a checkpoint written by a thread of the rank's
 * own (see daemon/engine/checkpoint/ckpt_writer.h).
 */
#include "config.h"
#include "daemon/engine/checkpoint/ckpt_writer.h"

#include "lib/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckpt_writer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	int started;                  /* a thread to join */
	int copied, finished;         /* under lock */
	float *buf;
	struct ckpt_copy copies[CKPT_WRITER_MAX_COPIES];
	int ncopy;
	ckpt_write_fn write;
	void *arg;
	int rc;                       /* the write's: 0 or -1 */
	double seconds;
	char err[1024];
};

static void set_flag(struct ckpt_writer *w, int *flag)
{
	pthread_mutex_lock(&w->lock);
	*flag = 1;
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
}

static void *writer_main(void *p)
{
	struct ckpt_writer *w = p;
	double t0 = clock_monotonic();
	float *dst = w->buf;

	for (int i = 0; i < w->ncopy; i++) {
		memcpy(dst, w->copies[i].src, w->copies[i].n * sizeof(float));
		dst += w->copies[i].n;
	}
	set_flag(w, &w->copied);
	w->rc = w->write(w->arg, w->buf, w->err, sizeof w->err);
	w->seconds = clock_monotonic() - t0;
	set_flag(w, &w->finished);
	return NULL;
}

struct ckpt_writer *ckpt_writer_new(void)
{
	struct ckpt_writer *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->changed, NULL);
	return w;
}

int ckpt_writer_start(struct ckpt_writer *w, float *buf, const struct ckpt_copy *copies,
		      int ncopy, ckpt_write_fn write, void *arg)
{
	int rc;

	if (w->started || ncopy < 0 || ncopy > CKPT_WRITER_MAX_COPIES) {
		errno = EINVAL;
		return -1;
	}
	w->buf = buf;
	w->ncopy = ncopy;
	if (ncopy)
		memcpy(w->copies, copies, (size_t)ncopy * sizeof *copies);
	w->write = write;
	w->arg = arg;
	w->copied = w->finished = 0;
	w->rc = 0;
	w->err[0] = '\0';
	/* the thread inherits the rank's binding: its cores, its NUMA node */
	if ((rc = pthread_create(&w->thread, NULL, writer_main, w)) != 0) {
		errno = rc;
		return -1;
	}
	w->started = 1;
	return 0;
}

static void wait_flag(struct ckpt_writer *w, const int *flag)
{
	pthread_mutex_lock(&w->lock);
	while (!*flag)
		pthread_cond_wait(&w->changed, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void ckpt_writer_wait_copied(struct ckpt_writer *w)
{
	if (w && w->started)
		wait_flag(w, &w->copied);
}

int ckpt_writer_busy(struct ckpt_writer *w)
{
	int busy;

	if (!w || !w->started)
		return 0;
	pthread_mutex_lock(&w->lock);
	busy = !w->finished;
	pthread_mutex_unlock(&w->lock);
	return busy;
}

int ckpt_writer_started(const struct ckpt_writer *w)
{
	return w && w->started;
}

int ckpt_writer_join(struct ckpt_writer *w, double *seconds, char *err, size_t errlen)
{
	if (seconds)
		*seconds = 0;
	if (!w || !w->started)
		return 0;
	pthread_join(w->thread, NULL);
	w->started = 0;
	if (seconds)
		*seconds = w->seconds;
	if (w->rc < 0)
		snprintf(err, errlen, "%s", w->err);
	return w->rc;
}

void ckpt_writer_free(struct ckpt_writer *w)
{
	if (!w)
		return;
	if (w->started)
		pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->changed);
	free(w);
}
