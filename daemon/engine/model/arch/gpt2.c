/*
 * daemon/engine/model/arch/gpt2.c - GPT-2 (llm.c's train_gpt2.c): learned position
 * embedding, pre-LayerNorm blocks of causal self-attention and a tanh-GELU
 * MLP of width 4C, biases everywhere, the LM head tied to the token
 * embedding.
 *
 * Two differences from llm.c, both for memory: the outputs of the
 * attention and MLP projections are written straight into the residual
 * stream (the backward pass does not need them), and the backward pass
 * keeps one set of activation-gradient buffers that every layer reuses.
 * The gradient of the residual stream lives in one buffer (dres) that the
 * two LayerNorm backwards of a block add into: the residual connections
 * pass it through unchanged.
 */
#include "config.h"
#include "daemon/engine/model/arch/arch.h"
#include "daemon/engine/parallel/tensor_parallel.h"

#include <math.h>

static size_t gpt2_chunk(const struct gpt2_config *c, int t)
{
	size_t C = (size_t)c->channels;

	switch (t) {
	case GPT2_WTE: return (size_t)c->padded_vocab_size * C;
	case GPT2_WPE: return (size_t)c->max_seq_len * C;
	case GPT2_QKVW: return 3 * C * C;
	case GPT2_QKVB: return 3 * C;
	case GPT2_ATTPROJW: return C * C;
	case GPT2_FCW: return 4 * C * C;
	case GPT2_FCB: return 4 * C;
	case GPT2_FCPROJW: return C * 4 * C;
	case GPT2_LMHEAD: return 0; /* tied */
	default: return C; /* LayerNorm weights and biases, projection biases */
	}
}

/*
 * Rows of wte (vocabulary), fcw and fcb (column-parallel); rows of each of
 * q, k and v in qkvw and qkvb (whole heads); the input columns of every
 * output row of attprojw and fcprojw (row-parallel).
 */
static void gpt2_split(const struct gpt2_config *c, int t, struct tp_split *s)
{
	size_t C = (size_t)c->channels;

	*s = (struct tp_split){ .repeat = 1 };
	switch (t) {
	case GPT2_WTE: case GPT2_FCW: case GPT2_FCB:
		s->nseg = 1;
		s->seg[0] = gpt2_chunk(c, t);
		break;
	case GPT2_QKVW: case GPT2_QKVB:
		s->nseg = 3;
		s->seg[0] = s->seg[1] = s->seg[2] = gpt2_chunk(c, t) / 3;
		break;
	case GPT2_ATTPROJW: case GPT2_FCPROJW:
		s->repeat = C;
		s->nseg = 1;
		s->seg[0] = gpt2_chunk(c, t) / C;
		break;
	default:
		break;
	}
}

/* N(0, 0.02), the two residual projections N(0, 0.02/sqrt(2L)) (GPT-2's paper). */
static float gpt2_init_std(const struct gpt2_config *c, int t)
{
	if (t == GPT2_ATTPROJW || t == GPT2_FCPROJW)
		return 0.02f / sqrtf(2.0f * c->num_layers);
	return 0.02f;
}

static int gpt2_check(const struct gpt2_config *c, int tp_size, char *err, size_t errlen)
{
	(void)c;
	(void)tp_size;
	(void)err;
	(void)errlen;
	return 0;
}

static int gpt2_prepare(struct gpt2 *m, int B, int T)
{
	(void)m;
	(void)B;
	(void)T;
	return 0;
}

/*
 * One block: x -> res2 = x + attproj(attention(qkv(ln1(x))))
 *              -> res3 = res2 + fcproj(gelu(fc(ln2(res2)))).
 * Under tensor parallelism the shard computes its heads and its fc
 * columns; the two projections give partial sums that project_out adds
 * (Megatron's g operator) before the residual.
 */
static int gpt2_block_forward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_w w = block_params(m, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int N = m->B * m->T, C = d.C;
	const float *x = layer_input(m, l);
	size_t NC = (size_t)N * C;

	o->layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, N, C);
	act_stored(m, a.ln1, NC);
	o->matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, d.qkv_oc);
	act_stored(m, a.qkv, (size_t)N * d.qkv_oc);
	attention_core_forward(m, &d, &a);
	act_stored(m, a.atty, (size_t)N * d.att_c);
	if (project_out(m, a.res2, a.atty, w.attprojw, w.attprojb, d.att_c))
		return -1;
	act_stored(m, a.res2, NC);
	/* bf16 activations: the sum is stored before the norm reads it, so the two run apart */
	if (m->fused && o->residual_layernorm_forward && !m->bf16_acts) {
		o->residual_layernorm_forward(a.res2, a.ln2, a.ln2_mean, a.ln2_rstd, x, a.res2,
					      w.ln2w, w.ln2b, N, C);
	} else {
		o->residual_forward(a.res2, x, a.res2, NC);
		act_stored(m, a.res2, NC);
		o->layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2w, w.ln2b, N, C);
	}
	act_stored(m, a.ln2, NC);
	o->matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, N, C, d.fc_oc);
	act_stored(m, a.fch, (size_t)N * d.fc_oc);
	o->gelu_forward(a.fch_gelu, a.fch, (size_t)N * d.fc_oc);
	act_stored(m, a.fch_gelu, (size_t)N * d.fc_oc);
	if (project_out(m, a.res3, a.fch_gelu, w.fcprojw, w.fcprojb, d.fc_oc))
		return -1;
	act_stored(m, a.res3, NC);
	o->residual_forward(a.res3, a.res2, a.res3, NC);
	act_stored(m, a.res3, NC);
	return 0;
}

