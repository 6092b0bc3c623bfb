/*
 * kernels/cpu/attention.c - causal self-attention, per-head sgemm calls on
 * blocks of query rows (CPU backend).
 *
 * Neither pass keeps the T x T matrix of softmax weights. The forward pass
 * works through each (batch, head) pair one block of ATT_ROWS query rows at
 * a time: the block's scores against the keys it may see, a softmax per row,
 * and the block's output; only each row's max and exp-sum (ops.h's stats)
 * survive it. The backward pass computes the block's scores again and turns
 * them into the same weights with the same formula (math_attention_weight).
 * A block of rows [t0, t1) sees keys [0, t1), so the products never touch
 * the masked blocks above the diagonal: half the arithmetic of the full
 * T x T products, and a scratch of ATT_ROWS x T floats per thread instead of
 * B*NH*T*T floats per layer.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <cblas.h>
#include <float.h>

/* Query rows per block: large enough for sgemm to run at speed, small enough to stay in cache. */
#define ATT_ROWS 64

struct att_args {
	float *out, *stats, *dqkv;
	const float *qkv, *dout, *cstats;
	int B, T, NH, HS;
};

/* One (batch, head) pair's q, k, v: strided views into qkv (B, T, 3, NH, HS). */
struct att_head {
	const float *q, *k, *v;
	size_t off; /* offset of q in qkv (and of dq in dqkv) */
	int T, HS, C, C3;
	float scale;
};

static struct att_head att_head_at(const struct att_args *a, int b, int h)
{
	struct att_head x = { .T = a->T, .HS = a->HS, .C = a->NH * a->HS };

	x.C3 = 3 * x.C;
	x.off = (size_t)b * x.T * x.C3 + (size_t)h * x.HS;
	x.q = a->qkv + x.off;
	x.k = x.q + x.C;
	x.v = x.q + 2 * x.C;
	x.scale = 1.0f / sqrtf((float)x.HS);
	return x;
}

/* s (rows t0..t1-1, keys 0..t1-1, leading dimension t1) = q k^T / sqrt(HS). */
static void att_scores(const struct att_head *x, float *s, int t0, int t1)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, t1, x->HS, x->scale,
		    x->q + (size_t)t0 * x->C3, x->C3, x->k, x->C3, 0.0f, s, t1);
}

/*
 * Row t of a block of scores (t1 columns) into softmax weights in place,
 * its max and exp-sum into st (the forward pass). Each exponential is
 * computed once and kept in the row, then divided by the sum: the very
 * bits math_attention_weight gives the backward pass, exp(s - max) / sum.
 */
SIMD_CLONES
static void att_row_softmax(float *restrict row, int t, int t1, float *restrict st)
{
	float max = -FLT_MAX, sum = 0.0f;

	for (int u = 0; u <= t; u++)
		max = row[u] > max ? row[u] : max;
	for (int u = 0; u <= t; u++)
		row[u] = math_softmax_exp(row[u], max);
	for (int u = 0; u <= t; u++)
		sum += row[u];
	for (int u = 0; u <= t; u++)
		row[u] = row[u] / sum;
	for (int u = t + 1; u < t1; u++)
		row[u] = 0.0f;
	st[0] = max;
	st[1] = sum;
}

/* The same from the row's kept max and exp-sum (the backward pass). */
SIMD_CLONES
static void att_row_weights(float *row, int t, int t1, const float *st)
{
	float max = st[0], sum = st[1]; /* in registers: row might be st, for all gcc knows */

	for (int u = 0; u <= t; u++)
		row[u] = math_attention_weight(row[u], max, sum);
	for (int u = t + 1; u < t1; u++)
		row[u] = 0.0f;
}

/* Row t of the weights' gradients dp into the scores' gradients in place (softmax backward). */
SIMD_CLONES
static void att_row_dscores(float *restrict dp, const float *restrict p, int t, int t1,
			    float scale)
{
	float dot = 0.0f;

	for (int u = 0; u <= t; u++)
		dot += p[u] * dp[u];
	for (int u = 0; u <= t; u++)
		dp[u] = math_attention_dscore(p[u], dp[u], dot, scale);
	for (int u = t + 1; u < t1; u++)
		dp[u] = 0.0f;
}

