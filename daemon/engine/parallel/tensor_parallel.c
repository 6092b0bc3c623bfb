/*
 * daemon/engine/parallel/tensor_parallel.c - see tensor_parallel.h.
 *
 * The per-row work is the backend's (kernels/ops.h: the vocab_ entries,
 * written with the formulas of the whole-vocabulary kernels), so that a
 * tensor-parallel run follows the whole-model run within rounding on
 * either device: only the order of a few sums differs. The collectives go
 * through the group's communicator, which takes device buffers on a GPU
 * (lib/comm/device.c).
 */
#include "config.h"
#include "daemon/engine/parallel/tensor_parallel.h"

#include "daemon/engine/model/model.h"
#include "kernels/ops.h"
#include "lib/comm/comm.h"

#include <stdio.h>

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
	const float *wpe = m->sizes[GPT2_WPE] ? m->tensors[GPT2_WPE] : NULL; /* NULL: rotary positions */
	int C = m->config.channels, v0, vn;

	vocab_slice(m, &v0, &vn);
	m->ops->vocab_encoder_forward(out, inp, m->tensors[GPT2_WTE], B * T, C, v0, vn);
	/* exactly one rank contributes each row: the sum is that row, bit for bit */
	if (tp_allreduce(m, out, (size_t)B * T * C))
		return -1;
	for (int b = 0; wpe && b < B; b++) {
		float *o = out + (size_t)b * T * C;

		m->ops->residual_forward(o, o, wpe, (size_t)T * C);
	}
	return 0;
}

void tp_encoder_backward(struct gpt2 *m, float *dwte, float *dwpe, const float *dout,
			 const int *inp, int B, int T)
{
	int v0, vn;

	vocab_slice(m, &v0, &vn);
	m->ops->vocab_encoder_backward(dwte, dwpe, dout, inp, B, T, m->config.channels, v0, vn);
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
	const struct ops *o = m->ops;
	float *mx = m->acts.vocab_rows, *sum = mx + N;
	int v0, vn, nv, rc;

	vocab_slice(m, &v0, &vn);
	nv = valid_columns(m, v0, vn);
	o->vocab_softmax_max(mx, logits, N, nv, vn);
	if ((rc = comm_allreduce(m->shard.tp, mx, (size_t)N, COMM_FLOAT32, COMM_MAX)))
		return tp_failed(m, "softmax max", rc);
	o->vocab_softmax_exp(logits, sum, mx, N, nv, vn);
	if ((rc = comm_allreduce(m->shard.tp, sum, (size_t)N, COMM_FLOAT32, COMM_SUM)))
		return tp_failed(m, "softmax sum", rc);
	o->vocab_softmax_finish(losses, logits, sum, targets, N, nv, vn, v0);
	/* the rank holding a row's target knows its loss; the others add 0 */
	if (targets &&
	    (rc = comm_allreduce(m->shard.tp, losses, (size_t)N, COMM_FLOAT32, COMM_SUM)))
		return tp_failed(m, "loss", rc);
	return 0;
}

void tp_softmax_xent_backward(struct gpt2 *m, float *probs, const int *targets, float dloss, int N)
{
	int v0, vn;

	vocab_slice(m, &v0, &vn);
	m->ops->vocab_xent_backward(probs, targets, dloss, N, valid_columns(m, v0, vn), vn, v0);
}
