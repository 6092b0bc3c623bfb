/*
 * launcher/engine/export_tokenizer.h - what a Hugging Face export needs of
 * the tokenizer the run's data was made with, so that transformers'
 * AutoTokenizer.from_pretrained and generate() work on the exported
 * directory: the ids of a text's first and last tokens (config.json's
 * bos_token_id and eos_token_id) and the tokenizer's files beside the
 * weights.
 *
 * A checkpoint RUN/checkpoints/step_N belongs to the run whose
 * configuration is RUN/config/stork.yaml; the manifest of its first
 * training shard (NAME.manifest.json, written by `stork prep
 * --tokenizer`) names the tokenizer's file, SHA-256, format and family.
 * Byte-level shards have no manifest and no tokenizer to give.
 */
#ifndef STORK_LAUNCHER_ENGINE_EXPORT_TOKENIZER_H
#define STORK_LAUNCHER_ENGINE_EXPORT_TOKENIZER_H

#include <stddef.h>

struct export_tokenizer {
	char manifest[4200];        /* "" when the run's data has none */
	char family[16];            /* "gpt2", "llama3" */
	char format[32];            /* "tokenizer.json", "encoder.json + vocab.bpe", "tiktoken" */
	char path[4096];            /* the tokenizer's file when the shards were made */
	char sha256[65];            /* and its SHA-256 then */
	int bos_id, eos_id;         /* a text's first and last tokens; -1: unknown */
	char bos[64], eos[64];      /* their texts */
};

/*
 * The tokenizer of the run that wrote checkpoint ckpt_dir (a step_N
 * directory). 0 with e->manifest "" when there is none to find, 0 with e
 * filled, or -1 with a message naming the manifest that cannot be read.
 */
int export_tokenizer_find(const char *ckpt_dir, struct export_tokenizer *e, char *err,
			  size_t errlen);

/*
 * Its files into directory out, under the names transformers reads: a
 * tokenizer.json as it is; GPT-2's encoder.json and vocab.bpe as
 * vocab.json and merges.txt; then tokenizer_config.json naming the first
 * and last tokens. A file that changed since the shards were made (its
 * SHA-256) or a tiktoken file (no Hugging Face form) is not copied: said
 * in note ("" when all went in). 0, or -1 with a message.
 */
int export_tokenizer_write(const struct export_tokenizer *e, const char *out, char *note,
			   size_t notelen, char *err, size_t errlen);

#endif
