/*
 * kernels/cpu/rmsnorm.c - RMSNorm forward and backward (Llama's norm; CPU
 * backend). Rows are cut as LayerNorm's (layernorm.c), and the sums keep
 * SUM_LANES partial sums, so the bits do not depend on the threads.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

/* Sum of x[c]^2 over the row, as sum_lanes. */
static inline float sum_sq(const float *x, int n)
{
	float acc[SUM_LANES] = { 0 }, s = 0.0f;
	int i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += x[i + j] * x[i + j];
	for (; i < n; i++)
		acc[i % SUM_LANES] += x[i] * x[i];
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

SIMD_CLONES
static void rmsnorm_forward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->N, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *x = a->inp + (size_t)r * C;
		float *o = a->out + (size_t)r * C;
		float s = math_rms_rstd(sum_sq(x, C) / C, a->eps);

		for (int c = 0; c < C; c++)
			o[c] = x[c] * s * a->weight[c];
		a->rstd[r] = s;
	}
}

void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N,
			 int C, float eps)
{
	struct rows_args a = { .out = out, .rstd = rstd, .inp = inp, .weight = weight, .N = N,
			       .C = C, .eps = eps };

	parallel_for(blocks_of(N, ROW_BLOCK), threads_for(5.0 * N * C), rmsnorm_forward_part, &a);
}

/* dinp of rows [lo, hi): each row needs its own sum. */
SIMD_CLONES
static void rms_backward_rows(struct rows_args *a, int lo, int hi)
{
	float dnx[SUM_LANES];
	int C = a->C;

	for (int r = lo; r < hi; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float *dx = a->dinp + (size_t)r * C;
		float s = a->crstd[r], dnorm_x_mean = 0.0f;
		int c = 0;

		for (int j = 0; j < SUM_LANES; j++)
			dnx[j] = 0.0f;
		for (; c + SUM_LANES <= C; c += SUM_LANES)
			for (int j = 0; j < SUM_LANES; j++)
				dnx[j] += a->weight[c + j] * d[c + j] * (x[c + j] * s);
		for (; c < C; c++)
			dnx[c % SUM_LANES] += a->weight[c] * d[c] * (x[c] * s);
		for (int j = 0; j < SUM_LANES; j++)
			dnorm_x_mean += dnx[j];
		dnorm_x_mean /= C;
		for (c = 0; c < C; c++)
			dx[c] += math_rms_dx(d[c], a->weight[c], x[c] * s, s, dnorm_x_mean);
	}
}

/* dweight of channels [lo, hi): sums over all rows in row order. */
SIMD_CLONES
static void rms_backward_channels(struct rows_args *a, int lo, int hi)
{
	int C = a->C;

	for (int r = 0; r < a->N; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float s = a->crstd[r];

		for (int c = lo; c < hi; c++)
			a->dweight[c] += x[c] * s * d[c];
	}
}

static void rmsnorm_backward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi;

	(void)count;
	if (block < a->row_blocks) {
		split_range(a->N, ROW_BLOCK, block, a->row_blocks, &lo, &hi);
		rms_backward_rows(a, lo, hi);
	} else {
		split_range(a->C, 16, block - a->row_blocks, a->channel_blocks, &lo, &hi);
		rms_backward_channels(a, lo, hi);
	}
}

void cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
			  const float *weight, const float *rstd, int N, int C)
{
	struct rows_args a = { .dinp = dinp, .dweight = dweight, .dout = dout, .inp = inp,
			       .weight = weight, .crstd = rstd, .N = N, .C = C,
			       .row_blocks = blocks_of(N, ROW_BLOCK),
			       .channel_blocks = blocks_of(C, 64) };

	parallel_for(a.row_blocks + a.channel_blocks, threads_for(9.0 * N * C),
		     rmsnorm_backward_part, &a);
}