static void gpt2_activation_again(struct gpt2 *m, int l)
{
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_a a = block_acts(m, &d, l);

	m->ops->gelu_forward(a.fch_gelu, a.fch, (size_t)m->B * m->T * d.fc_oc);
	act_stored(m, a.fch_gelu, (size_t)m->B * m->T * d.fc_oc);
}

/*
 * Backward of one block. On entry acts.dres is the gradient of the block's
 * output res3; on exit it is the gradient of its input x. Both LayerNorm
 * backwards add into dres: the residual connections pass gradients through.
 * Under tensor parallelism the gradients reaching each LayerNorm from the
 * shard's columns are partial sums: tp_allreduce adds them (the backward
 * of Megatron's f operator).
 */
static int gpt2_block_backward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct gpt2_acts *g = &m->acts;
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_w w = block_params(m, &d, l);
	struct block_w dw = block_grads(m, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int N = m->B * m->T, C = d.C;
	const float *x = layer_input(m, l);

	o->zero(g->dfch_gelu, (size_t)N * d.fc_oc);
	o->zero(g->dfch, (size_t)N * d.fc_oc);
	o->zero(g->dln, (size_t)N * C);
	o->zero(g->datty, (size_t)N * d.att_c);
	o->zero(g->dqkv, (size_t)N * d.qkv_oc);

	o->matmul_backward(g->dfch_gelu, dw.fcprojw, dw.fcprojb, g->dres, a.fch_gelu, w.fcprojw, N,
			   d.fc_oc, C);
	act_stored(m, g->dfch_gelu, (size_t)N * d.fc_oc);
	o->gelu_backward(g->dfch, a.fch, g->dfch_gelu, (size_t)N * d.fc_oc);
	act_stored(m, g->dfch, (size_t)N * d.fc_oc);
	o->matmul_backward(g->dln, dw.fcw, dw.fcb, g->dfch, a.ln2, w.fcw, N, C, d.fc_oc);
	if (tp_allreduce(m, g->dln, (size_t)N * C))
		return -1;
	act_stored(m, g->dln, (size_t)N * C);
	o->layernorm_backward(g->dres, dw.ln2w, dw.ln2b, g->dln, a.res2, w.ln2w, a.ln2_mean,
			      a.ln2_rstd, N, C);
	act_stored(m, g->dres, (size_t)N * C);
	o->zero(g->dln, (size_t)N * C);
	o->matmul_backward(g->datty, dw.attprojw, dw.attprojb, g->dres, a.atty, w.attprojw, N,
			   d.att_c, C);
	act_stored(m, g->datty, (size_t)N * d.att_c);
	attention_core_backward(m, &d, &a, g->dqkv, g->datty);
	act_stored(m, g->dqkv, (size_t)N * d.qkv_oc);
	o->matmul_backward(g->dln, dw.qkvw, dw.qkvb, g->dqkv, a.ln1, w.qkvw, N, C, d.qkv_oc);
	if (tp_allreduce(m, g->dln, (size_t)N * C))
		return -1;
	act_stored(m, g->dln, (size_t)N * C);
	o->layernorm_backward(g->dres, dw.ln1w, dw.ln1b, g->dln, x, w.ln1w, a.ln1_mean,
			      a.ln1_rstd, N, C);
	act_stored(m, g->dres, (size_t)N * C);
	return 0;
}

static void gpt2_final_norm_forward(struct gpt2 *m, const float *x)
{
	struct gpt2_acts *a = &m->acts;

	m->ops->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, m->tensors[GPT2_LNFW],
				  m->tensors[GPT2_LNFB], m->B * m->T, m->config.channels);
	act_stored(m, a->lnf, (size_t)m->B * m->T * m->config.channels);
}

static void gpt2_final_norm_backward(struct gpt2 *m, const float *x)
{
	struct gpt2_acts *a = &m->acts;

	m->ops->layernorm_backward(a->dres, m->grad_tensors[GPT2_LNFW], m->grad_tensors[GPT2_LNFB],
				   a->dlnf, x, m->tensors[GPT2_LNFW], a->lnf_mean, a->lnf_rstd,
				   m->B * m->T, m->config.channels);
	act_stored(m, a->dres, (size_t)m->B * m->T * m->config.channels);
}

const struct arch arch_gpt2 = {
	.name = "gpt2",
	.chunk = gpt2_chunk,
	.split = gpt2_split,
	.init_std = gpt2_init_std,
	.check = gpt2_check,
	.prepare = gpt2_prepare,
	.block_forward = gpt2_block_forward,
	.block_backward = gpt2_block_backward,
	.activation_again = gpt2_activation_again,
	.final_norm_forward = gpt2_final_norm_forward,
	.final_norm_backward = gpt2_final_norm_backward,
};
