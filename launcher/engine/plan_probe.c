/*
 * launcher/engine/plan_probe.c - the compute probe `stork plan` runs when
 * no benchmark left a figure of the model for this node (plan.h).
 *
 * Compute: the model itself, trained on random tokens as `stork bench
 * train` does, when a step of a micro-batch takes at most 16 GFLOP; a
 * larger one is cut until it does: fewer layers, then a vocabulary of 128,
 * then fewer sequences (GPT-2 124M at B 4, T 64: one layer, all four
 * sequences). The micro-batch's rows are kept longest because they set how
 * well the matrix products run: cut to one sequence, GPT-2 124M's probe
 * ran at half the rate its ranks reach (the estimates 1.4 to 2 times the
 * measured steps). On a GPU node one copy on the GPU; on a CPU node one
 * copy per rank of a machine, at once, each on a rank's threads and pinned as
 * storkd pins its ranks, for a quarter of a second. The copies meet after
 * every step, as ranks meet in their gradient all-reduce, so that on
 * shared cores they take turns as ranks do (free-running copies preempt
 * each other inside steps and thrash each other's caches more than ranks
 * do). The figure is FLOPs per second of the forward and backward passes
 * and AdamW's seconds per parameter: from the median step on cores of
 * their own (a benchmark on a shared machine quotes medians); where the
 * copies share cores, from their wall time over their steps, per core.
 *
 * Sharing matters where a rank's working set fits the caches: the test
 * suite's 4-layer model, 4 ranks on 2 cores, runs at two thirds of its
 * speed alone; GPT-2 124M, from memory either way, at all of it.
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include "kernels/ops.h"
#include "launcher/bench/bench_util.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_FLOPS 16e9 /* per step, at most (one sequence at least) */
#define PROBE_SECONDS 0.25
#define PROBE_MAX_STEPS 4096

/* Model FLOPs of one sequence of T tokens through the whole of g. */
static double seq_flops(const struct gpt2_config *g, int T)
{
	struct gpt2_shard s;

	gpt2_shard_whole(g, &s);
	return layout_shard_flops(g, &s, T, GPT2_RECOMPUTE_NONE) * T;
}

/*
 * The probe's model and batch: g itself at B sequences when a step takes
 * at most PROBE_FLOPS, else fewer layers (one at least), then a
 * vocabulary of 128, then fewer sequences (one at least).
 */
static void probe_shape(const struct gpt2_config *g, int B, int T, struct gpt2_config *p,
			int *pb)
{
	double n;

	*p = *g;
	p->max_seq_len = T;
	while (p->num_layers > 1 && B * seq_flops(p, T) > PROBE_FLOPS)
		p->num_layers--;
	if (B * seq_flops(p, T) > PROBE_FLOPS)
		p->vocab_size = p->padded_vocab_size = 128;
	n = PROBE_FLOPS / seq_flops(p, T);
	*pb = n >= B ? B : n < 1 ? 1 : (int)n;
}

/*
 * The probe's steps: each one's times (the first PROBE_MAX_STEPS) but the
 * first's, the last's other figures, the wall time from the end of the
 * first (the copies' first meeting: they start apart) to the end of the
 * last, and the copies' meeting place.
 */
struct probe_steps {
	double fb[PROBE_MAX_STEPS], upd[PROBE_MAX_STEPS];
	int n;
	double first_start, last_end, spent;
	struct comm *c;              /* the copies' (NULL: one copy) */
	int rc;
	struct bench_train_result last;
};

/*
 * After each step: the copies meet and agree to stop once one has stepped
 * for PROBE_SECONDS; every step but the first is recorded.
 */
static int probe_step(const struct bench_train_result *step, void *arg)
{
	struct probe_steps *p = arg;
	int32_t done;

	p->spent += step->fwd_bwd_s + step->update_s;
	done = p->spent >= PROBE_SECONDS || p->n + 1 >= PROBE_MAX_STEPS;
	if (p->c && (p->rc = comm_allreduce(p->c, &done, 1, COMM_INT32, COMM_MAX)))
		done = 1;
	p->last_end = clock_monotonic();
	if (p->first_start == 0) { /* every copy goes on after the first meeting */
		p->first_start = p->last_end;
		return 1;
	}
	p->fb[p->n] = step->fwd_bwd_s;
	p->upd[p->n++] = step->update_s;
	p->last = *step;
	return !done;
}

/* One copy of the probe: a rank of the machine, on its cpu (-1: not pinned) and threads. */
struct probe_rank {
	const struct gpt2_config *g;
	struct bench_train_opts o;
	int cpu, threads, cuda;
	struct probe_steps steps;
	char err[256];
	int rc;
};

