/*
 * kernels/cuda/reduce.cu - reductions whose bits do not depend on timing:
 * the sum of squares (the gradient norm) and column sums (bias and
 * LayerNorm gradients).
 *
 * No atomics: each block sums a fixed range in a fixed order, writes its
 * partial, and one more pass folds the partials in block order. The
 * grouping depends on the sizes only, so a run repeats itself bit for bit.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"

#define SUMSQ_BLOCKS 256

/* Block b sums squares of p[i] for i = b*BLOCK + t + k*stride in double, then a tree in shared memory. */
__global__ static void sumsq_partial_kernel(double *partial, const float *p, size_t n)
{
	__shared__ double s[BLOCK];
	size_t stride = (size_t)gridDim.x * blockDim.x;
	double acc = 0.0;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		acc += (double)p[i] * (double)p[i];
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int w = BLOCK / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			s[threadIdx.x] += s[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s[0];
}

/* One thread folds the partials in block order. */
__global__ static void sumsq_fold_kernel(double *out, const double *partial, int n)
{
	double acc = 0.0;

	for (int i = 0; i < n; i++)
		acc += partial[i];
	*out = acc;
}

double cuda_sumsq(const float *p, size_t n)
{
	double *partial = (double *)cuda_scratch(SCRATCH_SUMSQ, (SUMSQ_BLOCKS + 1) * sizeof(double));
	double result = 0.0;

	if (!n)
		return 0.0;
	sumsq_partial_kernel<<<SUMSQ_BLOCKS, BLOCK>>>(partial, p, n);
	LAUNCHED("sumsq");
	sumsq_fold_kernel<<<1, 1>>>(partial + SUMSQ_BLOCKS, partial, SUMSQ_BLOCKS);
	LAUNCHED("sumsq fold");
	cuda_download(&result, partial + SUMSQ_BLOCKS, sizeof result);
	return result;
}

/*
 * Column sums of x (N, C): block (cx, r) takes 32 columns and the rows of
 * chunk r (ROWS_PER_CHUNK rows); its 32 x 8 threads each sum every 8th row
 * of the chunk for one column, then the 8 partial sums are added in order.
 * Reads are coalesced (32 consecutive columns per row).
 */
__global__ static void column_partial_kernel(float *partial, const float *x, int N, int C)
{
	__shared__ float s[COL_LANES][COL_TILE];
	int c = blockIdx.x * COL_TILE + threadIdx.x;
	int r0 = blockIdx.y * ROWS_PER_CHUNK, r1 = min(N, r0 + ROWS_PER_CHUNK);
	float acc = 0.0f;

	if (c < C)
		for (int r = r0 + threadIdx.y; r < r1; r += COL_LANES)
			acc += x[(size_t)r * C + c];
	s[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		float sum = 0.0f;

		for (int k = 0; k < COL_LANES; k++)
			sum += s[k][threadIdx.x];
		partial[(size_t)blockIdx.y * C + c] = sum;
	}
}

__global__ static void column_fold_kernel(float *out, const float *partial, int chunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < C) {
		float sum = 0.0f;

		for (int k = 0; k < chunks; k++)
			sum += partial[(size_t)k * C + c];
		out[c] += sum;
	}
}

void cuda_column_fold(float *out, const float *partial, int chunks, int C)
{
	column_fold_kernel<<<grid_for((size_t)C), BLOCK>>>(out, partial, chunks, C);
	LAUNCHED("column sums fold");
}

void cuda_column_sums(float *out, const float *x, int N, int C)
{
	int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
	float *partial = (float *)cuda_scratch(SCRATCH_COLS, (size_t)chunks * C * sizeof(float));
	dim3 grid((C + COL_TILE - 1) / COL_TILE, chunks), block(COL_TILE, COL_LANES);

	if (N <= 0 || C <= 0)
		return;
	column_partial_kernel<<<grid, block>>>(partial, x, N, C);
	LAUNCHED("column sums");
	cuda_column_fold(out, partial, chunks, C);
}
