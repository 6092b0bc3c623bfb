/*
 * daemon/engine/model/arch/llama.c - the Llama family (Llama 2, 3, 3.1, 3.2 and the
 * models shaped like them), as transformers' modeling_llama computes it:
 * no position embedding but rotary positions on q and k (rope_theta, and
 * Llama 3.1's rope_scaling), pre-RMSNorm blocks of grouped-query causal
 * self-attention (KV key-value heads, each shared by NH/KV query heads)
 * and a SwiGLU MLP of width I (down(silu(gate(x)) * up(x))), no biases, a
 * final RMSNorm and an LM head of its own unless tie_word_embeddings.
 *
 * The attention itself is the kernels' multi-head attention: rope_forward
 * turns q and k and repeats each key-value head for its group into the
 * layout the attention kernels read, and its backward adds the group's
 * gradients back. Under tensor parallelism a rank holds whole groups
 * (NH/tp query heads with their KV/tp key-value heads) and I/tp of the
 * MLP: gate and up are split alike, so each rank's SwiGLU pairs its own
 * gate and up columns.
 */
#include "config.h"
#include "daemon/engine/model/arch/arch.h"
#include "daemon/engine/parallel/tensor_parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static size_t llama_chunk(const struct gpt2_config *c, int t)
{
	size_t C = (size_t)c->channels, HS = C / (size_t)c->num_heads;
	size_t KV = (size_t)model_kv_heads(c), I = (size_t)model_mlp_width(c);

	switch (t) {
	case GPT2_WTE: return (size_t)c->padded_vocab_size * C;
	case GPT2_LMHEAD: return c->untied ? (size_t)c->padded_vocab_size * C : 0;
	case GPT2_QKVW: return (C + 2 * KV * HS) * C;
	case GPT2_ATTPROJW: return C * C;
	case GPT2_FCW: return 2 * I * C;
	case GPT2_FCPROJW: return C * I;
	case GPT2_LN1W: case GPT2_LN2W: case GPT2_LNFW: return C;
	default: return 0; /* no position embedding, no biases */
	}
}

static void llama_split(const struct gpt2_config *c, int t, struct tp_split *s)
{
	size_t C = (size_t)c->channels, HS = C / (size_t)c->num_heads;
	size_t KV = (size_t)model_kv_heads(c), I = (size_t)model_mlp_width(c);

	*s = (struct tp_split){ .repeat = 1 };
	switch (t) {
	case GPT2_WTE: case GPT2_LMHEAD:
		s->nseg = 1;
		s->seg[0] = llama_chunk(c, t);
		break;
	case GPT2_QKVW: /* q rows, k rows, v rows: whole heads of whole groups */
		s->nseg = 3;
		s->seg[0] = C * C;
		s->seg[1] = s->seg[2] = KV * HS * C;
		break;
	case GPT2_FCW: /* gate rows, up rows */
		s->nseg = 2;
		s->seg[0] = s->seg[1] = I * C;
		break;
	case GPT2_ATTPROJW: case GPT2_FCPROJW: /* input columns of every output row */
		s->repeat = C;
		s->nseg = 1;
		s->seg[0] = llama_chunk(c, t) / C;
		break;
	default:
		break;
	}
}

/* transformers' initializer_range: N(0, 0.02) for every matrix. */
static float llama_init_std(const struct gpt2_config *c, int t)
{
	(void)c;
	(void)t;
	return 0.02f;
}

static int llama_check(const struct gpt2_config *c, int tp_size, char *err, size_t errlen)
{
	int KV = model_kv_heads(c), I = model_mlp_width(c), HS = c->channels / c->num_heads;

	if (KV <= 0 || c->num_heads % KV) {
		snprintf(err, errlen, "model kv_heads (%d) must divide heads (%d)", KV,
			 c->num_heads);
		return -1;
	}
	if (HS % 2) {
		snprintf(err, errlen,
			 "model channels / heads = %d: rotary positions need an even head size", HS);
		return -1;
	}
	if (I <= 0 || !(c->norm_eps > 0.0f) || !(c->rope_theta > 0.0f)) {
		snprintf(err, errlen,
			 "model intermediate_size (%d), rms_norm_eps (%g) and rope_theta (%g) must be "
			 "positive", I, (double)c->norm_eps, (double)c->rope_theta);
		return -1;
	}
	if (KV % tp_size || I % tp_size) {
		snprintf(err, errlen,
			 "%d tensor-parallel ranks cannot split %d key-value heads (groups of %d query "
			 "heads) and an MLP of %d evenly: parallel.tensor must divide %d%s", tp_size,
			 KV, c->num_heads / KV, I, KV,
			 I % tp_size ? " and the MLP width" : "");
		return -1;
	}
	return 0;
}

