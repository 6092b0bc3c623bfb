/*
 * daemon/engine/model/hf_model.h - Hugging Face model directories in and out: a
 * config.json and model.safetensors (or a sharded set with
 * model.safetensors.index.json) of a GPT-2 (GPT2LMHeadModel) or Llama
 * (LlamaForCausalLM) model, read into a model shard and written from a
 * whole model.
 *
 * Reading: each rank reads only the bytes of its shard (its layers, its
 * tensor-parallel rows or columns of each matrix: pread through
 * lib/formats/safetensors.h), converting F32, BF16 and F16 to fp32. GPT-2's Conv1D
 * weights, stored [in, out], are transposed into the model's [out, in];
 * Llama's q, k, v and gate, up projections are stacked into the model's
 * qkvw and fcw. Every tensor is checked against config.json: a missing
 * tensor, another shape or dtype, an unknown model_type is an error
 * naming the file, the tensor and both shapes.
 *
 * Writing: config.json and model.safetensors in the layout from_pretrained
 * loads, the names with the base model's prefix, the vocabulary's padding
 * rows left out, in F32 or BF16.
 */
#ifndef STORK_DAEMON_HF_MODEL_H
#define STORK_DAEMON_HF_MODEL_H

#include "daemon/engine/model/model.h"
#include "lib/formats/safetensors.h"

#include <stddef.h>

/* Whether path is a directory (model.init_from names a Hugging Face model then). */
int hf_is_model_dir(const char *path);

/*
 * The model of DIR/config.json as a model configuration (the vocabulary
 * padded to a multiple of 128). 0, or -1 with a message naming the file
 * and the key (a model the engine cannot compute as transformers does is
 * refused: a head_dim other than hidden_size / num_attention_heads, a
 * GPT-2 with another MLP width, LayerNorm epsilon or untied head).
 */
int hf_model_config(const char *dir, struct gpt2_config *c, char *err, size_t errlen);

/*
 * Build shard s (NULL: the whole model) of the model in DIR from its
 * weights. 0; -1 with err naming the file, the tensor and what is wrong;
 * -2 out of memory.
 */
int hf_model_load_shard(struct gpt2 *m, const char *dir, const struct gpt2_shard *s, char *err,
			size_t errlen);

/*
 * Write DIR/config.json and DIR/model.safetensors (dtype ST_F32 or
 * ST_BF16) of the whole model of config c with parameters full (llm.c's
 * layout); DIR is made (0755) if missing; both files replace any there
 * atomically. config.json gives bos_id and eos_id as bos_token_id and
 * eos_token_id when they are >= 0. 0 or -1 with a message.
 */
int hf_model_export(const struct gpt2_config *c, const float *full, const char *dir,
		    enum st_dtype dtype, int bos_id, int eos_id, char *err, size_t errlen);

#endif
