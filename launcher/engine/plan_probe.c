/*
 * launcher/engine/plan_probe.c - the compute probe `stork plan` runs when
 * no benchmark left a figure of the model for this node (plan.h).
 *
 * Compute: the model itself, trained on random tokens as `stork bench
 * train` does, on as many threads as a rank of the plan gets, when a step
 * of a micro-batch takes at most 4 GFLOP; a larger one is cut until it
 * does: fewer sequences, then fewer layers, then a vocabulary of 128 (a
 * block of GPT-2 124M at T 64: one sequence, one layer; the head's large
 * matrix product, left out, often runs faster than the block). Steps for a
 * quarter of a second (one at least); the figure is the median step's
 * FLOPs per second of the forward and backward passes and AdamW's seconds
 * per parameter (a benchmark on a shared machine quotes medians).
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include "kernels/ops.h"
#include "launcher/bench_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_FLOPS 4e9          /* per step, at most (one sequence at least) */
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
 * at most PROBE_FLOPS, else fewer sequences (one at least), then fewer
 * layers (one at least), then a vocabulary of 128.
 */
static void probe_shape(const struct gpt2_config *g, int B, int T, struct gpt2_config *p,
			int *pb)
{
	double n;

	*p = *g;
	p->max_seq_len = T;
	n = PROBE_FLOPS / seq_flops(p, T);
	*pb = n >= B ? B : n < 1 ? 1 : (int)n;
	while (p->num_layers > 1 && seq_flops(p, T) > PROBE_FLOPS)
		p->num_layers--;
	if (seq_flops(p, T) > PROBE_FLOPS)
		p->vocab_size = p->padded_vocab_size = 128;
}

/* The probe's steps: each one's times (the first PROBE_MAX_STEPS), the last's other figures. */
struct probe_steps {
	double fb[PROBE_MAX_STEPS], upd[PROBE_MAX_STEPS];
	int n;
	struct bench_train_result last;
};

static void probe_step(const struct bench_train_result *step, void *arg)
{
	struct probe_steps *p = arg;

	if (p->n < PROBE_MAX_STEPS) {
		p->fb[p->n] = step->fwd_bwd_s;
		p->upd[p->n++] = step->update_s;
	}
	p->last = *step;
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
	r->rc = bench_train_probe(r->g, &r->o, r->cuda, PROBE_SECONDS, probe_step, &r->steps,
				  r->err, sizeof r->err);
	return NULL;
}

/* Run the copies at once and wait for them; 0, or -1 with the first failure's message. */
static int run_copies(struct probe_rank *r, int copies, char *err, size_t errlen)
{
	pthread_t *th = calloc((size_t)copies, sizeof *th);
	int started = 0, rc = 0;

	for (; th && started < copies; started++)
		if (pthread_create(&th[started], NULL, probe_rank_main, &r[started]))
			break;
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

/* The median step of every copy into r; the times scaled to a core's when copies share cores. */
static void merge_copies(const struct probe_rank *pr, int copies, int cores,
			 struct bench_train_result *r)
{
	static double fb[PROBE_MAX_STEPS * 4], upd[PROBE_MAX_STEPS * 4];
	double share = cores > 0 && copies > cores ? (double)cores / copies : 1.0;
	int n = 0;

	for (int i = 0; i < copies; i++)
		for (int k = 0; k < pr[i].steps.n && n < PROBE_MAX_STEPS * 4; k++, n++) {
			fb[n] = pr[i].steps.fb[k];
			upd[n] = pr[i].steps.upd[k];
		}
	*r = pr[0].steps.last;
	r->fwd_bwd_s = bench_median(fb, n) * share;
	r->update_s = bench_median(upd, n) * share;
}

int plan_probe_compute(const struct gpt2_config *g, const struct bench_train_opts *o,
		       const struct plan_node *n, struct gpt2_config *probed,
		       struct bench_train_result *r, char *err, size_t errlen)
{
	int cpus[CPU_SETSIZE], ncpu = plan_allowed_cpus(cpus, CPU_SETSIZE);
	int copies = n->cuda || n->copies < 1 ? 1 : n->copies > 64 ? 64 : n->copies;
	struct probe_rank *pr = calloc((size_t)copies, sizeof *pr);
	int rc = -1, B;

	if (!pr) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	probe_shape(g, o->B, o->T, probed, &B);
	for (int i = 0; i < copies; i++) {
		pr[i] = (struct probe_rank){ .g = probed, .o = *o, .threads = n->threads_per_rank,
					     .cuda = n->cuda, .cpu = -1 };
		pr[i].o.B = n->cuda ? o->B : B; /* a GPU takes the whole batch of one layer */
		/* as storkd: a rank of one thread is pinned, ranks past the cores share them */
		if (!n->cuda && n->threads_per_rank == 1 && ncpu > 0)
			pr[i].cpu = cpus[i % ncpu];
	}
	if (run_copies(pr, copies, err, errlen) == 0) {
		merge_copies(pr, copies, n->cores, r);
		rc = 0;
	}
	free(pr);
	return rc;
}
