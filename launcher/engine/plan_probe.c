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

int plan_probe_compute(const struct gpt2_config *g, const struct bench_train_opts *o,
		       int threads, int cuda, struct gpt2_config *probed,
		       struct bench_train_result *r, char *err, size_t errlen)
{
	struct bench_train_opts p = *o;
	struct probe_steps *steps = calloc(1, sizeof *steps);

	probe_shape(g, o->B, o->T, probed, &p.B);
	if (cuda) /* a GPU takes the whole batch of one layer in no time */
		p.B = o->B;
	if (!cuda)
		ops_cpu_set_threads(threads);
	if (!steps || bench_train_probe(probed, &p, cuda, PROBE_SECONDS, probe_step, steps, err,
					errlen) < 0) {
		if (!steps)
			snprintf(err, errlen, "out of memory");
		free(steps);
		return -1;
	}
	*r = steps->last;
	r->fwd_bwd_s = bench_median(steps->fb, steps->n);
	r->update_s = bench_median(steps->upd, steps->n);
	free(steps);
	return 0;
}
