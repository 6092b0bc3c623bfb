/*
 * launcher/prep/tokenizer_impl.h - what tokenizer.c (encoding) and
 * tokenizer_load.c (the file formats) share; private to them.
 */
#ifndef STORK_LAUNCHER_TOKENIZER_IMPL_H
#define STORK_LAUNCHER_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include "launcher/prep/tokenizer.h"

#include <pcre2.h>
#include <stdio.h>

/* Bytes -> id, open addressing; the keys are the caller's memory. */
struct bmap {
	uint64_t *hash;
	const unsigned char **key;
	uint32_t *klen, *val;
	size_t cap, count;
};

/* (token, token) -> (merge rank, merged token). */
struct pmap {
	uint64_t *key;
	uint32_t *rank, *merged;
	size_t cap, count;
};

int bmap_put(struct bmap *m, const unsigned char *key, uint32_t klen, uint32_t val);
int bmap_get(const struct bmap *m, const unsigned char *key, size_t klen, uint32_t *val);
void bmap_free(struct bmap *m);
int pmap_put(struct pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t merged);
void pmap_free(struct pmap *m);

struct tokenizer {
	char format[32];          /* tok_format */
	char family[16];          /* tok_family */
	uint32_t ntok;            /* ids 0 .. ntok - 1 */
	unsigned char **bytes;    /* per id its bytes (NULL: no such id) */
	uint32_t *len;
	struct bmap vocab;        /* the regular tokens' bytes -> id */
	struct pmap merges;       /* merge ranks (HF, vocab.bpe) */
	int ranks_are_ids;        /* tiktoken: a pair's rank is the id of its bytes */
	int ignore_merges;        /* a piece that is a token is that token */
	int ids_only;             /* tok_load_ids: no merges read, no encoding */
	uint32_t byte_id[256];    /* the token of each single byte */
	int has_byte[256];
	char **special_text;      /* special (added) tokens */
	uint32_t *special_id;
	size_t nspecial;
	pcre2_code *re;           /* the pre-tokenizer's pattern */
};

#endif
