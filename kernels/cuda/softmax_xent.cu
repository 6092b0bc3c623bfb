/*
 * kernels/cuda/softmax_xent.cu - softmax over the vocabulary and the
 * cross-entropy loss, forward and backward, one block per row.
 *
 * A row is the Vp logits of one position; only the first V are real
 * tokens, the padding [V, Vp) becomes 0 in the probabilities and in their
 * gradient. The maximum and the sum are block reductions (each thread's
 * strided part, then a fixed tree over the threads), so a row's result
 * does not depend on timing. Formulas: kernels/math.h.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#include <cfloat>

#define XENT_THREADS 512

/* Reduce v over the block (max or sum) in a fixed order; every thread gets the result. */
__device__ static float block_reduce(float v, bool is_max)
{
	__shared__ float s[XENT_THREADS / 32];
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads(); /* s may still be read by a previous call */
	if (lane == 0)
		s[warp] = v;
	__syncthreads();
	v = lane < XENT_THREADS / 32 ? s[lane] : (is_max ? -FLT_MAX : 0.0f);
	return is_max ? warp_max(v) : warp_sum(v);
}

__global__ static void xent_forward_kernel(float *logits, int V, int Vp)
{
	float *row = logits + (size_t)blockIdx.x * Vp;
	float max = -FLT_MAX, sum = 0.0f;

	for (int v = threadIdx.x; v < V; v += blockDim.x)
		max = fmaxf(max, row[v]);
	max = block_reduce(max, true);
	for (int v = threadIdx.x; v < V; v += blockDim.x) {
		float e = math_softmax_exp(row[v], max);

		row[v] = e;
		sum += e;
	}
	sum = block_reduce(sum, false);
	for (int v = threadIdx.x; v < Vp; v += blockDim.x)
		row[v] = v < V ? row[v] / sum : 0.0f;
}

/* losses[n] = -log p[target]: after the rows are final (a second launch orders it). */
__global__ static void xent_loss_kernel(float *losses, const float *probs, const int *targets,
					int N, int Vp)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;

	if (n < N)
		losses[n] = -logf(probs[(size_t)n * Vp + targets[n]]);
}

void cuda_softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V,
			       int Vp)
{
	if (N <= 0)
		return;
	xent_forward_kernel<<<N, XENT_THREADS>>>(logits, V, Vp);
	LAUNCHED("softmax_xent_forward");
	if (targets) {
		xent_loss_kernel<<<grid_for((size_t)N), BLOCK>>>(losses, logits, targets, N, Vp);
		LAUNCHED("softmax_xent_forward loss");
	}
}

/*
 * Fused, one block per row, three passes over the row: the maximum, the
 * sum of exponentials (computed, not stored), then each logit's gradient
 * from its exponential computed again (the same function of the same
 * input: the same bits as the one summed). The thread that meets the
 * target writes the loss. Every expression and reduction order is the
 * unfused kernels', so the results are theirs bit for bit; the
 * probabilities are never written (llm.c's fused classifier does the
 * same with an online max and sum).
 */
__global__ static void xent_fused_kernel(float *losses, float *logits, const int *targets,
					 float dloss, int V, int Vp)
{
	float *row = logits + (size_t)blockIdx.x * Vp;
	int target = targets[blockIdx.x];
	float max = -FLT_MAX, sum = 0.0f;

	for (int v = threadIdx.x; v < V; v += blockDim.x)
		max = fmaxf(max, row[v]);
	max = block_reduce(max, true);
	for (int v = threadIdx.x; v < V; v += blockDim.x)
		sum += math_softmax_exp(row[v], max);
	sum = block_reduce(sum, false);
	for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
		float p = v < V ? math_softmax_exp(row[v], max) / sum : 0.0f;

		if (v == target)
			losses[blockIdx.x] = -logf(p);
		row[v] = v < V ? math_xent_dlogit(p, v == target, dloss) : 0.0f;
	}
}

void cuda_softmax_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
			     int V, int Vp)
{
	if (N <= 0)
		return;
	xent_fused_kernel<<<N, XENT_THREADS>>>(losses, logits, targets, dloss, V, Vp);
	LAUNCHED("softmax_xent_fused");
}

/* The whole vocabulary is the one slice starting at 0 (vocab_parallel.cu). */
void cuda_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				int Vp)
{
	cuda_vocab_xent_backward(probs, targets, dloss, N, V, Vp, 0);
}
