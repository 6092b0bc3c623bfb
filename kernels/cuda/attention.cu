/*
 * kernels/cuda/attention.cu - causal multi-head self-attention on batched
 * matrix products, forward and backward.
 *
 * The row-major qkv (B, T, 3, NH, HS) is first permuted into q, k, v of
 * shape (B, NH, T, HS), so that each (batch, head) pair is a contiguous
 * matrix and cuBLAS's strided-batched GEMM runs all B*NH of them at once:
 *   att = softmax(q k^T / sqrt(HS)) with the causal mask   (B, NH, T, T)
 *   y   = att v                                            (B, NH, T, HS)
 * and y is permuted back to (B, T, NH*HS). The T x T weights live in
 * scratch for one layer at a time: only each row's max and exp-sum are
 * kept (ops.h's stats), and the backward pass computes q k^T again with the
 * same call and turns it into the same weights with the same formula
 * (math_attention_weight), then runs the products transposed:
 *   datt = dy v^T,  dv = att^T dy,
 *   dpre = att * (datt - rowsum(att * datt)) / sqrt(HS),
 *   dq = dpre k,  dk = dpre^T q,
 * and adds dq, dk, dv into dqkv. For GPT-2 124M at B=16, T=1024 that keeps
 * 12 x 768 MiB of weights out of the activations, for one more batched
 * product per layer. The products still go through memory; a fused kernel
 * that keeps a tile of weights in shared memory is a later step.
 * Row-major (R, K) = column-major (K, R): each call below is written as the
 * column-major product of the transposed views.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#include <cfloat>
#include <cmath>

/* qkv (B, T, 3, NH, HS) -> q, k, v (B, NH, T, HS) each; one thread per element of q. */
__global__ static void permute_kernel(float *q, float *k, float *v, const float *qkv, int B,
				      int T, int NH, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)B * NH * T * HS) {
		int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH);
		int b = (int)(i / HS / T / NH);
		size_t src = (((size_t)b * T + t) * 3 * NH + h) * HS + d;

		q[i] = qkv[src];
		k[i] = qkv[src + (size_t)NH * HS];
		v[i] = qkv[src + 2 * (size_t)NH * HS];
	}
}

/* y (B, NH, T, HS) -> out (B, T, NH, HS). */
__global__ static void unpermute_kernel(float *out, const float *y, int B, int T, int NH, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)B * NH * T * HS) {
		int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH);
		int b = (int)(i / HS / T / NH);

		out[(((size_t)b * T + t) * NH + h) * HS + d] = y[i];
	}
}

/* x (B, T, NH, HS) -> y (B, NH, T, HS): the gradient dout in the heads' layout. */
__global__ static void gather_heads_kernel(float *y, const float *x, int B, int T, int NH, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)B * NH * T * HS) {
		int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH);
		int b = (int)(i / HS / T / NH);

		y[i] = x[(((size_t)b * T + t) * NH + h) * HS + d];
	}
}

/* dqkv (B, T, 3, NH, HS) += dq, dk, dv (B, NH, T, HS). */
__global__ static void unpermute_add_kernel(float *dqkv, const float *dq, const float *dk,
					    const float *dv, int B, int T, int NH, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)B * NH * T * HS) {
		int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH);
		int b = (int)(i / HS / T / NH);
		size_t dst = (((size_t)b * T + t) * 3 * NH + h) * HS + d;

		dqkv[dst] += dq[i];
		dqkv[dst + (size_t)NH * HS] += dk[i];
		dqkv[dst + 2 * (size_t)NH * HS] += dv[i];
	}
}

/*
 * Causal softmax of each row of att (already scaled scores), in place: one
 * warp per row t, over columns 0..t; columns above the diagonal become 0.
 * The row's max and exp-sum are computed and written to fresh (the forward
 * pass), or, where fresh is NULL, read from kept (the backward pass).
 */
__global__ static void causal_softmax_kernel(float *att, float *fresh, const float *kept, int rows,
					     int T)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
	float *row, max = -FLT_MAX, sum = 0.0f;
	int t;

	if (r >= rows)
		return;
	t = r % T;
	row = att + (size_t)r * T;
	if (fresh) {
		for (int j = lane; j <= t; j += 32)
			max = fmaxf(max, row[j]);
		max = warp_max(max);
		for (int j = lane; j <= t; j += 32)
			sum += math_softmax_exp(row[j], max);
		sum = warp_sum(sum);
		__syncwarp();
		if (lane == 0) {
			fresh[(size_t)r * OPS_ATT_STATS] = max;
			fresh[(size_t)r * OPS_ATT_STATS + 1] = sum;
		}
	} else {
		max = kept[(size_t)r * OPS_ATT_STATS];
		sum = kept[(size_t)r * OPS_ATT_STATS + 1];
	}
	for (int j = lane; j < T; j += 32)
		row[j] = j <= t ? math_attention_weight(row[j], max, sum) : 0.0f;
}

/* datt -> dpre in place: att * (datt - rowsum(att * datt)) * scale, 0 above the diagonal. */
__global__ static void softmax_backward_kernel(float *datt, const float *att, int rows, int T,
					       float scale)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
	const float *a;
	float *d, dot = 0.0f;
	int t;

	if (r >= rows)
		return;
	t = r % T;
	a = att + (size_t)r * T;
	d = datt + (size_t)r * T;
	for (int j = lane; j <= t; j += 32)
		dot += a[j] * d[j];
	dot = warp_sum(dot);
	for (int j = lane; j < T; j += 32)
		d[j] = j <= t ? math_attention_dscore(a[j], d[j], dot, scale) : 0.0f;
}

