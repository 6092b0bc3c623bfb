/*
 * daemon/engine/model/model_pass.c - the forward and backward passes and
 * the activations they keep: the embedding, each block of the shard's
 * layers (the architecture's), the final norm, the LM head and the loss;
 * activation slots for the pipeline's micro-batches, recomputation, the
 * gradients handed to the optimizer by layer. The logits buffer holds
 * logits, then probabilities, then their gradient.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/model_internal.h"
#include "daemon/engine/model/arch/arch.h"
#include "daemon/engine/parallel/tensor_parallel.h"
#include "lib/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t kept_layers(size_t L, enum gpt2_recompute r, enum gpt2_recompute drop_from)
{
	return r >= drop_from && L > 0 ? 1 : L;
}

/*
 * Point the fields of a at mem (NULL: only count) for (B, T) and the
 * shard's layers [first, last): per-layer arrays for those layers only (or
 * one scratch layer where recomputation r makes them again), the head
 * (final LayerNorm, logits, losses) only when the stage ends the model,
 * every width the shard's. Arrays of no size are NULL. Returns the floats
 * needed.
 */
static size_t layout_acts(struct gpt2_acts *a, float *mem, const struct gpt2_config *c,
			  const struct gpt2_shard *s, int B, int T, enum gpt2_recompute r)
{
	struct block_dims d = block_dims(c, s);
	size_t Lr = (size_t)(s->last_layer - s->first_layer), C = c->channels, BT = (size_t)B * T;
	size_t M = c->arch != MODEL_LLAMA; /* 1 where the norms keep a mean (LayerNorm) */
	size_t L = kept_layers(Lr, r, GPT2_RECOMPUTE_BLOCK);
	size_t Lg = kept_layers(Lr, r, GPT2_RECOMPUTE_GELU);
	size_t H = s->last_layer == c->num_layers; /* 1 if the stage has the head */
	struct {
		float **field;
		size_t n;
	} f[] = {
		{ &a->encoded, BT * C },
		{ &a->ln1, L * BT * C },	   { &a->ln1_mean, M * L * BT },
		{ &a->ln1_rstd, L * BT },	   { &a->qkvr, L * BT * d.qkvr_oc },
		{ &a->qkv, L * BT * d.qkv_oc },
		{ &a->atty, L * BT * d.att_c },	   { &a->att_stats, L * B * d.NH * T * OPS_ATT_STATS },
		{ &a->res2, L * BT * C },	   { &a->ln2, L * BT * C },
		{ &a->ln2_mean, M * L * BT },	   { &a->ln2_rstd, L * BT },
		{ &a->fch, L * BT * d.fc_oc },	   { &a->fch_gelu, Lg * BT * d.act_oc },
		{ &a->res3, Lr * BT * C },	   { &a->lnf, H * BT * C },
		{ &a->lnf_mean, M * H * BT },	   { &a->lnf_rstd, H * BT },
		{ &a->logits, H * BT * d.Vp },	   { &a->losses, H * BT },
		{ &a->vocab_rows, H * (s->tp_size > 1) * 2 * BT },
		{ &a->dres, BT * C },		   { &a->dln, BT * C },
		{ &a->datty, BT * d.att_c },	   { &a->dqkv, BT * d.qkv_oc },
		{ &a->dqkvr, BT * d.qkvr_oc },
		{ &a->dfch, BT * d.fc_oc },	   { &a->dfch_gelu, BT * d.act_oc },
		{ &a->dlnf, BT * C },
	};
	size_t total = 0;

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (mem)
			*f[i].field = f[i].n ? mem + total : NULL;
		total += (f[i].n + 15) / 16 * 16; /* keep every array on a cache line */
	}
	return total;
}

size_t gpt2_activation_floats(const struct gpt2_config *c, const struct gpt2_shard *s, int B,
			      int T, enum gpt2_recompute r)
{
	struct gpt2_acts a;

	return layout_acts(&a, NULL, c, s, B, T, r);
}

/* Save the current slot's fields into its record. */
static void save_slot(struct gpt2 *m)
{
	m->slots[m->slot] = (struct gpt2_slot){ .acts = m->acts, .inputs = m->inputs,
						.targets = m->targets,
						.have_targets = m->have_targets, .loss = m->loss,
						.dlogits_scale = m->dlogits_scale };
}

