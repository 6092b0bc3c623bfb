/*
 * kernels/cpu/softmax_xent.c - softmax over the padded vocabulary and the
 * cross-entropy loss, forward and backward (CPU backend).
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

SIMD_CLONES
static void xent_backward_part(void *p, int block, int count)
{
	struct xent_args *a = p;
	int lo, hi;

	int V = a->V, Vp = a->Vp;
	float dloss = a->dloss;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * Vp;
		int target = a->targets[r];

		for (int v = 0; v < V; v++)
			row[v] = math_xent_dlogit(row[v], v == target, dloss);
		for (int v = V; v < Vp; v++)
			row[v] = 0.0f;
	}
}

void cpu_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				  int Vp)
{
	struct xent_args a = { .logits = probs, .targets = targets, .dloss = dloss, .N = N, .V = V,
			       .Vp = Vp };

	parallel_for(N, threads_for(4.0 * N * V), xent_backward_part, &a);
}
