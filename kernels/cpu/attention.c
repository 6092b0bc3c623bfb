/*
 * kernels/cpu/attention.c - causal self-attention, per-head sgemm calls
 * (CPU backend).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <cblas.h>
#include <float.h>

struct att_args {
	float *out, *att, *dqkv;
	const float *qkv, *dout, *catt;
	int B, T, NH, HS;
};

/*
 * One (batch, head) pair: scores = Q K^T / sqrt(HS) with a causal mask, a
 * softmax per row, then out = att V. Q, K, V are strided views into qkv.
 */
static void att_forward_head(struct att_args *a, int b, int h)
{
	int T = a->T, HS = a->HS, C = a->NH * HS, C3 = 3 * C;
	const float *q = a->qkv + (size_t)b * T * C3 + (size_t)h * HS;
	const float *k = q + C, *v = q + 2 * C;
	float *att = a->att + ((size_t)b * a->NH + h) * T * T;
	float *out = a->out + (size_t)b * T * C + (size_t)h * HS;
	float scale = 1.0f / sqrtf((float)HS);

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, q, C3, k, C3, 0.0f,
		    att, T);
	for (int t = 0; t < T; t++) {
		float *row = att + (size_t)t * T, max = -FLT_MAX, sum = 0.0f;

		for (int t2 = 0; t2 <= t; t2++)
			max = row[t2] > max ? row[t2] : max;
		for (int t2 = 0; t2 <= t; t2++) {
			row[t2] = math_softmax_exp(row[t2], max);
			sum += row[t2];
		}
		for (int t2 = 0; t2 <= t; t2++)
			row[t2] /= sum;
		for (int t2 = t + 1; t2 < T; t2++)
			row[t2] = 0.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, att, T, v, C3, 0.0f,
		    out, C);
}

static void att_forward_part(void *p, int block, int count)
{
	struct att_args *a = p;
	int lo, hi;

	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_forward_head(a, bh / a->NH, bh % a->NH);
}

void cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH,
			      int HS)
{
	struct att_args a = { .out = out, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH,
			      .HS = HS };

	parallel_for(B * NH, threads_for(4.0 * B * NH * T * T * HS), att_forward_part, &a);
}

/*
 * Backward of one (batch, head) pair, with datt a (T, T) scratch:
 *   datt = dout V^T,  dV += att^T dout,
 *   dpre = att * (datt - rowsum(att * datt)) / sqrt(HS)   (softmax backward),
 *   dQ += dpre K,  dK += dpre^T Q.
 */
static void att_backward_head(struct att_args *a, int b, int h, float *datt)
{
	int T = a->T, HS = a->HS, C = a->NH * HS, C3 = 3 * C;
	size_t qoff = (size_t)b * T * C3 + (size_t)h * HS;
	const float *q = a->qkv + qoff, *k = q + C, *v = q + 2 * C;
	float *dq = a->dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
	const float *att = a->catt + ((size_t)b * a->NH + h) * T * T;
	const float *dout = a->dout + (size_t)b * T * C + (size_t)h * HS;
	float scale = 1.0f / sqrtf((float)HS);

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, 1.0f, dout, C, v, C3, 0.0f,
		    datt, T);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, att, T, dout, C, 1.0f,
		    dv, C3);
	for (int t = 0; t < T; t++) {
		const float *arow = att + (size_t)t * T;
		float *drow = datt + (size_t)t * T, dot = 0.0f;

		for (int t2 = 0; t2 <= t; t2++)
			dot += arow[t2] * drow[t2];
		for (int t2 = 0; t2 <= t; t2++)
			drow[t2] = arow[t2] * (drow[t2] - dot) * scale;
		for (int t2 = t + 1; t2 < T; t2++)
			drow[t2] = 0.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, datt, T, k, C3, 1.0f,
		    dq, C3);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, datt, T, q, C3, 1.0f,
		    dk, C3);
}

static void att_backward_part(void *p, int block, int count)
{
	struct att_args *a = p;
	float *datt = malloc(sizeof(float) * (size_t)a->T * a->T);
	int lo, hi;

	if (!datt)
		abort(); /* T*T floats: out of memory here means the machine is unusable */
	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_backward_head(a, bh / a->NH, bh % a->NH, datt);
	free(datt);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
			       int B, int T, int NH, int HS)
{
	struct att_args a = { .dqkv = dqkv, .dout = dout, .qkv = qkv, .catt = att, .B = B, .T = T,
			      .NH = NH, .HS = HS };

	parallel_for(B * NH, threads_for(8.0 * B * NH * T * T * HS), att_backward_part, &a);
}
