/*
 * kernels/cuda/rmsnorm.cu - RMSNorm (Llama's norm) forward and backward,
 * one warp per row as LayerNorm's (layernorm.cu): a row of C floats fits
 * a warp's strided reads, and its one statistic is a warp reduction, no
 * shared memory or block barrier needed.
 *
 * The per-element formulas are kernels/math.h's (math_rms_rstd,
 * math_rms_dx), and each product is written in the CPU's order (x * rstd
 * first, then the weight). dweight is a column sum over all rows, by
 * fixed chunks (reduce.cu), so the backward is deterministic.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#define ROWS_PER_BLOCK 8 /* warps per block */

__global__ static void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp,
					      const float *weight, int N, int C, float eps)
{
	int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
	const float *x;
	float *o, s, sq = 0.0f;

	if (row >= N)
		return;
	x = inp + (size_t)row * C;
	o = out + (size_t)row * C;
	for (int c = lane; c < C; c += 32)
		sq += x[c] * x[c];
	s = math_rms_rstd(warp_sum(sq) / C, eps);
	for (int c = lane; c < C; c += 32)
		o[c] = x[c] * s * weight[c];
	if (lane == 0)
		rstd[row] = s;
}

void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N,
			  int C, float eps)
{
	if (N <= 0)
		return;
	rmsnorm_forward_kernel<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK>>>(
		out, rstd, inp, weight, N, C, eps);
	LAUNCHED("rmsnorm_forward");
}

/* dinp += math_rms_dx(...) per row: the row's mean of dout*w*xhat first. */
__global__ static void rmsnorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
					   const float *weight, const float *rstd, int N, int C)
{
	int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
	const float *d, *x;
	float *dx, s, dnx = 0.0f;

	if (row >= N)
		return;
	d = dout + (size_t)row * C;
	x = inp + (size_t)row * C;
	dx = dinp + (size_t)row * C;
	s = rstd[row];
	for (int c = lane; c < C; c += 32)
		dnx += weight[c] * d[c] * (x[c] * s);
	dnx = warp_sum(dnx) / C;
	for (int c = lane; c < C; c += 32)
		dx[c] += math_rms_dx(d[c], weight[c], x[c] * s, s, dnx);
}

/*
 * Partial column sums of xhat * dout (for dweight) over one chunk of rows,
 * as reduce.cu's column sums; cuda_column_fold adds the chunks in order.
 */
__global__ static void rmsnorm_dweight_kernel(float *pdw, const float *dout, const float *inp,
					      const float *rstd, int N, int C)
{
	__shared__ float sw[COL_LANES][COL_TILE];
	int c = blockIdx.x * COL_TILE + threadIdx.x;
	int r0 = blockIdx.y * ROWS_PER_CHUNK, r1 = min(N, r0 + ROWS_PER_CHUNK);
	float aw = 0.0f;

	if (c < C)
		for (int r = r0 + threadIdx.y; r < r1; r += COL_LANES)
			aw += inp[(size_t)r * C + c] * rstd[r] * dout[(size_t)r * C + c];
	sw[threadIdx.y][threadIdx.x] = aw;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		float w = 0.0f;

		for (int k = 0; k < COL_LANES; k++)
			w += sw[k][threadIdx.x];
		pdw[(size_t)blockIdx.y * C + c] = w;
	}
}

void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
			   const float *weight, const float *rstd, int N, int C)
{
	int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
	float *partial;
	dim3 grid((C + COL_TILE - 1) / COL_TILE, chunks), block(COL_TILE, COL_LANES);

	if (N <= 0 || C <= 0)
		return;
	rmsnorm_dinp_kernel<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK>>>(
		dinp, dout, inp, weight, rstd, N, C);
	LAUNCHED("rmsnorm_backward dinp");
	partial = (float *)cuda_scratch(SCRATCH_COLS, (size_t)chunks * C * sizeof(float));
	rmsnorm_dweight_kernel<<<grid, block>>>(partial, dout, inp, rstd, N, C);
	LAUNCHED("rmsnorm_backward dweight");
	cuda_column_fold(dweight, partial, chunks, C);
}