/*
 * Rotary frequencies, as transformers computes them: inv_freq[i] =
 * theta^(-2i/HS); with Llama 3.1's scaling, wavelengths longer than
 * original_max_positions / low_freq_factor are divided by factor, shorter
 * than original / high_freq_factor kept, and those between blended.
 */
void llama_inv_freq(const struct gpt2_config *c, int HS, float *inv)
{
	for (int i = 0; i < HS / 2; i++) {
		double f = 1.0 / pow((double)c->rope_theta, (2.0 * i) / HS);

		if (c->rope_factor > 0.0f) {
			double old = c->rope_original_max_positions, wavelen = 2.0 * M_PI / f;
			double lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;

			if (wavelen > old / lo) {
				f /= c->rope_factor;
			} else if (wavelen >= old / hi) {
				double smooth = (old / wavelen - lo) / (hi - lo);

				f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
			}
		}
		inv[i] = (float)f;
	}
}

/* The (T, HS/2, 2) table of cos and sin of t * inv_freq[i] (the angle a float product, as transformers'). */
static int llama_prepare(struct gpt2 *m, int B, int T)
{
	int HS = m->config.channels / m->config.num_heads;
	size_t n = (size_t)T * HS;
	float *host, *inv;

	(void)B;
	if (m->rope && m->rope_T == T)
		return 0;
	host = malloc(n * sizeof(float));
	inv = malloc((size_t)HS / 2 * sizeof(float));
	if (m->rope)
		m->ops->free(m->rope);
	m->rope = host && inv ? m->ops->alloc(n * sizeof(float)) : NULL;
	if (!m->rope) {
		free(host);
		free(inv);
		gpt2_oom_message(m->ops, "the rotary table", n * sizeof(float), m->err, sizeof m->err);
		return -2;
	}
	llama_inv_freq(&m->config, HS, inv);
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < HS / 2; i++) {
			float angle = (float)t * inv[i];

			host[(size_t)t * HS + 2 * i] = (float)cos((double)angle);
			host[(size_t)t * HS + 2 * i + 1] = (float)sin((double)angle);
		}
	}
	m->ops->upload(m->rope, host, n * sizeof(float));
	m->rope_T = T;
	free(host);
	free(inv);
	return 0;
}

/*
 * x -> res2 = x + o(attention(rope(qkv(rmsnorm1(x)))))
 *   -> res3 = res2 + down(swiglu(gate_up(rmsnorm2(res2)))).
 */
static int llama_block_forward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_w w = block_params(m, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int N = m->B * m->T, C = d.C;
	float eps = m->config.norm_eps;
	const float *x = layer_input(m, l);
	size_t NC = (size_t)N * C;

	o->rmsnorm_forward(a.ln1, a.ln1_rstd, x, w.ln1w, N, C, eps);
	act_stored(m, a.ln1, NC);
	o->matmul_forward(a.qkvr, a.ln1, w.qkvw, NULL, N, C, d.qkvr_oc);
	act_stored(m, a.qkvr, (size_t)N * d.qkvr_oc);
	o->rope_forward(a.qkv, a.qkvr, m->rope, m->B, m->T, d.NH, d.KV, d.HS);
	act_stored(m, a.qkv, (size_t)N * d.qkv_oc);
	attention_core_forward(m, &d, &a);
	act_stored(m, a.atty, (size_t)N * d.att_c);
	if (project_out(m, a.res2, a.atty, w.attprojw, NULL, d.att_c))
		return -1;
	act_stored(m, a.res2, NC);
	o->residual_forward(a.res2, x, a.res2, NC);
	act_stored(m, a.res2, NC);
	o->rmsnorm_forward(a.ln2, a.ln2_rstd, a.res2, w.ln2w, N, C, eps);
	act_stored(m, a.ln2, NC);
	o->matmul_forward(a.fch, a.ln2, w.fcw, NULL, N, C, d.fc_oc);
	act_stored(m, a.fch, (size_t)N * d.fc_oc);
	o->swiglu_forward(a.fch_gelu, a.fch, N, d.act_oc);
	act_stored(m, a.fch_gelu, (size_t)N * d.act_oc);
	if (project_out(m, a.res3, a.fch_gelu, w.fcprojw, NULL, d.act_oc))
		return -1;
	act_stored(m, a.res3, NC);
	o->residual_forward(a.res3, a.res2, a.res3, NC);
	act_stored(m, a.res3, NC);
	return 0;
}