void gpt2_use_slot(struct gpt2 *m, int k)
{
	const struct gpt2_slot *s;

	if (k < 0 || k >= m->nslots || k == m->slot)
		return;
	save_slot(m);
	m->slot = k;
	s = &m->slots[k];
	m->acts = s->acts;
	m->inputs = s->inputs;
	m->targets = s->targets;
	m->have_targets = s->have_targets;
	m->loss = s->loss;
	m->dlogits_scale = s->dlogits_scale;
}

int gpt2_set_slots(struct gpt2 *m, int n)
{
	struct gpt2_slot *slots;

	if (n < 1)
		n = 1;
	if (n == m->nslots)
		return 0;
	if (!(slots = calloc((size_t)n, sizeof *slots)))
		return -2;
	model_forget_acts(m);
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
	m->slot = 0;
	return 0;
}

const char *gpt2_recompute_name(enum gpt2_recompute r)
{
	return r == GPT2_RECOMPUTE_BLOCK ? "block" : r == GPT2_RECOMPUTE_GELU ? "gelu" : "none";
}

void gpt2_set_layer_hook(struct gpt2 *m, void (*fn)(void *arg, struct gpt2 *m, int layer),
			 void *arg)
{
	m->layer_done = fn;
	m->layer_done_arg = arg;
}

void gpt2_set_layer_params(struct gpt2 *m,
			   int (*fetch)(void *arg, struct gpt2 *m, int layer, int backward),
			   void (*release)(void *arg, struct gpt2 *m, int layer), void *arg)
{
	m->layer_fetch = fetch;
	m->layer_release = release;
	m->layer_params_arg = arg;
}

/* The layer's parameters in place for its pass (parallel.zero 3), or -1 with m->err. */
static int fetch_layer(struct gpt2 *m, int l, int backward)
{
	if (m->layer_fetch && m->layer_fetch(m->layer_params_arg, m, l, backward)) {
		snprintf(m->err, sizeof m->err, "cannot gather layer %d's parameters over the replicas",
			 l);
		return -1;
	}
	return 0;
}

static void release_layer(struct gpt2 *m, int l)
{
	if (m->layer_release)
		m->layer_release(m->layer_params_arg, m, l);
}

/* Layer l's pieces of the per-layer tensors of tensors (parameters or gradients). */
static int layer_pieces(const struct gpt2 *m, float *const *tensors, int l, float **p, size_t *n)
{
	size_t L = (size_t)(m->shard.last_layer - m->shard.first_layer);
	int k = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t per = gpt2_tensor_per_layer(t) && L ? m->sizes[t] / L : 0;

		if (per) {
			p[k] = tensors[t] + (size_t)(l - m->shard.first_layer) * per;
			n[k++] = per;
		}
	}
	return k;
}

int gpt2_layer_params(const struct gpt2 *m, int l, float **p, size_t *n)
{
	return layer_pieces(m, m->tensors, l, p, n);
}

int gpt2_layer_grads(const struct gpt2 *m, int l, float **p, size_t *n)
{
	return layer_pieces(m, m->grad_tensors, l, p, n);
}

int gpt2_global_grads(const struct gpt2 *m, float **p, size_t *n)
{
	int k = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		if (!gpt2_tensor_per_layer(t) && m->sizes[t]) {
			p[k] = m->grad_tensors[t];
			n[k++] = m->sizes[t];
		}
	}
	return k;
}

size_t gpt2_grad_pieces(const struct gpt2 *m)
{
	size_t L = (size_t)(m->shard.last_layer - m->shard.first_layer);

	return (size_t)GPT2_NUM_TENSORS * (L + 1);
}

void gpt2_set_fused(struct gpt2 *m, int on, float loss_scale)
{
	m->fused = on;
	m->loss_scale = loss_scale > 0.0f ? loss_scale : 1.0f;
}

void gpt2_set_bf16_activations(struct gpt2 *m, int on)
{
	m->bf16_acts = on;
}

int gpt2_set_recompute(struct gpt2 *m, enum gpt2_recompute r)
{
	if (r != m->recompute) {
		model_forget_acts(m);
		m->recompute = r;
	}
	return 0;
}

/*
 * Make the activations of every slot fit (B, T); reuses the buffer when it
 * is large enough. Keeps the current slot.
 */
