/*
 * launcher/prep/tokenizer.h - byte-level BPE tokenizers (GPT-2, Llama 3 and the
 * models shaped like them) read from the files users have, for `stork
 * prep`: exact ids, as the reference implementations give them.
 *
 * Formats (tok_load tells them apart by content):
 *   - Hugging Face tokenizer.json: model.type "BPE" over a byte-level
 *     vocabulary; the pre-tokenizer's regex (a Split of a Regex pattern, or
 *     ByteLevel's own GPT-2 pattern), ignore_merges, byte_fallback and the
 *     added (special) tokens honoured. Another model type (SentencePiece's
 *     Unigram, WordPiece), a normalizer or another pre-tokenizer is refused
 *     by name.
 *   - OpenAI's GPT-2 pair: encoder.json (token -> id) with vocab.bpe (the
 *     merges) beside it; GPT-2's pattern; <|endoftext|> from encoder.json.
 *   - tiktoken rank files: lines "BASE64 RANK"; the pattern and the special
 *     tokens from the vocabulary's size: 50256 ranks are GPT-2's
 *     (r50k_base, <|endoftext|> = 50256), 128000 Llama 3's (its 256
 *     special tokens from 128000 on).
 *
 * Encoding: the text is cut into pieces by the pattern (PCRE2, UTF and
 * Unicode properties on, JIT-compiled once); each piece, as bytes, starts
 * as one token per byte and merges the adjacent pair of lowest rank (the
 * leftmost among equals) until no pair merges: HF's and tiktoken's BPE.
 * With ignore_merges (Llama 3's tokenizer.json, and every tiktoken file) a
 * piece that is itself a token is that token. Special tokens in the text
 * are text: they are never produced from input (documents are separated
 * by the caller). A state per thread caches the pieces it has seen.
 */
#ifndef STORK_LAUNCHER_TOKENIZER_H
#define STORK_LAUNCHER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tokenizer;
struct tok_state;

/* A growing array of token ids. */
struct tok_ids {
	uint32_t *v;
	size_t n, cap;
};

/*
 * Load the tokenizer in path: a tokenizer.json, an encoder.json (vocab.bpe
 * beside it) or a tiktoken rank file. NULL with "PATH: what" in err.
 */
struct tokenizer *tok_load(const char *path, char *err, size_t errlen);

/*
 * tok_load for decoding only: the ids and their bytes, the merges (the
 * slow part of a large tokenizer.json) left unread. It cannot encode.
 */
struct tokenizer *tok_load_ids(const char *path, char *err, size_t errlen);
void tok_free(struct tokenizer *t);

/* The ids' range: the largest id + 1 (special tokens included). */
uint32_t tok_vocab_size(const struct tokenizer *t);

/* What the file is: "tokenizer.json", "encoder.json + vocab.bpe" or "tiktoken". */
const char *tok_format(const struct tokenizer *t);

/* The pattern's family: "gpt2", "llama3" or "custom" (another tokenizer.json regex). */
const char *tok_family(const struct tokenizer *t);

/*
 * The token that starts every document: <|begin_of_text|> where the
 * tokenizer has it (Llama 3), else <|endoftext|> (GPT-2, as llm.c's data
 * scripts put it before each document). -1 when it has neither.
 */
int64_t tok_doc_token(const struct tokenizer *t, const char **text);

/* Special tokens: their number, and the i-th's text and id. */
size_t tok_special_count(const struct tokenizer *t);
const char *tok_special(const struct tokenizer *t, size_t i, uint32_t *id);

/* A state for one thread (its piece cache); NULL when out of memory. */
struct tok_state *tok_state_new(const struct tokenizer *t);
void tok_state_free(struct tok_state *s);

/*
 * Append the ids of len bytes of text to out. 0; -1 with err (out of
 * memory, text that is not UTF-8, a byte no token stands for).
 */
int tok_encode(struct tok_state *s, const char *text, size_t len, struct tok_ids *out, char *err,
	       size_t errlen);

/* The bytes id stands for (NULL for an id outside the vocabulary), their count in *len. */
const unsigned char *tok_bytes(const struct tokenizer *t, uint32_t id, size_t *len);

/* Append one id. 0 or -1 (memory). */
int tok_ids_push(struct tok_ids *ids, uint32_t id);
void tok_ids_free(struct tok_ids *ids);

#endif
