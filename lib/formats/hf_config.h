/*
 * lib/formats/hf_config.h - a Hugging Face model's config.json, read into a plain
 * struct and written back, for the two families Stork trains: GPT-2
 * (model_type "gpt2") and Llama (model_type "llama": Llama 2, 3, 3.1, 3.2
 * and the many models that reuse its layout).
 *
 * Keys read, with transformers' defaults where config.json may leave a key
 * out (a size key is required: a default of 32 layers would be a guess):
 *
 *   gpt2   n_embd, n_layer, n_head, n_positions, vocab_size (required);
 *          layer_norm_epsilon (1e-5), n_inner (null: 4 * n_embd),
 *          tie_word_embeddings (true), activation_function ("gelu_new")
 *   llama  hidden_size, num_hidden_layers, num_attention_heads,
 *          intermediate_size, vocab_size, max_position_embeddings
 *          (required); num_key_value_heads (= num_attention_heads),
 *          head_dim (hidden_size / num_attention_heads), rms_norm_eps
 *          (1e-6), rope_theta (10000), rope_scaling (null, or Llama 3.1's
 *          {"rope_type": "llama3", "factor", "low_freq_factor",
 *          "high_freq_factor", "original_max_position_embeddings"}),
 *          tie_word_embeddings (false), hidden_act ("silu"),
 *          attention_bias and mlp_bias (false)
 *   both   torch_dtype (or its newer name "dtype"), when present
 *
 * Everything else in the file (token ids, dropout, initializer_range,
 * use_cache, ...) does not change the weights or the forward pass and is
 * ignored. What would change them and the struct cannot say is refused by
 * name rather than read as something else: another model_type, another
 * activation, biases on Llama's projections, a rope_scaling type other
 * than llama3 (linear, dynamic, yarn, ...), GPT-2's
 * scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn. A key of the
 * wrong JSON type, a size <= 0 and num_key_value_heads not dividing
 * num_attention_heads are refused too; every message names the file and
 * the key.
 */
#ifndef STORK_LIB_HF_CONFIG_H
#define STORK_LIB_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

enum hf_arch { HF_GPT2, HF_LLAMA };

struct hf_config {
	enum hf_arch arch;
	int vocab_size;
	int hidden_size;             /* gpt2: n_embd */
	int num_layers;              /* num_hidden_layers, n_layer */
	int num_heads;               /* num_attention_heads, n_head */
	int num_kv_heads;            /* gpt2: num_heads */
	int head_dim;                /* gpt2: hidden_size / num_heads */
	int intermediate_size;       /* the MLP's width; gpt2: n_inner or 4 * n_embd */
	int max_position_embeddings; /* gpt2: n_positions */
	double norm_eps;             /* rms_norm_eps, layer_norm_epsilon */
	double rope_theta;           /* llama only */
	bool rope_scaling;           /* llama: Llama 3.1's rope scaling, below */
	double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
	int rope_original_max_position_embeddings;
	bool tie_word_embeddings;    /* the LM head is the token embedding */
	char torch_dtype[16];        /* "float32", "bfloat16", ...; "" when absent */
	bool has_token_ids;          /* bos_token_id and eos_token_id are given */
	int bos_token_id, eos_token_id; /* the tokenizer's first and last token of a text */
};

/* "gpt2", "llama". */
const char *hf_arch_name(enum hf_arch arch);

/* The architecture called name: 0, or -1 when there is none. */
int hf_arch_from_name(const char *name, enum hf_arch *arch);

/* Read path (a config.json) into c. 0, or -1 with "PATH: KEY: what" in err. */
int hf_config_read(const char *path, struct hf_config *c, char *err, size_t errlen);

/*
 * Write c as a config.json that transformers' from_pretrained loads into
 * GPT2LMHeadModel or LlamaForCausalLM: "architectures", "model_type", the
 * keys above and "torch_dtype" (c->torch_dtype, "float32" when empty),
 * replacing path atomically. 0, or -1 with a message naming path.
 */
int hf_config_write(const char *path, const struct hf_config *c, char *err, size_t errlen);

#endif