static void att_forward_head(struct att_args *a, int b, int h, float *p)
{
	struct att_head x = att_head_at(a, b, h);
	float *stats = a->stats + ((size_t)b * a->NH + h) * x.T * OPS_ATT_STATS;
	float *out = a->out + (size_t)b * x.T * x.C + (size_t)h * x.HS;

	for (int t0 = 0; t0 < x.T; t0 += ATT_ROWS) {
		int t1 = t0 + ATT_ROWS < x.T ? t0 + ATT_ROWS : x.T;

		att_scores(&x, p, t0, t1);
		for (int t = t0; t < t1; t++)
			att_row_softmax(p + (size_t)(t - t0) * t1, t, t1, stats + t * OPS_ATT_STATS);
		/* out rows t0..t1-1 = p v[0..t1) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t1 - t0, x.HS, t1, 1.0f, p, t1,
			    x.v, x.C3, 0.0f, out + (size_t)t0 * x.C, x.C);
	}
}

/* Scratch for one thread: a block of weights and, backward, a block of their gradients. */
static float *att_scratch(int T, int blocks)
{
	float *p = malloc(sizeof(float) * (size_t)ATT_ROWS * T * blocks);

	if (!p)
		abort(); /* ATT_ROWS*T floats: out of memory here means the machine is unusable */
	return p;
}

static void att_forward_part(void *v, int block, int count)
{
	struct att_args *a = v;
	float *p = att_scratch(a->T, 1);
	int lo, hi;

	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_forward_head(a, bh / a->NH, bh % a->NH, p);
	free(p);
}

void cpu_attention_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
			   int HS)
{
	struct att_args a = { .out = out, .stats = stats, .qkv = qkv, .B = B, .T = T, .NH = NH,
			      .HS = HS };

	parallel_for(B * NH, threads_for(2.0 * B * NH * T * T * HS), att_forward_part, &a);
}

/*
 * Backward of one (batch, head) pair, block by block of query rows, with p
 * the block's weights (computed again) and dp their gradients:
 *   dp = dout v^T,  dv += p^T dout,
 *   ds = p * (dp - rowsum(p * dp)) / sqrt(HS)   (softmax backward),
 *   dq += ds k,  dk += ds^T q.
 * Each pair is one thread's, so the += into dk and dv need no locking.
 */
static void att_backward_head(struct att_args *a, int b, int h, float *p, float *dp)
{
	struct att_head x = att_head_at(a, b, h);
	const float *stats = a->cstats + ((size_t)b * a->NH + h) * x.T * OPS_ATT_STATS;
	const float *dout = a->dout + (size_t)b * x.T * x.C + (size_t)h * x.HS;
	float *dq = a->dqkv + x.off, *dk = dq + x.C, *dv = dq + 2 * x.C;

	for (int t0 = 0; t0 < x.T; t0 += ATT_ROWS) {
		int t1 = t0 + ATT_ROWS < x.T ? t0 + ATT_ROWS : x.T, n = t1 - t0;
		const float *dout0 = dout + (size_t)t0 * x.C;

		att_scores(&x, p, t0, t1);
		for (int t = t0; t < t1; t++)
			att_row_weights(p + (size_t)(t - t0) * t1, t, t1, stats + t * OPS_ATT_STATS);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, t1, x.HS, 1.0f, dout0, x.C,
			    x.v, x.C3, 0.0f, dp, t1);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t1, x.HS, n, 1.0f, p, t1, dout0,
			    x.C, 1.0f, dv, x.C3);
		for (int t = t0; t < t1; t++)
			att_row_dscores(dp + (size_t)(t - t0) * t1, p + (size_t)(t - t0) * t1, t, t1,
					x.scale);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, x.HS, t1, 1.0f, dp, t1, x.k,
			    x.C3, 1.0f, dq + (size_t)t0 * x.C3, x.C3);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t1, x.HS, n, 1.0f, dp, t1,
			    x.q + (size_t)t0 * x.C3, x.C3, 1.0f, dk, x.C3);
	}
}

static void att_backward_part(void *v, int block, int count)
{
	struct att_args *a = v;
	float *p = att_scratch(a->T, 2), *dp = p + (size_t)ATT_ROWS * a->T;
	int lo, hi;

	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_backward_head(a, bh / a->NH, bh % a->NH, p, dp);
	free(p);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *stats,
			    int B, int T, int NH, int HS)
{
	struct att_args a = { .dqkv = dqkv, .dout = dout, .qkv = qkv, .cstats = stats, .B = B,
			      .T = T, .NH = NH, .HS = HS };

	parallel_for(B * NH, threads_for(5.0 * B * NH * T * T * HS), att_backward_part, &a);
}
