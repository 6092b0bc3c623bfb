/*
 * daemon/engine/model/arch/blocks.c - the pieces every architecture's block is made of
 * (see arch.h): widths, views of one layer's weights and activations, the
 * row-parallel projection and the attention core.
 */
#include "config.h"
#include "daemon/engine/model/arch/arch.h"
#include "daemon/engine/parallel/tensor_parallel.h"

struct block_dims block_dims(const struct gpt2_config *c, const struct gpt2_shard *s)
{
	int HS = c->channels / c->num_heads, NH = c->num_heads / s->tp_size;
	int KV = model_kv_heads(c) / s->tp_size, I = model_mlp_width(c) / s->tp_size;
	int llama = c->arch == MODEL_LLAMA;

	return (struct block_dims){ .C = c->channels, .NH = NH, .HS = HS, .KV = KV,
				    .qkv_oc = 3 * NH * HS,
				    .qkvr_oc = llama ? (NH + 2 * KV) * HS : 0, .att_c = NH * HS,
				    .fc_oc = llama ? 2 * I : I, .act_oc = I,
				    .Vp = c->padded_vocab_size / s->tp_size };
}

/* base + off, or NULL when the tensor is absent (size 0): kernels take NULL for "no bias". */
static float *part(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS], int k, size_t off)
{
	return m->sizes[k] ? t[k] + off : NULL;
}

struct block_w block_weights(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS],
			     const struct block_dims *d, int l)
{
	size_t C = d->C;

	return (struct block_w){
		.ln1w = part(m, t, GPT2_LN1W, l * C),
		.ln1b = part(m, t, GPT2_LN1B, l * C),
		.qkvw = part(m, t, GPT2_QKVW,
			     l * (size_t)(d->qkvr_oc ? d->qkvr_oc : d->qkv_oc) * C),
		.qkvb = part(m, t, GPT2_QKVB, l * (size_t)d->qkv_oc),
		.attprojw = part(m, t, GPT2_ATTPROJW, l * C * d->att_c),
		.attprojb = part(m, t, GPT2_ATTPROJB, l * C),
		.ln2w = part(m, t, GPT2_LN2W, l * C),
		.ln2b = part(m, t, GPT2_LN2B, l * C),
		.fcw = part(m, t, GPT2_FCW, l * (size_t)d->fc_oc * C),
		.fcb = part(m, t, GPT2_FCB, l * (size_t)d->fc_oc),
		.fcprojw = part(m, t, GPT2_FCPROJW, l * C * d->act_oc),
		.fcprojb = part(m, t, GPT2_FCPROJB, l * C),
	};
}

struct block_w block_params(const struct gpt2 *m, const struct block_dims *d, int layer)
{
	if (m->param_view)
		return block_weights(m, m->param_view, d, 0);
	return block_weights(m, m->tensors, d, layer - m->shard.first_layer);
}

struct block_w block_grads(const struct gpt2 *m, const struct block_dims *d, int layer)
{
	if (m->grad_view)
		return block_weights(m, m->grad_view, d, 0);
	return block_weights(m, m->grad_tensors, d, layer - m->shard.first_layer);
}

/* p + off, or NULL for an array the architecture does not use. */
static float *at(float *p, size_t off)
{
	return p ? p + off : NULL;
}

/* Activations of layer l; those the recomputation mode does not keep share one scratch layer. */
struct block_a block_acts(const struct gpt2 *m, const struct block_dims *d, int layer)
{
	const struct gpt2_acts *a = &m->acts;
	size_t BT = (size_t)m->B * m->T, C = d->C, l = (size_t)(layer - m->act_first);
	size_t k = m->recompute >= GPT2_RECOMPUTE_BLOCK ? 0 : l; /* layer slot of the block's insides */
	size_t g = m->recompute >= GPT2_RECOMPUTE_GELU ? 0 : l;  /* layer slot of the MLP activation */

	return (struct block_a){
		.ln1 = at(a->ln1, k * BT * C),
		.ln1_mean = at(a->ln1_mean, k * BT),
		.ln1_rstd = at(a->ln1_rstd, k * BT),
		.qkvr = at(a->qkvr, k * BT * d->qkvr_oc),
		.qkv = at(a->qkv, k * BT * d->qkv_oc),
		.atty = at(a->atty, k * BT * d->att_c),
		.att_stats = at(a->att_stats, k * (size_t)m->B * d->NH * m->T * OPS_ATT_STATS),
		.res2 = at(a->res2, k * BT * C),
		.ln2 = at(a->ln2, k * BT * C),
		.ln2_mean = at(a->ln2_mean, k * BT),
		.ln2_rstd = at(a->ln2_rstd, k * BT),
		.fch = at(a->fch, k * BT * d->fc_oc),
		.fch_gelu = at(a->fch_gelu, g * BT * d->act_oc),
		.res3 = at(a->res3, l * BT * C),
	};
}

void act_stored(const struct gpt2 *m, float *p, size_t n)
{
	if (m->bf16_acts)
		m->ops->round_bf16(p, n);
}

float *layer_input(struct gpt2 *m, int l)
{
	return l == m->act_first ?
		       m->acts.encoded :
		       m->acts.res3 + (size_t)(l - 1 - m->act_first) * m->B * m->T *
					      m->config.channels;
}

/*
 * The bias of a row-parallel projection: the partial sums of the
 * tensor-parallel ranks are added up afterwards, so only rank 0 adds it.
 */
int project_out(struct gpt2 *m, float *out, const float *inp, const float *w, const float *bias,
		int in_c)
{
	int N = m->B * m->T, C = m->config.channels;

	m->ops->matmul_forward(out, inp, w, m->shard.tp_rank == 0 ? bias : NULL, N, in_c, C);
	return tp_allreduce(m, out, (size_t)N * C);
}

void attention_core_forward(struct gpt2 *m, const struct block_dims *d, struct block_a *a)
{
	const struct ops *o = m->ops;

	if (m->fused && o->attention_fused_forward)
		o->attention_fused_forward(a->atty, a->att_stats, a->qkv, m->B, m->T, d->NH, d->HS);
	else
		o->attention_forward(a->atty, a->att_stats, a->qkv, m->B, m->T, d->NH, d->HS);
}

void attention_core_backward(struct gpt2 *m, const struct block_dims *d, struct block_a *a,
			     float *dqkv, const float *datty)
{
	const struct ops *o = m->ops;

	if (m->fused && o->attention_fused_backward)
		o->attention_fused_backward(dqkv, datty, a->atty, a->qkv, a->att_stats, m->B, m->T,
					    d->NH, d->HS);
	else
		o->attention_backward(dqkv, datty, a->qkv, a->att_stats, m->B, m->T, d->NH, d->HS);
}
