/*
 * lib/formats/hf_names.c - see hf_names.h: the two tables, and the shapes
 * config.json gives their entries.
 */
#include "config.h"
#include "lib/formats/hf_names.h"

#include "lib/bounded.h"

#include <stdio.h>
#include <string.h>

static const struct hf_weight llama[] = {
	{ HF_TOKEN_EMBED, "embed_tokens.weight", false, true, false },
	{ HF_ATTN_NORM, "input_layernorm.weight", true, true, false },
	{ HF_Q, "self_attn.q_proj.weight", true, true, false },
	{ HF_K, "self_attn.k_proj.weight", true, true, false },
	{ HF_V, "self_attn.v_proj.weight", true, true, false },
	{ HF_ATTN_OUT, "self_attn.o_proj.weight", true, true, false },
	{ HF_MLP_NORM, "post_attention_layernorm.weight", true, true, false },
	{ HF_MLP_GATE, "mlp.gate_proj.weight", true, true, false },
	{ HF_MLP_UP, "mlp.up_proj.weight", true, true, false },
	{ HF_MLP_DOWN, "mlp.down_proj.weight", true, true, false },
	{ HF_FINAL_NORM, "norm.weight", false, true, false },
	{ HF_LM_HEAD, "lm_head.weight", false, false, false },
};

static const struct hf_weight gpt2[] = {
	{ HF_TOKEN_EMBED, "wte.weight", false, true, false },
	{ HF_POS_EMBED, "wpe.weight", false, true, false },
	{ HF_ATTN_NORM, "ln_1.weight", true, true, false },
	{ HF_ATTN_NORM_BIAS, "ln_1.bias", true, true, false },
	{ HF_QKV, "attn.c_attn.weight", true, true, true },
	{ HF_QKV_BIAS, "attn.c_attn.bias", true, true, false },
	{ HF_ATTN_OUT, "attn.c_proj.weight", true, true, true },
	{ HF_ATTN_OUT_BIAS, "attn.c_proj.bias", true, true, false },
	{ HF_MLP_NORM, "ln_2.weight", true, true, false },
	{ HF_MLP_NORM_BIAS, "ln_2.bias", true, true, false },
	{ HF_MLP_UP, "mlp.c_fc.weight", true, true, true },
	{ HF_MLP_UP_BIAS, "mlp.c_fc.bias", true, true, false },
	{ HF_MLP_DOWN, "mlp.c_proj.weight", true, true, true },
	{ HF_MLP_DOWN_BIAS, "mlp.c_proj.bias", true, true, false },
	{ HF_FINAL_NORM, "ln_f.weight", false, true, false },
	{ HF_FINAL_NORM_BIAS, "ln_f.bias", false, true, false },
	{ HF_LM_HEAD, "lm_head.weight", false, false, false },
};

static const struct {
	const struct hf_weight *w;
	size_t n;
	const char *prefix;       /* of the base model */
	const char *layer;        /* before a layer's number */
} archs[] = {
	[HF_GPT2] = { gpt2, sizeof gpt2 / sizeof gpt2[0], "transformer.", "h." },
	[HF_LLAMA] = { llama, sizeof llama / sizeof llama[0], "model.", "layers." },
};

const struct hf_weight *hf_weights(enum hf_arch arch, size_t *n)
{
	*n = archs[arch].n;
	return archs[arch].w;
}

const struct hf_weight *hf_weight_of(enum hf_arch arch, enum hf_kind kind)
{
	for (size_t i = 0; i < archs[arch].n; i++)
		if (archs[arch].w[i].kind == kind)
			return &archs[arch].w[i];
	return NULL;
}

const char *hf_base_prefix(enum hf_arch arch)
{
	return archs[arch].prefix;
}

bool hf_transposed(enum hf_arch arch, enum hf_kind kind)
{
	const struct hf_weight *w = hf_weight_of(arch, kind);

	return w && w->transposed;
}