static int ensure_acts(struct gpt2 *m, int B, int T)
{
	size_t per, need, ntok = 2 * (size_t)B * T;

	if (m->act_mem && m->B == B && m->T == T)
		return arch_of(&m->config)->prepare(m, B, T);
	per = layout_acts(&m->acts, NULL, &m->config, &m->shard, B, T, m->recompute);
	need = per * (size_t)m->nslots;
	if (need > m->act_cap) {
		float *mem = m->ops->alloc(need * sizeof(float));

		if (!mem)
			goto nomem;
		if (m->act_mem)
			m->ops->free(m->act_mem);
		m->act_mem = mem;
		m->act_cap = need;
	}
	if (ntok * (size_t)m->nslots > m->tok_cap) {
		int *tok = m->ops->alloc(ntok * (size_t)m->nslots * sizeof(int));

		if (!tok)
			goto nomem;
		if (m->tok_mem)
			m->ops->free(m->tok_mem);
		m->tok_mem = tok;
		m->tok_cap = ntok * (size_t)m->nslots;
	}
	free(m->host_losses);
	if (!(m->host_losses = malloc((size_t)B * T * sizeof(float))))
		goto nomem;
	for (int k = 0; k < m->nslots; k++) {
		struct gpt2_slot *s = &m->slots[k];

		layout_acts(&s->acts, m->act_mem + (size_t)k * per, &m->config, &m->shard, B, T,
			    m->recompute);
		s->inputs = m->tok_mem + (size_t)k * ntok;
		s->targets = s->inputs + (size_t)B * T;
		s->have_targets = 0;
		s->loss = -1.0f;
	}
	m->acts = m->slots[m->slot].acts;
	m->inputs = m->slots[m->slot].inputs;
	m->targets = m->slots[m->slot].targets;
	m->have_targets = 0;
	m->B = B;
	m->T = T;
	m->act_first = m->shard.first_layer;
	m->act_last = m->shard.last_layer;
	return arch_of(&m->config)->prepare(m, B, T);
nomem:
	{
		char what[64];

		snprintf(what, sizeof what, "the activations of B=%d, T=%d", B, T);
		gpt2_oom_message(m->ops, what, per * (size_t)m->nslots * sizeof(float), m->err,
				 sizeof m->err);
	}
	m->out_of_memory = 1;
	return -2;
}

/* ------------------------------------------------------------ blocks */

/*
 * Make again what the forward pass of layer l did not keep: under block
 * recomputation the whole layer runs forward again from its kept input
 * (its tensor-parallel all-reduces too, which every rank of the group
 * makes in the same order); under GELU recomputation the MLP's
 * activation of fc's kept output. Same kernels, same inputs: the same
 * bits as the first time.
 */
static int recompute_layer(struct gpt2 *m, int l)
{
	const struct arch *a = arch_of(&m->config);

	if (m->recompute == GPT2_RECOMPUTE_BLOCK)
		return a->block_forward(m, l);
	if (m->recompute == GPT2_RECOMPUTE_GELU)
		a->activation_again(m, l);
	return 0;
}

static int block_backward(struct gpt2 *m, int l)
{
	int rc;

	if (fetch_layer(m, l, 1) || recompute_layer(m, l))
		return -1;
	rc = arch_of(&m->config)->block_backward(m, l);
	release_layer(m, l);
	return rc;
}

/* ------------------------------------------------------------ passes */

static int check_batch(struct gpt2 *m, int B, int T)
{
	const struct gpt2_config *c = &m->config;

	if (B <= 0 || T <= 0 || T > c->max_seq_len) {
		snprintf(m->err, sizeof m->err,
			 "batch B=%d, T=%d does not fit the model (1 <= T <= max_seq_len %d)", B, T,
			 c->max_seq_len);
		return -1;
	}
	return 0;
}

/* Copy n host tokens into dst (the backend's memory), checking each is a vocabulary id. */
static int copy_tokens(struct gpt2 *m, int *dst, const int *src, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (src[i] < 0 || src[i] >= m->config.vocab_size) {
			snprintf(m->err, sizeof m->err,
				 "%s token %d at position %zu is outside the vocabulary [0, %d)", what,
				 src[i], i, m->config.vocab_size);
			return -1;
		}
	}
	m->ops->upload(dst, src, n * sizeof(int));
	return 0;
}

/* The LM head: a tensor of its own (untied), else the token embedding. */
static float *head_weight(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS])
{
	return m->sizes[GPT2_LMHEAD] ? t[GPT2_LMHEAD] : t[GPT2_WTE];
}

/* The position embedding, or NULL (rotary positions). */
static float *position_weight(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS])
{
	return m->sizes[GPT2_WPE] ? t[GPT2_WPE] : NULL;
}

