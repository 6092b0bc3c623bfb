/*
 * kernels/cpu/vocab_parallel.c - the embedding and the softmax of a rank
 * that holds a slice of the vocabulary (tensor parallelism; the
 * collectives between the steps are daemon/engine/parallel/tensor_parallel.c's), CPU
 * backend. The formulas are kernels/math.h's, in the order of the
 * whole-vocabulary kernels, so that a tensor-parallel run follows the
 * whole-model run within rounding: only the order of a few sums differs.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <float.h>

struct vocab_args {
	float *out, *dwte, *dwpe, *logits, *rows, *losses;
	const float *wte, *dout, *max, *sums;
	const int *tok, *targets;
	float dloss;
	int B, T, N, C, nv, vn, v0;
};

static void embed_forward_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->N, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *o = a->out + (size_t)r * C;
		int v = a->tok[r] - a->v0;

		if (v >= 0 && v < a->vn)
			memcpy(o, a->wte + (size_t)v * C, (size_t)C * sizeof(float));
		else
			memset(o, 0, (size_t)C * sizeof(float));
	}
}

void cpu_vocab_encoder_forward(float *out, const int *inp, const float *wte, int N, int C, int v0,
			       int vn)
{
	struct vocab_args a = { .out = out, .tok = inp, .wte = wte, .N = N, .C = C, .v0 = v0,
				.vn = vn };

	parallel_for(blocks_of((size_t)N, ROW_BLOCK), threads_for(1.0 * N * C),
		     embed_forward_part, &a);
}

/* Split by channel, as cpu_encoder_backward: each keeps the serial order over (b, t). */
SIMD_CLONES
static void embed_backward_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi, C = a->C;

	split_range(C, 16, block, count, &lo, &hi);
	for (int r = 0; r < a->B * a->T; r++) {
		const float *d = a->dout + (size_t)r * C;
		float *pe = a->dwpe ? a->dwpe + (size_t)(r % a->T) * C : NULL;
		int v = a->tok[r] - a->v0;

		if (v >= 0 && v < a->vn) {
			float *te = a->dwte + (size_t)v * C;

			for (int c = lo; c < hi; c++)
				te[c] += d[c];
		}
		if (pe)
			for (int c = lo; c < hi; c++)
				pe[c] += d[c];
	}
}

void cpu_vocab_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
				int T, int C, int v0, int vn)
{
	struct vocab_args a = { .dwte = dwte, .dwpe = dwpe, .dout = dout, .tok = inp, .B = B,
				.T = T, .C = C, .v0 = v0, .vn = vn };

	parallel_for(blocks_of(C, 64), threads_for(2.0 * B * T * C), embed_backward_part, &a);
}

SIMD_CLONES
static void softmax_max_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *row = a->logits + (size_t)r * a->vn;
		float x = -FLT_MAX;

		for (int v = 0; v < a->nv; v++)
			x = row[v] > x ? row[v] : x;
		a->rows[r] = x;
	}
}

void cpu_vocab_softmax_max(float *rows, const float *logits, int N, int nv, int vn)
{
	struct vocab_args a = { .rows = rows, .logits = (float *)logits, .N = N, .nv = nv,
				.vn = vn };

	parallel_for(N, threads_for(1.0 * N * nv), softmax_max_part, &a);
}

/* The sum in double, in column order: its bits do not depend on the threads. */
SIMD_CLONES
static void softmax_exp_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * a->vn, max = a->max[r];
		double s = 0.0;

		for (int v = 0; v < a->nv; v++) {
			row[v] = math_softmax_exp(row[v], max);
			s += row[v];
		}
		a->rows[r] = (float)s;
	}
}

void cpu_vocab_softmax_exp(float *logits, float *sums, const float *max, int N, int nv, int vn)
{
	struct vocab_args a = { .logits = logits, .rows = sums, .max = max, .N = N, .nv = nv,
				.vn = vn };

	parallel_for(N, threads_for(20.0 * N * nv), softmax_exp_part, &a);
}

SIMD_CLONES
static void softmax_finish_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi, nv = a->nv, vn = a->vn;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * vn, sum = a->sums[r];

		for (int v = 0; v < nv; v++)
			row[v] /= sum;
		for (int v = nv; v < vn; v++)
			row[v] = 0.0f;
		if (a->targets) {
			/* the rank holding a row's target knows its loss; the others add 0 */
			int t = a->targets[r] - a->v0;

			a->losses[r] = t >= 0 && t < nv ? -logf(row[t]) : 0.0f;
		}
	}
}

void cpu_vocab_softmax_finish(float *losses, float *logits, const float *sums, const int *targets,
			      int N, int nv, int vn, int v0)
{
	struct vocab_args a = { .losses = losses, .logits = logits, .sums = sums,
				.targets = targets, .N = N, .nv = nv, .vn = vn, .v0 = v0 };

	parallel_for(N, threads_for(2.0 * N * vn), softmax_finish_part, &a);
}

SIMD_CLONES
static void xent_backward_part(void *p, int block, int count)
{
	struct vocab_args *a = p;
	int lo, hi, nv = a->nv, vn = a->vn;
	float dloss = a->dloss;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * vn;
		int target = a->targets[r] - a->v0;

		for (int v = 0; v < nv; v++)
			row[v] = math_xent_dlogit(row[v], v == target, dloss);
		for (int v = nv; v < vn; v++)
			row[v] = 0.0f;
	}
}

void cpu_vocab_xent_backward(float *probs, const int *targets, float dloss, int N, int nv, int vn,
			     int v0)
{
	struct vocab_args a = { .logits = probs, .targets = targets, .dloss = dloss, .N = N,
				.nv = nv, .vn = vn, .v0 = v0 };

	parallel_for(N, threads_for(4.0 * N * vn), xent_backward_part, &a);
}
