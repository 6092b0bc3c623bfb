/*
 * kernels/cuda/layernorm.cu - LayerNorm forward and backward, one warp per
 * row (a row of C floats fits a warp's strided reads; the row statistics
 * are warp reductions, no shared memory or block barrier needed).
 *
 * The per-element formulas are kernels/math.h's (math_ln_rstd,
 * math_ln_apply, math_ln_dx); the sums are two passes over the row, mean
 * then squared deviations, as on the CPU. dweight and dbias are column sums
 * over all rows, by fixed chunks (reduce.cu), so the backward is
 * deterministic.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#define LN_EPS 1e-5f
#define ROWS_PER_BLOCK 8 /* warps per block */

__global__ static void layernorm_forward_kernel(float *out, float *mean, float *rstd,
						const float *inp, const float *weight,
						const float *bias, int N, int C)
{
	int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
	const float *x;
	float *o, m, s = 0.0f, v = 0.0f;

	if (row >= N)
		return;
	x = inp + (size_t)row * C;
	o = out + (size_t)row * C;
	for (int c = lane; c < C; c += 32)
		s += x[c];
	m = warp_sum(s) / C;
	for (int c = lane; c < C; c += 32)
		v += (x[c] - m) * (x[c] - m);
	s = math_ln_rstd(warp_sum(v) / C, LN_EPS);
	for (int c = lane; c < C; c += 32)
		o[c] = math_ln_apply(x[c], m, s, weight[c], bias[c]);
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = s;
	}
}

/*
 * The residual add fused in front: each lane writes its strided elements
 * of res = x + y and sums them as it goes, in the order
 * layernorm_forward_kernel reads them, then reads back only what it wrote
 * itself (no barrier needed): the same bits as residual_forward followed
 * by layernorm_forward, one read of the row fewer.
 */
__global__ static void residual_layernorm_kernel(float *res, float *out, float *mean, float *rstd,
						 const float *x, const float *y,
						 const float *weight, const float *bias, int N,
						 int C)
{
	int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
	size_t off = (size_t)row * C;
	float m, s = 0.0f, v = 0.0f;

	if (row >= N)
		return;
	for (int c = lane; c < C; c += 32) {
		float r = x[off + c] + y[off + c];

		res[off + c] = r;
		s += r;
	}
	m = warp_sum(s) / C;
	for (int c = lane; c < C; c += 32)
		v += (res[off + c] - m) * (res[off + c] - m);
	s = math_ln_rstd(warp_sum(v) / C, LN_EPS);
	for (int c = lane; c < C; c += 32)
		out[off + c] = math_ln_apply(res[off + c], m, s, weight[c], bias[c]);
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = s;
	}
}

void cuda_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
				     const float *x, const float *y, const float *weight,
				     const float *bias, int N, int C)
{
	if (N <= 0)
		return;
	residual_layernorm_kernel<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK>>>(
		res, out, mean, rstd, x, y, weight, bias, N, C);
	LAUNCHED("residual_layernorm_forward");
}

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			    const float *weight, const float *bias, int N, int C)
{
	if (N <= 0)
		return;
	layernorm_forward_kernel<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK>>>(
		out, mean, rstd, inp, weight, bias, N, C);
	LAUNCHED("layernorm_forward");
}

/* dinp += math_ln_dx(...) per row: the row's two means of dout*w and dout*w*xhat first. */
__global__ static void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
					     const float *weight, const float *mean,
					     const float *rstd, int N, int C)
{
	int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
	const float *d, *x;
	float *dx, m, s, dn = 0.0f, dnx = 0.0f;

	if (row >= N)
		return;
	d = dout + (size_t)row * C;
	x = inp + (size_t)row * C;
	dx = dinp + (size_t)row * C;
	m = mean[row];
	s = rstd[row];
	for (int c = lane; c < C; c += 32) {
		float wd = weight[c] * d[c];

		dn += wd;
		dnx += wd * ((x[c] - m) * s);
	}
	dn = warp_sum(dn) / C;
	dnx = warp_sum(dnx) / C;
	for (int c = lane; c < C; c += 32)
		dx[c] += math_ln_dx(d[c], weight[c], (x[c] - m) * s, s, dn, dnx);
}

/*
 * Partial column sums of dout (for dbias) and xhat * dout (for dweight)
 * over one chunk of rows, as reduce.cu's column sums.
 */
__global__ static void layernorm_params_kernel(float *pdb, float *pdw, const float *dout,
					       const float *inp, const float *mean,
					       const float *rstd, int N, int C)
{
	__shared__ float sb[COL_LANES][COL_TILE], sw[COL_LANES][COL_TILE];
	int c = blockIdx.x * COL_TILE + threadIdx.x;
	int r0 = blockIdx.y * ROWS_PER_CHUNK, r1 = min(N, r0 + ROWS_PER_CHUNK);
	float ab = 0.0f, aw = 0.0f;

	if (c < C)
		for (int r = r0 + threadIdx.y; r < r1; r += COL_LANES) {
			float d = dout[(size_t)r * C + c];

			ab += d;
			aw += (inp[(size_t)r * C + c] - mean[r]) * rstd[r] * d;
		}
	sb[threadIdx.y][threadIdx.x] = ab;
	sw[threadIdx.y][threadIdx.x] = aw;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		float b = 0.0f, w = 0.0f;

		for (int k = 0; k < COL_LANES; k++) {
			b += sb[k][threadIdx.x];
			w += sw[k][threadIdx.x];
		}
		pdb[(size_t)blockIdx.y * C + c] = b;
		pdw[(size_t)blockIdx.y * C + c] = w;
	}
}

void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			     const float *inp, const float *weight, const float *mean,
			     const float *rstd, int N, int C)
{
	int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
	float *partial;
	dim3 grid((C + COL_TILE - 1) / COL_TILE, chunks), block(COL_TILE, COL_LANES);

	if (N <= 0)
		return;
	layernorm_dinp_kernel<<<(N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, 32 * ROWS_PER_BLOCK>>>(
		dinp, dout, inp, weight, mean, rstd, N, C);
	LAUNCHED("layernorm_backward dinp");
	partial = (float *)cuda_scratch(SCRATCH_COLS, 2 * (size_t)chunks * C * sizeof(float));
	layernorm_params_kernel<<<grid, block>>>(partial, partial + (size_t)chunks * C, dout, inp,
						 mean, rstd, N, C);
	LAUNCHED("layernorm_backward params");
	cuda_column_fold(dbias, partial, chunks, C);
	cuda_column_fold(dweight, partial + (size_t)chunks * C, chunks, C);
}
