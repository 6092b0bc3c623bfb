/*
 * daemon/tensor_parallel.c - see tensor_parallel.h.
 *
 * The per-row loops here are the vocabulary-parallel versions of the
 * encoder and softmax kernels (kernels/cpu), written with the same
 * formulas of kernels/math.h so that a tensor-parallel run follows the
 * whole-model run within rounding: only the order of a few sums differs.
 */
#include "config.h"
#include "daemon/tensor_parallel.h"

#include "daemon/model.h"
#include "kernels/math.h"
#include "lib/comm/comm.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The collective failed: say so in the model's error (the world is aborted). */
static int tp_failed(struct gpt2 *m, const char *what, int rc)
{
	snprintf(m->err, sizeof m->err, "tensor-parallel %s failed: %s", what,
		 rc == COMM_EABORTED ? comm_abort_reason(m->shard.tp) : comm_strerror(rc));
	return -1;
}

int tp_allreduce(struct gpt2 *m, float *buf, size_t n)
{
	int rc;

	if (m->shard.tp_size == 1 || !m->shard.tp)
		return 0;
	rc = comm_allreduce(m->shard.tp, buf, n, COMM_FLOAT32, COMM_SUM);
	return rc ? tp_failed(m, "all-reduce", rc) : 0;
}

/* This rank's vocabulary rows [*v0, *v0 + *vn). */
static void vocab_slice(const struct gpt2 *m, int *v0, int *vn)
{
	*vn = m->config.padded_vocab_size / m->shard.tp_size;
	*v0 = m->shard.tp_rank * *vn;
}

int tp_encoder_forward(struct gpt2 *m, float *out, const int *inp, int B, int T)
{
	const float *wte = m->tensors[GPT2_WTE];
	const float *wpe = m->sizes[GPT2_WPE] ? m->tensors[GPT2_WPE] : NULL; /* NULL: rotary positions */
	int C = m->config.channels, v0, vn;

	vocab_slice(m, &v0, &vn);
	for (int n = 0; n < B * T; n++) {
		float *o = out + (size_t)n * C;
		int v = inp[n] - v0;

		if (v >= 0 && v < vn)
			memcpy(o, wte + (size_t)v * C, C * sizeof(float));
		else
			memset(o, 0, C * sizeof(float));
	}
	/* exactly one rank contributes each row: the sum is that row, bit for bit */
	if (tp_allreduce(m, out, (size_t)B * T * C))
		return -1;
	for (int n = 0; wpe && n < B * T; n++) {
		float *o = out + (size_t)n * C;
		const float *p = wpe + (size_t)(n % T) * C;

		for (int i = 0; i < C; i++)
			o[i] += p[i];
	}
	return 0;
}

void tp_encoder_backward(struct gpt2 *m, float *dwte, float *dwpe, const float *dout,
			 const int *inp, int B, int T)
{
	int C = m->config.channels, v0, vn;

	vocab_slice(m, &v0, &vn);
	for (int n = 0; n < B * T; n++) {
		const float *d = dout + (size_t)n * C;
		float *dp = dwpe ? dwpe + (size_t)(n % T) * C : NULL;
		int v = inp[n] - v0;

		if (v >= 0 && v < vn) {
			float *dw = dwte + (size_t)v * C;

			for (int i = 0; i < C; i++)
				dw[i] += d[i];
		}
		for (int i = 0; dp && i < C; i++)
			dp[i] += d[i];
	}
}

/* Columns of this rank's slice that are real tokens (the rest is padding). */
static int valid_columns(const struct gpt2 *m, int v0, int vn)
{
	int V = m->config.vocab_size;

	return V <= v0 ? 0 : V - v0 < vn ? V - v0 : vn;
}

int tp_softmax_xent_forward(struct gpt2 *m, float *losses, float *logits, const int *targets,
			    int N)
{
	int v0, vn, nv;
	float *mx = malloc(2 * (size_t)N * sizeof *mx), *sum = mx + N;
	int rc = -1;

	if (!mx) {
		snprintf(m->err, sizeof m->err, "out of memory for the softmax");
		return -1;
	}
	vocab_slice(m, &v0, &vn);
	nv = valid_columns(m, v0, vn);
	for (int r = 0; r < N; r++) {
		const float *row = logits + (size_t)r * vn;
		float x = -FLT_MAX;

		for (int v = 0; v < nv; v++)
			x = row[v] > x ? row[v] : x;
		mx[r] = x;
	}
	if ((rc = comm_allreduce(m->shard.tp, mx, (size_t)N, COMM_FLOAT32, COMM_MAX))) {
		rc = tp_failed(m, "softmax max", rc);
		goto out;
	}
	for (int r = 0; r < N; r++) {
		float *row = logits + (size_t)r * vn;
		double s = 0.0;

		for (int v = 0; v < nv; v++) {
			row[v] = math_softmax_exp(row[v], mx[r]);
			s += row[v];
		}
		sum[r] = (float)s;
	}
	if ((rc = comm_allreduce(m->shard.tp, sum, (size_t)N, COMM_FLOAT32, COMM_SUM))) {
		rc = tp_failed(m, "softmax sum", rc);
		goto out;
	}
	for (int r = 0; r < N; r++) {
		float *row = logits + (size_t)r * vn;

		for (int v = 0; v < nv; v++)
			row[v] /= sum[r];
		for (int v = nv; v < vn; v++)
			row[v] = 0.0f;
	}
	rc = 0;
	if (!targets)
		goto out;
	/* the rank holding a row's target knows its loss; the others add 0 */
	for (int r = 0; r < N; r++) {
		int v = targets[r] - v0;

		losses[r] = v >= 0 && v < nv ? -logf(logits[(size_t)r * vn + v]) : 0.0f;
	}
	if ((rc = comm_allreduce(m->shard.tp, losses, (size_t)N, COMM_FLOAT32, COMM_SUM)))
		rc = tp_failed(m, "loss", rc);
out:
	free(mx);
	return rc;
}

void tp_softmax_xent_backward(struct gpt2 *m, float *probs, const int *targets, float dloss, int N)
{
	int v0, vn, nv;

	vocab_slice(m, &v0, &vn);
	nv = valid_columns(m, v0, vn);
	for (int r = 0; r < N; r++) {
		float *row = probs + (size_t)r * vn;
		int target = targets[r] - v0;

		for (int v = 0; v < nv; v++)
			row[v] = math_xent_dlogit(row[v], v == target, dloss);
		for (int v = nv; v < vn; v++)
			row[v] = 0.0f;
	}
}
