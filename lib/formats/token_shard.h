/*
 * lib/formats/token_shard.h - the llm.c token shard file, which `stork prep` writes
 * and storkd's data loader (daemon/engine/data/data.h) reads: a header of
 * DATA_HEADER_INTS little-endian int32 (DATA_MAGIC, DATA_VERSION, the token
 * count, then zeros) followed by that many uint16 tokens. The format is
 * llm.c's, so its data preparation scripts and Stork's are interchangeable.
 *
 * One int of the header's zeros carries what llm.c leaves unsaid: int
 * DATA_HEADER_VOCAB is the vocabulary the tokens were made for (`stork
 * prep` writes 257), 0 where the writer did not say (llm.c's scripts).
 * llm.c's readers ignore it.
 *
 * Vocabularies above 65,535 tokens (Llama 3's 128,256) need wider ids:
 * llm.c's second kind of shard, magic DATA_MAGIC_U32 and version
 * DATA_VERSION_U32, holds uint32 tokens after the same header. The
 * header says which; a reader takes both.
 */
#ifndef STORK_TOKEN_SHARD_H
#define STORK_TOKEN_SHARD_H

#define DATA_MAGIC 20240520
#define DATA_VERSION 1
#define DATA_MAGIC_U32 20240801
#define DATA_VERSION_U32 7
#define DATA_HEADER_INTS 256
#define DATA_HEADER_BYTES (DATA_HEADER_INTS * 4)
#define DATA_HEADER_VOCAB 3

#include <stddef.h>
#include <stdint.h>

/* What a shard's header says. */
struct token_shard {
	uint64_t ntok;                /* tokens after the header */
	int vocab;                    /* DATA_HEADER_VOCAB; 0: not said */
	int token_bytes;              /* 2 (uint16 tokens) or 4 (uint32) */
};

/*
 * Read path's header and hold it against the file: magic, version, token
 * count, and the size the count implies. Returns 0 with s filled, or
 * STORK_EXIT_DATA with err naming the file and what is wrong.
 */
int token_shard_check(const char *path, struct token_shard *s, char *err, size_t errlen);

/*
 * The whole size of a shard whose first three header ints (magic, version,
 * token count, as read from the file) are h: 0 with *bytes set, or -1 when
 * they are not those of a token shard.
 */
int token_shard_promise(const int32_t h[3], uint64_t *bytes);

/*
 * The manifest `stork prep --tokenizer` wrote beside shard
 * DIR/NAME_{train,val}[_NNNNNN].bin: DIR/NAME.manifest.json into out
 * (whether it exists or not). 0, or -1 when the shard is not named so or
 * the path does not fit.
 */
int token_shard_manifest_path(const char *shard, char *out, size_t len);

#endif