static void *probe_rank_main(void *arg)
{
	struct probe_rank *r = arg;

	plan_pin(r->cpu);
	if (!r->cuda)
		ops_cpu_set_threads(r->threads);
	r->rc = bench_train_probe(r->g, &r->o, r->cuda, probe_step, &r->steps, r->err,
				  sizeof r->err);
	if (!r->rc && r->steps.rc) {
		snprintf(r->err, sizeof r->err, "the probe's copies: %s", comm_strerror(r->steps.rc));
		r->rc = -1;
	}
	if (r->rc && r->steps.c) /* the others wait for this copy: wake them */
		comm_abort(r->steps.c, r->err);
	return NULL;
}

/* Run the copies at once and wait for them; 0, or -1 with the first failure's message. */
static int run_copies(struct probe_rank *r, int copies, struct comm_world *w, char *err,
		      size_t errlen)
{
	pthread_t *th = calloc((size_t)copies, sizeof *th);
	int started = 0, rc = 0;

	for (; th && started < copies; started++)
		if (pthread_create(&th[started], NULL, probe_rank_main, &r[started]))
			break;
	if (started < copies && w) /* the started ones would wait for the others */
		comm_world_abort(w, "cannot start the probe's threads");
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	for (int i = 0; i < copies && !rc; i++)
		if (i >= started || r[i].rc) {
			snprintf(err, errlen, "%s", i >= started ? "cannot start the probe's threads" :
								   r[i].err);
			rc = -1;
		}
	return rc;
}

/*
 * The figure of the copies into r: on cores of their own, each copy's
 * median step; sharing cores, each copy's wall time over its steps (split
 * between the passes and AdamW as their own times are), times cores /
 * copies: per core. Then the median copy's.
 */
static void merge_copies(struct probe_rank *pr, int copies, int cores,
			 struct bench_train_result *r)
{
	double fb[64], upd[64];
	int shared = cores > 0 && copies > cores;

	for (int i = 0; i < copies; i++) {
		struct probe_steps *p = &pr[i].steps;
		double sum_fb = 0, sum_upd = 0, per_core;

		for (int k = 0; k < p->n; k++)
			sum_fb += p->fb[k], sum_upd += p->upd[k];
		per_core = (p->last_end - p->first_start) / p->n * cores / copies;
		fb[i] = shared ? per_core * sum_fb / (sum_fb + sum_upd) : bench_median(p->fb, p->n);
		upd[i] = shared ? per_core * sum_upd / (sum_fb + sum_upd) : bench_median(p->upd, p->n);
	}
	*r = pr[0].steps.last;
	r->fwd_bwd_s = bench_median(fb, copies);
	r->update_s = bench_median(upd, copies);
}

int plan_probe_compute(const struct gpt2_config *g, const struct bench_train_opts *o,
		       const struct plan_node *n, struct gpt2_config *probed,
		       struct bench_train_result *r, char *err, size_t errlen)
{
	int cpus[CPU_SETSIZE], ncpu = plan_allowed_cpus(cpus, CPU_SETSIZE);
	int copies = n->cuda || n->copies < 1 ? 1 : n->copies > 64 ? 64 : n->copies;
	struct probe_rank *pr = calloc((size_t)copies, sizeof *pr);
	struct comm_world *w = NULL;
	int rc = -1, B;

	if (!pr) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	probe_shape(g, o->B, o->T, probed, &B);
	if (copies > 1 && !(w = comm_world_create(copies))) {
		snprintf(err, errlen, "out of memory");
		free(pr);
		return -1;
	}
	for (int i = 0; i < copies; i++) {
		pr[i] = (struct probe_rank){ .g = probed, .o = *o, .threads = n->threads_per_rank,
					     .cuda = n->cuda, .cpu = -1 };
		pr[i].steps.c = w ? comm_world_rank(w, i) : NULL;
		pr[i].o.B = n->cuda ? o->B : B; /* a GPU takes the whole batch of one layer */
		/* as storkd: a rank of one thread is pinned, ranks past the cores share them */
		if (!n->cuda && n->threads_per_rank == 1 && ncpu > 0)
			pr[i].cpu = cpus[i % ncpu];
	}
	if (run_copies(pr, copies, w, err, errlen) == 0) {
		merge_copies(pr, copies, n->cores, r);
		rc = 0;
	}
	free(pr);
	if (w)
		comm_world_destroy(w);
	return rc;
}
