/*
 * lib/formats/hf_names.h - where each weight of a GPT-2 or Llama model sits in a
 * Hugging Face checkpoint: its name, its layout and the shape config.json
 * gives it. The tables are data (hf_names.c); a loader or an exporter walks
 * them instead of spelling names itself.
 *
 *   kind              llama (LlamaForCausalLM)            gpt2 (GPT2LMHeadModel)
 *   TOKEN_EMBED       model.embed_tokens.weight [V, C]     transformer.wte.weight [V, C]
 *   POS_EMBED         -                                    transformer.wpe.weight [T, C]
 *   ATTN_NORM(_BIAS)  model.layers.N.input_layernorm       transformer.h.N.ln_1
 *   Q, K, V           model.layers.N.self_attn.q_proj      -
 *                     [H*D, C], k_proj, v_proj [KV*D, C]
 *   QKV(_BIAS)        -                                    transformer.h.N.attn.c_attn [C, 3C]*
 *   ATTN_OUT(_BIAS)   model.layers.N.self_attn.o_proj      transformer.h.N.attn.c_proj [C, C]*
 *                     [C, H*D]
 *   MLP_NORM(_BIAS)   model.layers.N.post_attention_layernorm  transformer.h.N.ln_2
 *   MLP_GATE          model.layers.N.mlp.gate_proj [I, C]  -
 *   MLP_UP(_BIAS)     model.layers.N.mlp.up_proj [I, C]    transformer.h.N.mlp.c_fc [C, I]*
 *   MLP_DOWN(_BIAS)   model.layers.N.mlp.down_proj [C, I]  transformer.h.N.mlp.c_proj [I, C]*
 *   FINAL_NORM(_BIAS) model.norm                           transformer.ln_f
 *   LM_HEAD           lm_head.weight [V, C], only when tie_word_embeddings is false
 *
 * (norms are [C]; ".weight" and ".bias" follow each name; the _BIAS kinds
 * are GPT-2's alone, Llama has neither norm nor projection biases.)
 *
 * Layout. torch.nn.Linear stores its weight as [out, in]; GPT-2's Conv1D,
 * marked * above, stores [in, out]: c_attn's columns 0..C-1 are q, C..2C-1
 * k, 2C..3C-1 v. hf_transposed says which; a reader transposes those to
 * [out, in] (llm.c's layout) and a writer transposes back.
 *
 * Llama's q_proj and k_proj rows are in the order of transformers'
 * rotate_half: dimension i of a head turns with dimension i + D/2, not with
 * i + 1 as in Meta's original checkpoints (convert_llama_weights_to_hf.py
 * permutes them). A model that reads these names computes rotary positions
 * the rotate_half way, or permutes the rows back.
 *
 * Prefix. A file saved from the model with the LM head has "model." or
 * "transformer." before the names of the base model (everything but
 * lm_head); one saved from the base model alone (the gpt2 checkpoint on
 * the Hub, from GPT2Model) has not. hf_detect_prefix tells which from the
 * token embedding; writers use the prefix (what from_pretrained of
 * LlamaForCausalLM or GPT2LMHeadModel saves).
 */
#ifndef STORK_LIB_HF_NAMES_H
#define STORK_LIB_HF_NAMES_H

#include "lib/formats/hf_config.h"
#include "lib/formats/safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hf_kind {
	HF_TOKEN_EMBED,
	HF_POS_EMBED,
	HF_ATTN_NORM,
	HF_ATTN_NORM_BIAS,
	HF_Q,
	HF_K,
	HF_V,
	HF_QKV,
	HF_QKV_BIAS,
	HF_ATTN_OUT,
	HF_ATTN_OUT_BIAS,
	HF_MLP_NORM,
	HF_MLP_NORM_BIAS,
	HF_MLP_GATE,
	HF_MLP_UP,
	HF_MLP_UP_BIAS,
	HF_MLP_DOWN,
	HF_MLP_DOWN_BIAS,
	HF_FINAL_NORM,
	HF_FINAL_NORM_BIAS,
	HF_LM_HEAD,
	HF_NUM_KINDS
};

/* One weight of an architecture. */
struct hf_weight {
	enum hf_kind kind;
	const char *name;   /* after the prefix and, per layer, "layers.N." or "h.N." */
	bool per_layer;
	bool in_base;       /* under the base model's prefix (all but lm_head) */
	bool transposed;    /* stored [in, out] (Conv1D), not [out, in] */
};

/* The weights of arch, in the order transformers' state_dict lists them
 * (the per-layer ones once, for every layer); their number in *n. */
const struct hf_weight *hf_weights(enum hf_arch arch, size_t *n);

/* The weight of kind in arch, or NULL when arch has none. */
const struct hf_weight *hf_weight_of(enum hf_arch arch, enum hf_kind kind);

/* "model." or "transformer.". */
const char *hf_base_prefix(enum hf_arch arch);

/* Whether kind is stored [in, out] in arch's files. */
bool hf_transposed(enum hf_arch arch, enum hf_kind kind);

/*
 * The full name of kind (of layer, for per-layer kinds) into buf, with the
 * base prefix when prefixed: "model.layers.3.mlp.up_proj.weight". 0, or -1
 * when arch has no such weight or buf is too small.
 */
int hf_weight_name(enum hf_arch arch, enum hf_kind kind, int layer, bool prefixed, char *buf,
		   size_t len);

/*
 * The shape c gives kind as stored in the file ([in, out] for transposed
 * kinds): the number of dimensions (1 or 2) with the sizes in shape, or 0
 * when c's model has no such weight (lm_head of a tied model, a kind of
 * the other architecture).
 */
int hf_weight_shape(const struct hf_config *c, enum hf_kind kind, int64_t shape[2]);

/*
 * Whether st's names carry the base prefix (see above), from where the
 * token embedding is. 0, or -1 with a message naming both names and the
 * file when neither is there.
 */
int hf_detect_prefix(const struct safetensors *st, enum hf_arch arch, bool *prefixed, char *err,
		     size_t errlen);

/*
 * The tensor of kind (of layer) in st, checked against the shape c gives
 * it (st_expect: "NAME in FILE is [..], CONFIG says [..]", config naming
 * the config.json). NULL with a message when it is missing or another
 * shape, or when c's model has no such weight.
 */
const struct st_tensor *hf_weight_find(const struct safetensors *st, const struct hf_config *c,
				       const char *config, enum hf_kind kind, int layer,
				       bool prefixed, char *err, size_t errlen);

#endif
