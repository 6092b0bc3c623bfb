/*
 * kernels/cuda/vocab_parallel.cu - the softmax and cross-entropy of a rank
 * that holds a slice of the vocabulary (tensor parallelism), in the steps
 * daemon/engine/parallel/tensor_parallel.c puts its all-reduces between: each row's
 * maximum, its exponentials and their sum, the division and the loss, and
 * the gradient. The embedding's pair is in encoder.cu.
 *
 * A row is the vn logits of one position in this rank's columns; the
 * first nv are real tokens. One block per row; the maximum and the sum
 * are block reductions in a fixed order (each thread's strided part, the
 * warps' butterflies, then the warps in order), the sum in double as the
 * CPU backend's, so a row's result does not depend on timing. Formulas:
 * kernels/math.h.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#include <cfloat>

#define ROW_THREADS 256
#define ROW_WARPS (ROW_THREADS / 32)

__device__ static double warp_sum_double(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* The block's maximum (when is_max) or sum of v, in a fixed order; thread 0 has it. */
__device__ static double block_fold(double v, bool is_max)
{
	__shared__ double part[ROW_WARPS];
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	v = is_max ? (double)warp_max((float)v) : warp_sum_double(v);
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	if (threadIdx.x == 0) {
		v = part[0];
		for (int w = 1; w < ROW_WARPS; w++)
			v = is_max ? fmax(v, part[w]) : v + part[w];
	}
	return v;
}

__global__ static void softmax_max_kernel(float *rows, const float *logits, int nv, int vn)
{
	const float *row = logits + (size_t)blockIdx.x * vn;
	float x = -FLT_MAX;

	for (int v = threadIdx.x; v < nv; v += blockDim.x)
		x = fmaxf(x, row[v]);
	x = (float)block_fold(x, true);
	if (threadIdx.x == 0)
		rows[blockIdx.x] = x;
}

void cuda_vocab_softmax_max(float *rows, const float *logits, int N, int nv, int vn)
{
	if (N <= 0)
		return;
	softmax_max_kernel<<<N, ROW_THREADS>>>(rows, logits, nv, vn);
	LAUNCHED("vocab_softmax_max");
}

__global__ static void softmax_exp_kernel(float *logits, float *sums, const float *max, int nv,
					  int vn)
{
	float *row = logits + (size_t)blockIdx.x * vn, m = max[blockIdx.x];
	double s = 0.0;

	for (int v = threadIdx.x; v < nv; v += blockDim.x) {
		float e = math_softmax_exp(row[v], m);

		row[v] = e;
		s += e;
	}
	s = block_fold(s, false);
	if (threadIdx.x == 0)
		sums[blockIdx.x] = (float)s;
}

void cuda_vocab_softmax_exp(float *logits, float *sums, const float *max, int N, int nv, int vn)
{
	if (N <= 0)
		return;
	softmax_exp_kernel<<<N, ROW_THREADS>>>(logits, sums, max, nv, vn);
	LAUNCHED("vocab_softmax_exp");
}

/* One block per row: divide, zero the padding, and the target's holder writes the loss. */
__global__ static void softmax_finish_kernel(float *losses, float *logits, const float *sums,
					     const int *targets, int nv, int vn, int v0)
{
	float *row = logits + (size_t)blockIdx.x * vn, sum = sums[blockIdx.x];
	int t = targets ? targets[blockIdx.x] - v0 : -1;

	for (int v = threadIdx.x; v < vn; v += blockDim.x) {
		float p = v < nv ? row[v] / sum : 0.0f;

		row[v] = p;
		if (v == t && t < nv)
			losses[blockIdx.x] = -logf(p);
	}
	if (targets && threadIdx.x == 0 && (t < 0 || t >= nv))
		losses[blockIdx.x] = 0.0f;
}

void cuda_vocab_softmax_finish(float *losses, float *logits, const float *sums,
			       const int *targets, int N, int nv, int vn, int v0)
{
	if (N <= 0)
		return;
	softmax_finish_kernel<<<N, ROW_THREADS>>>(losses, logits, sums, targets, nv, vn, v0);
	LAUNCHED("vocab_softmax_finish");
}

/* In place: probs -> (p - onehot(target)) * dloss in the first nv columns, 0 after. */
__global__ static void xent_backward_kernel(float *probs, const int *targets, float dloss,
					    int N, int nv, int vn, int v0)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * vn) {
		int n = (int)(i / vn), v = (int)(i % vn);

		probs[i] = v < nv ? math_xent_dlogit(probs[i], v == targets[n] - v0, dloss) : 0.0f;
	}
}

void cuda_vocab_xent_backward(float *probs, const int *targets, float dloss, int N, int nv,
			      int vn, int v0)
{
	size_t n = (size_t)N * vn;

	if (!n)
		return;
	xent_backward_kernel<<<grid_for(n), BLOCK>>>(probs, targets, dloss, N, nv, vn, v0);
	LAUNCHED("vocab_xent_backward");
}