static void llama_activation_again(struct gpt2 *m, int l)
{
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_a a = block_acts(m, &d, l);

	m->ops->swiglu_forward(a.fch_gelu, a.fch, m->B * m->T, d.act_oc);
	act_stored(m, a.fch_gelu, (size_t)m->B * m->T * d.act_oc);
}

/* As GPT-2's backward (gpt2.c), with rope_backward between the attention and the projection. */
static int llama_block_backward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct gpt2_acts *g = &m->acts;
	struct block_dims d = block_dims(&m->config, &m->shard);
	struct block_w w = block_params(m, &d, l);
	struct block_w dw = block_grads(m, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int N = m->B * m->T, C = d.C;
	const float *x = layer_input(m, l);

	o->zero(g->dfch_gelu, (size_t)N * d.act_oc);
	o->zero(g->dfch, (size_t)N * d.fc_oc);
	o->zero(g->dln, (size_t)N * C);
	o->zero(g->datty, (size_t)N * d.att_c);
	o->zero(g->dqkv, (size_t)N * d.qkv_oc);
	o->zero(g->dqkvr, (size_t)N * d.qkvr_oc);

	o->matmul_backward(g->dfch_gelu, dw.fcprojw, NULL, g->dres, a.fch_gelu, w.fcprojw, N,
			   d.act_oc, C);
	act_stored(m, g->dfch_gelu, (size_t)N * d.act_oc);
	o->swiglu_backward(g->dfch, a.fch, g->dfch_gelu, N, d.act_oc);
	act_stored(m, g->dfch, (size_t)N * d.fc_oc);
	o->matmul_backward(g->dln, dw.fcw, NULL, g->dfch, a.ln2, w.fcw, N, C, d.fc_oc);
	if (tp_allreduce(m, g->dln, (size_t)N * C))
		return -1;
	act_stored(m, g->dln, (size_t)N * C);
	o->rmsnorm_backward(g->dres, dw.ln2w, g->dln, a.res2, w.ln2w, a.ln2_rstd, N, C);
	act_stored(m, g->dres, (size_t)N * C);
	o->zero(g->dln, (size_t)N * C);
	o->matmul_backward(g->datty, dw.attprojw, NULL, g->dres, a.atty, w.attprojw, N, d.att_c,
			   C);
	act_stored(m, g->datty, (size_t)N * d.att_c);
	attention_core_backward(m, &d, &a, g->dqkv, g->datty);
	act_stored(m, g->dqkv, (size_t)N * d.qkv_oc);
	o->rope_backward(g->dqkvr, g->dqkv, m->rope, m->B, m->T, d.NH, d.KV, d.HS);
	act_stored(m, g->dqkvr, (size_t)N * d.qkvr_oc);
	o->matmul_backward(g->dln, dw.qkvw, NULL, g->dqkvr, a.ln1, w.qkvw, N, C, d.qkvr_oc);
	if (tp_allreduce(m, g->dln, (size_t)N * C))
		return -1;
	act_stored(m, g->dln, (size_t)N * C);
	o->rmsnorm_backward(g->dres, dw.ln1w, g->dln, x, w.ln1w, a.ln1_rstd, N, C);
	act_stored(m, g->dres, (size_t)N * C);
	return 0;
}

static void llama_final_norm_forward(struct gpt2 *m, const float *x)
{
	struct gpt2_acts *a = &m->acts;

	m->ops->rmsnorm_forward(a->lnf, a->lnf_rstd, x, m->tensors[GPT2_LNFW], m->B * m->T,
				m->config.channels, m->config.norm_eps);
	act_stored(m, a->lnf, (size_t)m->B * m->T * m->config.channels);
}

static void llama_final_norm_backward(struct gpt2 *m, const float *x)
{
	struct gpt2_acts *a = &m->acts;

	m->ops->rmsnorm_backward(a->dres, m->grad_tensors[GPT2_LNFW], a->dlnf, x,
				 m->tensors[GPT2_LNFW], a->lnf_rstd, m->B * m->T,
				 m->config.channels);
	act_stored(m, a->dres, (size_t)m->B * m->T * m->config.channels);
}

const struct arch arch_llama = {
	.name = "llama",
	.chunk = llama_chunk,
	.split = llama_split,
	.init_std = llama_init_std,
	.check = llama_check,
	.prepare = llama_prepare,
	.block_forward = llama_block_forward,
	.block_backward = llama_block_backward,
	.activation_again = llama_activation_again,
	.final_norm_forward = llama_final_norm_forward,
	.final_norm_backward = llama_final_norm_backward,
};
