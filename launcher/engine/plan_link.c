/*
 * launcher/engine/plan_link.c - the probe of the link between the ranks of
 * one node that `stork plan` runs on CPU nodes (plan.h): `ranks` threads
 * of this process, pinned to its cores as storkd pins its ranks (rank i on
 * the (i mod n)-th of the n cores it may use), talking through lib/comm's
 * shared memory as storkd's ranks do.
 *
 * Bandwidth: 11 all-reduces of 4 MiB over every rank, the median one's bus
 * bytes (2 (n-1)/n of the buffer, as bench comm counts them) per second.
 *
 * Latency: what a small all-reduce adds between two stretches of compute,
 * measured that way because that is how tensor parallelism meets it: on a
 * node with more ranks than cores, the partner of a rank that arrives is
 * often not running, and the wait (the scheduler's switch, the futex wake)
 * is far longer than an all-reduce between idle threads. Every rank runs
 * K chunks of `chunk` seconds of arithmetic alone, then K chunks each
 * followed by an all-reduce of 1 KiB within its pair (ranks 2i, 2i+1:
 * a tensor-parallel group of 2); the difference over K, the median of 3
 * rounds, or the idle all-reduce's time when that is longer.
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include "launcher/bench/bench_util.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE (1 << 20)          /* floats */
#define SMALL 256
#define ROUNDS 11
#define LOADED_ROUNDS 3
#define LOADED_SECONDS 0.04      /* per phase of a round */

struct link_rank {
	struct comm *world, *pair;
	int cpu;                     /* pinned to this cpu; -1: not pinned */
	long spin;                   /* iterations of one chunk */
	int chunks;
	double large_s, small_s, loaded_s;
	int rc;
};

/* About n dependent multiply-adds; volatile so the compiler keeps them. */
static void spin(long n)
{
	volatile double x = 1.0;

	for (long i = 0; i < n; i++)
		x = x * 0.999999 + 1e-6;
}

/* Iterations of spin per second on this core: the fastest of 5 short runs. */
static double spin_rate(void)
{
	double best = 0;

	for (int r = 0; r < 5; r++) {
		double t0 = clock_monotonic(), rate;

		spin(100000);
		rate = 100000 / (clock_monotonic() - t0);
		best = rate > best ? rate : best;
	}
	return best;
}

/* Seconds of one all-reduce of n floats over c: the median of ROUNDS. */
static double idle_allreduce(struct comm *c, float *x, size_t n, int calls, int *rc)
{
	double t[ROUNDS];
	int r = 0;

	for (; r < ROUNDS && !*rc; r++) {
		double t0;

		*rc = comm_barrier(c);
		t0 = clock_monotonic();
		for (int i = 0; i < calls && !*rc; i++)
			*rc = comm_allreduce(c, x, n, COMM_FLOAT32, COMM_SUM);
		t[r] = (clock_monotonic() - t0) / calls;
	}
	return r ? bench_median(t, r) : 0;
}

/* Seconds of r's chunks, each followed by an all-reduce in its pair (talk) or not. */
static double chunks(struct link_rank *r, float *x, int talk)
{
	double t0;

	if ((r->rc = comm_barrier(r->world)))
		return 0;
	t0 = clock_monotonic();
	for (int i = 0; i < r->chunks && !r->rc; i++) {
		spin(r->spin);
		if (talk && r->pair)
			r->rc = comm_allreduce(r->pair, x, SMALL, COMM_FLOAT32, COMM_SUM);
	}
	if (!r->rc)
		r->rc = comm_barrier(r->world);
	return clock_monotonic() - t0;
}

/* What an all-reduce in a pair adds to compute, per call: the median of LOADED_ROUNDS. */
static double loaded_allreduce(struct link_rank *r, float *x)
{
	double d[LOADED_ROUNDS];
	int k = 0;

	for (; k < LOADED_ROUNDS && !r->rc; k++) {
		double alone = chunks(r, x, 0);

		d[k] = (chunks(r, x, 1) - alone) / r->chunks;
	}
	return k ? bench_median(d, k) : 0;
}

static void *link_rank_main(void *arg)
{
	struct link_rank *r = arg;
	float *x = calloc(LARGE, sizeof *x);
	int rank = comm_rank(r->world);

	plan_pin(r->cpu);
	r->rc = x ? comm_split(r->world, rank / 2, rank, &r->pair) : COMM_ENOMEM;
	if (!r->rc && r->pair && comm_size(r->pair) < 2) {
		comm_free(r->pair);
		r->pair = NULL;
	}
	if (!r->rc) {
		r->large_s = idle_allreduce(r->world, x, LARGE, 1, &r->rc);
		r->small_s = idle_allreduce(r->world, x, SMALL, 20, &r->rc);
	}
	if (!r->rc)
		r->loaded_s = loaded_allreduce(r, x);
	if (r->rc)
		comm_abort(r->world, "link probe failed");
	comm_free(r->pair);
	free(x);
	return NULL;
}

/* Start the ranks (pinned, chunks of chunk_s) and wait for them; 0 or -1. */
static int run_ranks(struct comm_world *w, struct link_rank *r, int ranks, double chunk_s)
{
	pthread_t *th = calloc((size_t)ranks, sizeof *th);
	int cpus[CPU_SETSIZE], n = plan_allowed_cpus(cpus, CPU_SETSIZE), started = 0;
	double oversub = n && ranks > n ? (double)ranks / n : 1.0;
	long spin_n = (long)(chunk_s * spin_rate());
	int k = (int)(LOADED_SECONDS / (chunk_s * oversub));

	for (; th && started < ranks; started++) {
		r[started] = (struct link_rank){ .world = comm_world_rank(w, started),
						 .cpu = n ? cpus[started % n] : -1,
						 .spin = spin_n > 0 ? spin_n : 1,
						 .chunks = k < 10 ? 10 : k };
		if (pthread_create(&th[started], NULL, link_rank_main, &r[started]))
			break;
	}
	if (started < ranks)
		comm_world_abort(w, "cannot start a thread");
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	return started == ranks ? 0 : -1;
}

int plan_probe_shm(int ranks, double chunk_s, struct link_figure *f, char *err, size_t errlen)
{
	struct comm_world *w = ranks > 1 ? comm_world_create(ranks) : NULL;
	struct link_rank *r = calloc((size_t)ranks, sizeof *r);
	int rc = -1;

	if (!w || !r) {
		snprintf(err, errlen, ranks > 1 ? "out of memory" : "a link needs 2 ranks");
		goto out;
	}
	if (run_ranks(w, r, ranks, chunk_s) < 0 || r[0].rc) {
		snprintf(err, errlen, "the link probe failed: %s",
			 r[0].rc ? comm_strerror(r[0].rc) : "cannot start its threads");
		goto out;
	}
	f->latency_s = r[0].loaded_s > r[0].small_s ? r[0].loaded_s : r[0].small_s;
	f->bytes_per_s = 2.0 * (ranks - 1) / ranks * LARGE * sizeof(float) /
			 (r[0].large_s > r[0].small_s ? r[0].large_s - r[0].small_s : r[0].large_s);
	rc = 0;
out:
	free(r);
	if (w)
		comm_world_destroy(w);
	return rc;
}