#define ROW_WARPS 8

static void batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
		    const float *A, int lda, long long sa, const float *Bm, int ldb, long long sb,
		    float beta, float *Cm, int ldc, long long sc, int count, const char *what)
{
	cublas_check(cublasSgemmStridedBatched(cuda_blas(), ta, tb, m, n, k, &alpha, A, lda, sa, Bm,
					       ldb, sb, &beta, Cm, ldc, sc, count),
		     what);
}

/*
 * The weights of every (batch, head) pair into att (B*NH, T, T) from the
 * permuted q and k: att = softmax(q k^T / sqrt(HS)), the rows' stats written
 * to fresh, or read from kept where fresh is NULL. The backward pass repeats
 * the forward's call exactly, so the scores, and from them the weights, are
 * the same bits.
 */
static void attention_weights(float *att, float *fresh, const float *kept, const float *q,
			      const float *k, int B, int T, int NH, int HS)
{
	int rows = B * NH * T;
	long long tt = (long long)T * T, th = (long long)T * HS;

	/* att (T x T per head, row-major) = q k^T * scale */
	batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS, 1.0f / sqrtf((float)HS), k, HS, th, q, HS, th,
		0.0f, att, T, tt, B * NH, "attention q k^T");
	causal_softmax_kernel<<<(rows + ROW_WARPS - 1) / ROW_WARPS, 32 * ROW_WARPS>>>(att, fresh,
										 kept, rows, T);
	LAUNCHED("attention softmax");
}

void cuda_attention_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
			    int HS)
{
	size_t n = (size_t)B * NH * T * HS;
	float *q = (float *)cuda_scratch(SCRATCH_ATT_QKV, 3 * n * sizeof(float)), *k = q + n,
	      *v = k + n;
	float *y = (float *)cuda_scratch(SCRATCH_ATT_Y, n * sizeof(float));
	float *att = (float *)cuda_scratch(SCRATCH_ATT_P, (size_t)B * NH * T * T * sizeof(float));
	long long tt = (long long)T * T, th = (long long)T * HS;

	if (!n)
		return;
	permute_kernel<<<grid_for(n), BLOCK>>>(q, k, v, qkv, B, T, NH, HS);
	LAUNCHED("attention permute");
	attention_weights(att, stats, NULL, q, k, B, T, NH, HS);
	/* y (T x HS per head) = att v */
	batched(CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T, 1.0f, v, HS, th, att, T, tt, 0.0f, y, HS, th,
		B * NH, "attention att v");
	unpermute_kernel<<<grid_for(n), BLOCK>>>(out, y, B, T, NH, HS);
	LAUNCHED("attention unpermute");
}

void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv,
			     const float *stats, int B, int T, int NH, int HS)
{
	size_t n = (size_t)B * NH * T * HS;
	float *q = (float *)cuda_scratch(SCRATCH_ATT_QKV, 3 * n * sizeof(float)), *k = q + n,
	      *v = k + n;
	float *dy = (float *)cuda_scratch(SCRATCH_ATT_Y, n * sizeof(float));
	float *att = (float *)cuda_scratch(SCRATCH_ATT_P, (size_t)B * NH * T * T * sizeof(float));
	float *datt = (float *)cuda_scratch(SCRATCH_ATT_DATT, (size_t)B * NH * T * T * sizeof(float));
	float *dq = (float *)cuda_scratch(SCRATCH_ATT_DQKV, 3 * n * sizeof(float)), *dk = dq + n,
	      *dv = dk + n;
	int rows = B * NH * T;
	long long tt = (long long)T * T, th = (long long)T * HS;

	if (!n)
		return;
	/* q, k, v and the weights again (the scratch holds another layer's), and dy permuted */
	permute_kernel<<<grid_for(n), BLOCK>>>(q, k, v, qkv, B, T, NH, HS);
	LAUNCHED("attention backward permute");
	attention_weights(att, NULL, stats, q, k, B, T, NH, HS);
	gather_heads_kernel<<<grid_for(n), BLOCK>>>(dy, dout, B, T, NH, HS);
	LAUNCHED("attention backward dy");
	/* datt = dy v^T */
	batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS, 1.0f, v, HS, th, dy, HS, th, 0.0f, datt, T, tt,
		B * NH, "attention dy v^T");
	/* dv = att^T dy */
	batched(CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T, 1.0f, dy, HS, th, att, T, tt, 0.0f, dv, HS, th,
		B * NH, "attention att^T dy");
	softmax_backward_kernel<<<(rows + ROW_WARPS - 1) / ROW_WARPS, 32 * ROW_WARPS>>>(
		datt, att, rows, T, 1.0f / sqrtf((float)HS));
	LAUNCHED("attention softmax backward");
	/* dq = dpre k */
	batched(CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T, 1.0f, k, HS, th, datt, T, tt, 0.0f, dq, HS, th,
		B * NH, "attention dpre k");
	/* dk = dpre^T q */
	batched(CUBLAS_OP_N, CUBLAS_OP_T, HS, T, T, 1.0f, q, HS, th, datt, T, tt, 0.0f, dk, HS, th,
		B * NH, "attention dpre^T q");
	unpermute_add_kernel<<<grid_for(n), BLOCK>>>(dqkv, dq, dk, dv, B, T, NH, HS);
	LAUNCHED("attention backward unpermute");
}
