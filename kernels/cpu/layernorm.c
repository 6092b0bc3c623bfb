/*
 * kernels/cpu/layernorm.c - LayerNorm forward and backward, and the
 * forward fused with the residual add before it (CPU backend).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#define LN_EPS 1e-5f

/* Sum of x[0..n) in SUM_LANES interleaved partial sums, added up in a fixed order. */

/* Sum of (x[c] - m)^2 over the row, as sum_lanes. */
static inline float sum_sq_dev(const float *x, float m, int n)
{
	float acc[SUM_LANES] = { 0 }, s = 0.0f;
	int i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += (x[i + j] - m) * (x[i + j] - m);
	for (; i < n; i++)
		acc[i % SUM_LANES] += (x[i] - m) * (x[i] - m);
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

/* LayerNorm of row r of a->inp (C floats) into a->out, its statistics saved. */
static inline void layernorm_row(struct rows_args *a, int r)
{
	int C = a->C;
	const float *x = a->inp + (size_t)r * C;
	float *o = a->out + (size_t)r * C;
	float m = sum_lanes(x, C) / C;
	float s = math_ln_rstd(sum_sq_dev(x, m, C) / C, LN_EPS);

	for (int c = 0; c < C; c++)
		o[c] = math_ln_apply(x[c], m, s, a->weight[c], a->bias[c]);
	a->mean[r] = m;
	a->rstd[r] = s;
}

SIMD_CLONES
static void layernorm_forward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi;

	split_range(a->N, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++)
		layernorm_row(a, r);
}

/* Each row's residual add first (the add of residual_forward), then its LayerNorm. */
SIMD_CLONES
static void residual_layernorm_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->N, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *res = a->res + (size_t)r * C;
		const float *x = a->res_a + (size_t)r * C, *y = a->res_b + (size_t)r * C;

		for (int c = 0; c < C; c++)
			res[c] = x[c] + y[c];
		layernorm_row(a, r);
	}
}

void cpu_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
				    const float *x, const float *y, const float *weight,
				    const float *bias, int N, int C)
{
	struct rows_args a = { .out = out, .mean = mean, .rstd = rstd, .inp = res, .res = res,
			       .res_a = x, .res_b = y, .weight = weight, .bias = bias, .N = N,
			       .C = C };

	parallel_for(blocks_of(N, ROW_BLOCK), threads_for(9.0 * N * C), residual_layernorm_part,
		     &a);
}

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			      const float *weight, const float *bias, int N, int C)
{
	struct rows_args a = { .out = out, .mean = mean, .rstd = rstd, .inp = inp,
			       .weight = weight, .bias = bias, .N = N, .C = C };

	parallel_for(blocks_of(N, ROW_BLOCK), threads_for(8.0 * N * C), layernorm_forward_part, &a);
}

/*
 * Two independent passes over the rows: dinp by row (each row needs its own
 * two sums), then dweight and dbias by channel (each a sum over all rows, in
 * row order). Neither reads what the other writes, so no barrier between.
 */
/* dinp of rows [lo, hi). */
SIMD_CLONES
static void ln_backward_rows(struct rows_args *a, int lo, int hi)
{
	float dn[SUM_LANES], dnx[SUM_LANES];
	int C = a->C;

	for (int r = lo; r < hi; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float *dx = a->dinp + (size_t)r * C;
		float m = a->cmean[r], s = a->crstd[r], dnorm_mean = 0.0f, dnorm_x_mean = 0.0f;
		int c = 0;

		for (int j = 0; j < SUM_LANES; j++)
			dn[j] = dnx[j] = 0.0f;
		for (; c + SUM_LANES <= C; c += SUM_LANES) {
			for (int j = 0; j < SUM_LANES; j++) {
				float wd = a->weight[c + j] * d[c + j];

				dn[j] += wd;
				dnx[j] += wd * ((x[c + j] - m) * s);
			}
		}
		for (; c < C; c++) {
			float wd = a->weight[c] * d[c];

			dn[c % SUM_LANES] += wd;
			dnx[c % SUM_LANES] += wd * ((x[c] - m) * s);
		}
		for (int j = 0; j < SUM_LANES; j++) {
			dnorm_mean += dn[j];
			dnorm_x_mean += dnx[j];
		}
		dnorm_mean /= C;
		dnorm_x_mean /= C;
		for (c = 0; c < C; c++)
			dx[c] += math_ln_dx(d[c], a->weight[c], (x[c] - m) * s, s, dnorm_mean,
					    dnorm_x_mean);
	}
}

/* dweight and dbias of channels [lo, hi): sums over all rows in row order. */
SIMD_CLONES
static void ln_backward_channels(struct rows_args *a, int lo, int hi)
{
	int C = a->C;

	for (int r = 0; r < a->N; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float m = a->cmean[r], s = a->crstd[r];

		for (int c = lo; c < hi; c++) {
			a->dbias[c] += d[c];
			a->dweight[c] += (x[c] - m) * s * d[c];
		}
	}
}

static void layernorm_backward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi;

	(void)count;
	if (block < a->row_blocks) {
		split_range(a->N, ROW_BLOCK, block, a->row_blocks, &lo, &hi);
		ln_backward_rows(a, lo, hi);
	} else {
		split_range(a->C, 16, block - a->row_blocks, a->channel_blocks, &lo, &hi);
		ln_backward_channels(a, lo, hi);
	}
}

void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			       const float *inp, const float *weight, const float *mean,
			       const float *rstd, int N, int C)
{
	struct rows_args a = { .dinp = dinp, .dweight = dweight, .dbias = dbias, .dout = dout,
			       .inp = inp, .weight = weight, .cmean = mean, .crstd = rstd, .N = N,
			       .C = C, .row_blocks = blocks_of(N, ROW_BLOCK),
			       .channel_blocks = blocks_of(C, 64) };

	parallel_for(a.row_blocks + a.channel_blocks, threads_for(12.0 * N * C),
		     layernorm_backward_part, &a);
}
