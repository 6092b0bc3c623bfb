/*
 * kernels/cpu/softmax_xent.c - softmax over the padded vocabulary and the
 * cross-entropy loss, forward and backward, and both fused (CPU backend).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <float.h>

struct xent_args {
	float *losses, *logits;
	const int *targets;
	float dloss;
	int N, V, Vp;
};

SIMD_CLONES
static void xent_forward_part(void *p, int block, int count)
{
	struct xent_args *a = p;
	int lo, hi, V = a->V, Vp = a->Vp; /* locals: the loops below store floats */

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * Vp, max = -FLT_MAX, sum;

		for (int v = 0; v < V; v++)
			max = row[v] > max ? row[v] : max;
		for (int v = 0; v < V; v++)
			row[v] = math_softmax_exp(row[v], max);
		sum = sum_lanes(row, V);
		for (int v = 0; v < V; v++)
			row[v] /= sum;
		for (int v = V; v < Vp; v++)
			row[v] = 0.0f;
		if (a->targets)
			a->losses[r] = -logf(row[a->targets[r]]);
	}
}

void cpu_softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V,
				 int Vp)
{
	struct xent_args a = { .losses = losses, .logits = logits, .targets = targets, .N = N,
			       .V = V, .Vp = Vp };

	parallel_for(N, threads_for(20.0 * N * V), xent_forward_part, &a);
}

/* The whole vocabulary is the one slice starting at 0 (vocab_parallel.c). */
void cpu_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				  int Vp)
{
	cpu_vocab_xent_backward(probs, targets, dloss, N, V, Vp, 0);
}

/*
 * Fused: the row's exponentials are written once (sum_lanes reads them
 * back in its fixed order), then each becomes its gradient directly,
 * p = e / sum computed on the way: two writes of the row instead of the
 * three of forward + backward, and the same expressions, so the same bits.
 */
SIMD_CLONES
static void xent_fused_part(void *p, int block, int count)
{
	struct xent_args *a = p;
	int lo, hi, V = a->V, Vp = a->Vp;
	float dloss = a->dloss;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * Vp, max = -FLT_MAX, sum;
		int target = a->targets[r];

		for (int v = 0; v < V; v++)
			max = row[v] > max ? row[v] : max;
		for (int v = 0; v < V; v++)
			row[v] = math_softmax_exp(row[v], max);
		sum = sum_lanes(row, V);
		a->losses[r] = -logf(row[target] / sum);
		for (int v = 0; v < V; v++)
			row[v] = math_xent_dlogit(row[v] / sum, v == target, dloss);
		for (int v = V; v < Vp; v++)
			row[v] = 0.0f;
	}
}

void cpu_softmax_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
			    int V, int Vp)
{
	struct xent_args a = { .losses = losses, .logits = logits, .targets = targets,
			       .dloss = dloss, .N = N, .V = V, .Vp = Vp };

	parallel_for(N, threads_for(24.0 * N * V), xent_fused_part, &a);
}