int hf_weight_name(enum hf_arch arch, enum hf_kind kind, int layer, bool prefixed, char *buf,
		   size_t len)
{
	const struct hf_weight *w = hf_weight_of(arch, kind);
	const char *prefix = w && w->in_base && prefixed ? archs[arch].prefix : "";
	int n;

	if (!w)
		return -1;
	if (w->per_layer)
		n = snprintf(buf, len, "%s%s%d.%s", prefix, archs[arch].layer, layer, w->name);
	else
		n = snprintf(buf, len, "%s%s", prefix, w->name);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* [a] into shape; 1 dimension. */
static int vec(int64_t shape[2], int64_t a)
{
	shape[0] = a;
	return 1;
}

/* [a, b] into shape; 2 dimensions. */
static int mat(int64_t shape[2], int64_t a, int64_t b)
{
	shape[0] = a;
	shape[1] = b;
	return 2;
}

/* A linear layer's weight, [out, in] or, stored transposed, [in, out]. */
static int linear(const struct hf_config *c, enum hf_kind kind, int64_t shape[2], int64_t out,
		  int64_t in)
{
	return hf_transposed(c->arch, kind) ? mat(shape, in, out) : mat(shape, out, in);
}

int hf_weight_shape(const struct hf_config *c, enum hf_kind kind, int64_t shape[2])
{
	int64_t C = c->hidden_size, I = c->intermediate_size, D = c->head_dim;
	int64_t H = c->num_heads, KV = c->num_kv_heads;

	if (!hf_weight_of(c->arch, kind))
		return 0;
	switch (kind) {
	case HF_TOKEN_EMBED:
		return mat(shape, c->vocab_size, C);
	case HF_POS_EMBED:
		return mat(shape, c->max_position_embeddings, C);
	case HF_LM_HEAD:
		return c->tie_word_embeddings ? 0 : mat(shape, c->vocab_size, C);
	case HF_Q:
		return linear(c, kind, shape, H * D, C);
	case HF_K:
	case HF_V:
		return linear(c, kind, shape, KV * D, C);
	case HF_QKV:
		return linear(c, kind, shape, 3 * C, C);
	case HF_QKV_BIAS:
		return vec(shape, 3 * C);
	case HF_ATTN_OUT:
		return linear(c, kind, shape, C, H * D);
	case HF_MLP_GATE:
	case HF_MLP_UP:
		return linear(c, kind, shape, I, C);
	case HF_MLP_UP_BIAS:
		return vec(shape, I);
	case HF_MLP_DOWN:
		return linear(c, kind, shape, C, I);
	case HF_ATTN_NORM:
	case HF_ATTN_NORM_BIAS:
	case HF_ATTN_OUT_BIAS:
	case HF_MLP_NORM:
	case HF_MLP_NORM_BIAS:
	case HF_MLP_DOWN_BIAS:
	case HF_FINAL_NORM:
	case HF_FINAL_NORM_BIAS:
		return vec(shape, C);
	case HF_NUM_KINDS:
		break;
	}
	return 0;
}

int hf_detect_prefix(const struct safetensors *st, enum hf_arch arch, bool *prefixed, char *err,
		     size_t errlen)
{
	char with[256], without[256];

	hf_weight_name(arch, HF_TOKEN_EMBED, 0, true, with, sizeof with);
	hf_weight_name(arch, HF_TOKEN_EMBED, 0, false, without, sizeof without);
	if (st_find(st, with) || st_find(st, without)) {
		*prefixed = st_find(st, with) != NULL;
		return 0;
	}
	return msg_fail(err, errlen, -1, "%s: neither %s nor %s is there: not the weights of a %s "
			"model", st_name(st), with, without, hf_arch_name(arch));
}

const struct st_tensor *hf_weight_find(const struct safetensors *st, const struct hf_config *c,
				       const char *config, enum hf_kind kind, int layer,
				       bool prefixed, char *err, size_t errlen)
{
	char name[256];
	int64_t shape[2];
	int ndim = hf_weight_shape(c, kind, shape);

	if (kind == HF_LM_HEAD && c->tie_word_embeddings) {
		msg_format(err, errlen, "%s: tie_word_embeddings is true: the LM head is the token "
			   "embedding, not a weight of its own", config);
		return NULL;
	}
	if (!ndim || hf_weight_name(c->arch, kind, layer, prefixed, name, sizeof name) < 0) {
		msg_format(err, errlen, "%s: a %s model has no weight of kind %d (hf_names.h)", config,
			   hf_arch_name(c->arch), (int)kind);
		return NULL;
	}
	return st_expect(st, name, ndim, shape, config, err, errlen);
}