/*
 * Final norm, LM head (the tied embedding or its own), softmax and loss (the
 * mean over the batch in *loss). A tensor-parallel shard holds Vp/tp rows
 * of the head: its logits are its vocabulary slice, and the softmax is
 * taken across the slices (tensor_parallel.c) without gathering them.
 * With fused kernels, a pass with targets ends in the fused classifier:
 * the logits then hold their gradient for m->loss_scale already.
 */
static int head_forward(struct gpt2 *m, int have_targets, float *loss)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	struct block_dims d = block_dims(c, &m->shard);
	int N = m->B * m->T, C = c->channels;
	const int *targets = have_targets ? m->targets : NULL;
	double sum = 0.0, t0;

	arch_of(c)->final_norm_forward(m, layer_input(m, c->num_layers));
	o->matmul_forward(a->logits, a->lnf, head_weight(m, m->tensors), NULL, N, C, d.Vp);
	act_stored(m, a->logits, (size_t)N * d.Vp);
	m->dlogits_scale = 0.0f;
	if (m->shard.tp_size == 1 && targets && m->fused && o->softmax_xent_fused) {
		o->softmax_xent_fused(a->losses, a->logits, targets, m->loss_scale / N, N,
				      c->vocab_size, c->padded_vocab_size);
		m->dlogits_scale = m->loss_scale;
	} else if (m->shard.tp_size == 1) {
		o->softmax_xent_forward(a->losses, a->logits, targets, N, c->vocab_size,
					c->padded_vocab_size);
	} else if (tp_softmax_xent_forward(m, a->losses, a->logits, targets, N)) {
		return -1;
	}
	*loss = 0.0f;
	if (!have_targets)
		return 0;
	/* the losses come to the host (N floats) and are added there in row
	 * order, so every backend's mean loss is the same fold; on a GPU the
	 * copy waits for every kernel of the pass (device_wait_s) */
	t0 = clock_monotonic();
	o->download(m->host_losses, a->losses, (size_t)N * sizeof(float));
	m->device_wait_s += clock_monotonic() - t0;
	for (int i = 0; i < N; i++)
		sum += m->host_losses[i];
	*loss = (float)(sum / N);
	return 0;
}

/* Say which pass and block the model is in (a hang's report reads it). */
static void where_now(struct gpt2 *m, int phase, int layer)
{
	if (!m->where)
		return;
	atomic_store_explicit(&m->where->layer, layer, memory_order_relaxed);
	atomic_store_explicit(&m->where->phase, phase, memory_order_relaxed);
}

/* Token and position embedding of the stage's inputs into acts.encoded. */
static int embed(struct gpt2 *m)
{
	if (m->shard.tp_size > 1) {
		if (tp_encoder_forward(m, m->acts.encoded, m->inputs, m->B, m->T))
			return -1;
	} else {
		m->ops->encoder_forward(m->acts.encoded, m->inputs, m->tensors[GPT2_WTE],
					position_weight(m, m->tensors), m->B, m->T,
					m->config.channels);
	}
	act_stored(m, m->acts.encoded, (size_t)m->B * m->T * m->config.channels);
	return 0;
}

int gpt2_stage_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T,
		       const float *x_in, float *x_out, float *loss)
{
	size_t BTC = (size_t)B * T * m->config.channels;
	int first = m->shard.first_layer, last = m->shard.last_layer, rc;
	float l = 0.0f;

	m->have_targets = 0;
	m->loss = -1.0f;
	where_now(m, GPT2_PHASE_FORWARD, -1);
	if (check_batch(m, B, T))
		return -1;
	rc = ensure_acts(m, B, T);
	if (rc)
		return rc;
	if (targets && copy_tokens(m, m->targets, targets, (size_t)B * T, "target"))
		return -1;
	if (first == 0) {
		if (copy_tokens(m, m->inputs, inputs, (size_t)B * T, "input") || embed(m))
			return -1;
	} else {
		m->ops->copy(layer_input(m, first), x_in, BTC * sizeof(float));
	}
	for (int k = first; k < last; k++) {
		where_now(m, GPT2_PHASE_FORWARD, k);
		if (fetch_layer(m, k, 0) || arch_of(&m->config)->block_forward(m, k))
			return -1;
		release_layer(m, k);
	}
	where_now(m, GPT2_PHASE_FORWARD, last);
	if (last < m->config.num_layers) {
		m->ops->copy(x_out, layer_input(m, last), BTC * sizeof(float));
		return 0;
	}
	if (head_forward(m, targets != NULL, &l))
		return -1;
	m->have_targets = targets != NULL;
	m->loss = m->have_targets ? l : 0.0f;
	if (loss)
		*loss = m->loss;
	return 0;
}

float gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T)
{
	float loss = 0.0f;

	if (m->shard.first_layer != 0 || m->shard.last_layer != m->config.num_layers) {
		snprintf(m->err, sizeof m->err,
			 "a forward pass of the whole model on a pipeline stage (layers [%d, %d))",
			 m->shard.first_layer, m->shard.last_layer);
		return NAN;
	}
	if (gpt2_stage_forward(m, inputs, targets, B, T, NULL, NULL, &loss))
		return NAN;
	return loss;
}

int gpt2_zero_grad(struct gpt2 *m)
{
	if (!m->grads) {
		size_t n = m->num_params + m->grad_pad + 1;

		m->grads = m->ops->alloc(n * sizeof(float));
		if (!m->grads) {
			gpt2_oom_message(m->ops, "the gradients", n * sizeof(float), m->err,
					 sizeof m->err);
			m->out_of_memory = 1;
			return -2;
		}
		m->ops->zero(m->grads, n);
		model_point_tensors(m->grad_tensors, m->grads, m->sizes);
		return 0;
	}
	m->ops->zero(m->grads, m->num_params);
	return 0;
}

/* Gradient from the loss back to dres (the gradient of the last layer's output). */
static int head_backward(struct gpt2 *m, float loss_scale)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	struct block_dims d = block_dims(c, &m->shard);
	int N = m->B * m->T, C = c->channels;

	if (m->dlogits_scale > 0.0f) {
		/* the fused classifier's gradient, for the scale it expected */
		if (loss_scale != m->dlogits_scale)
			o->scale(a->logits, (size_t)N * d.Vp, loss_scale / m->dlogits_scale);
	} else if (m->shard.tp_size == 1) {
		o->softmax_xent_backward(a->logits, m->targets, loss_scale / N, N, c->vocab_size,
					 c->padded_vocab_size);
	} else {
		tp_softmax_xent_backward(m, a->logits, m->targets, loss_scale / N, N);
	}
	act_stored(m, a->logits, (size_t)N * d.Vp); /* the logits' gradient, in their place */
	o->zero(a->dlnf, (size_t)N * C);
	o->matmul_backward(a->dlnf, head_weight(m, m->grad_tensors), NULL, a->logits, a->lnf,
			   head_weight(m, m->tensors), N, C, d.Vp);
	if (tp_allreduce(m, a->dlnf, (size_t)N * C))
		return -1;
	act_stored(m, a->dlnf, (size_t)N * C);
	o->zero(a->dres, (size_t)N * C);
	arch_of(c)->final_norm_backward(m, layer_input(m, c->num_layers));
	return 0;
}

int gpt2_stage_backward(struct gpt2 *m, float loss_scale, const float *dx_out, float *dx_in)
{
	size_t BTC = (size_t)m->B * m->T * m->config.channels;
	int first = m->shard.first_layer, last = m->shard.last_layer;

	if (!m->grads || !m->act_mem) {
		snprintf(m->err, sizeof m->err,
			 "backward pass without %s", !m->grads ? "gradients (call gpt2_zero_grad)" :
								"a forward pass");
		return -1;
	}
	if (last == m->config.num_layers) {
		if (!m->have_targets) {
			snprintf(m->err, sizeof m->err,
				 "backward pass without a forward pass with targets");
			return -1;
		}
		if (head_backward(m, loss_scale))
			return -1;
		m->have_targets = 0; /* the logits now hold their gradient */
	} else {
		m->ops->copy(m->acts.dres, dx_out, BTC * sizeof(float));
	}
	for (int l = last - 1; l >= first; l--) {
		where_now(m, GPT2_PHASE_BACKWARD, l);
		if (block_backward(m, l))
			return -1;
		if (m->layer_done)
			m->layer_done(m->layer_done_arg, m, l);
	}
	if (first > 0)
		m->ops->copy(dx_in, m->acts.dres, BTC * sizeof(float));
	else if (m->shard.tp_size > 1)
		tp_encoder_backward(m, m->grad_tensors[GPT2_WTE], position_weight(m, m->grad_tensors),
				    m->acts.dres, m->inputs, m->B, m->T);
	else
		m->ops->encoder_backward(m->grad_tensors[GPT2_WTE], position_weight(m, m->grad_tensors),
					 m->acts.dres, m->inputs, m->B, m->T, m->config.channels);
	return 0;
}

int gpt2_backward(struct gpt2 *m, float loss_scale)
{
	return gpt2_stage_backward(m, loss_scale, NULL, NULL);
}
