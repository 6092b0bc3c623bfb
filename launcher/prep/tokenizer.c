/*
 * launcher/prep/tokenizer.c - see tokenizer.h: the pieces (PCRE2), the BPE
 * merges, the per-thread piece cache, and the hash tables they use. The
 * file formats are read in tokenizer_load.c.
 */
#include "config.h"
#include "launcher/prep/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ----------------------------------------------------------------- tables */

static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
	return XXH3_64bits(p, n) | 1; /* 0 marks an empty slot */
}

static int bmap_grow(struct bmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	struct bmap n = { .cap = cap };

	n.hash = calloc(cap, sizeof *n.hash);
	n.key = calloc(cap, sizeof *n.key);
	n.klen = calloc(cap, sizeof *n.klen);
	n.val = calloc(cap, sizeof *n.val);
	if (!n.hash || !n.key || !n.klen || !n.val) {
		bmap_free(&n);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->hash[i])
			continue;
		for (j = m->hash[i] & (cap - 1); n.hash[j]; j = (j + 1) & (cap - 1))
			;
		n.hash[j] = m->hash[i];
		n.key[j] = m->key[i];
		n.klen[j] = m->klen[i];
		n.val[j] = m->val[i];
	}
	n.count = m->count;
	bmap_free(m);
	*m = n;
	return 0;
}

int bmap_put(struct bmap *m, const unsigned char *key, uint32_t klen, uint32_t val)
{
	uint64_t h = hash_bytes(key, klen);
	size_t j;

	if ((m->count + 1) * 2 > m->cap && bmap_grow(m))
		return -1;
	for (j = h & (m->cap - 1); m->hash[j]; j = (j + 1) & (m->cap - 1))
		if (m->hash[j] == h && m->klen[j] == klen && !memcmp(m->key[j], key, klen)) {
			m->val[j] = val; /* the key is the caller's: kept as first given */
			return 0;
		}
	m->hash[j] = h;
	m->key[j] = key;
	m->klen[j] = klen;
	m->val[j] = val;
	m->count++;
	return 0;
}

int bmap_get(const struct bmap *m, const unsigned char *key, size_t klen, uint32_t *val)
{
	uint64_t h;

	if (!m->cap)
		return 0;
	h = hash_bytes(key, klen);
	for (size_t j = h & (m->cap - 1); m->hash[j]; j = (j + 1) & (m->cap - 1))
		if (m->hash[j] == h && m->klen[j] == klen && !memcmp(m->key[j], key, klen)) {
			*val = m->val[j];
			return 1;
		}
	return 0;
}

void bmap_free(struct bmap *m)
{
	free(m->hash);
	free(m->key);
	free(m->klen);
	free(m->val);
	memset(m, 0, sizeof *m);
}

static uint64_t pair_key(uint32_t a, uint32_t b)
{
	return ((uint64_t)a << 32 | b) + 1; /* never 0 */
}

static int pmap_grow(struct pmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	struct pmap n = { .cap = cap };

	n.key = calloc(cap, sizeof *n.key);
	n.rank = calloc(cap, sizeof *n.rank);
	n.merged = calloc(cap, sizeof *n.merged);
	if (!n.key || !n.rank || !n.merged) {
		pmap_free(&n);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->key[i])
			continue;
		for (j = XXH3_64bits(&m->key[i], 8) & (cap - 1); n.key[j]; j = (j + 1) & (cap - 1))
			;
		n.key[j] = m->key[i];
		n.rank[j] = m->rank[i];
		n.merged[j] = m->merged[i];
	}
	n.count = m->count;
	pmap_free(m);
	*m = n;
	return 0;
}

int pmap_put(struct pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t merged)
{
	uint64_t k = pair_key(a, b);
	size_t j;

	if ((m->count + 1) * 2 > m->cap && pmap_grow(m))
		return -1;
	for (j = XXH3_64bits(&k, 8) & (m->cap - 1); m->key[j]; j = (j + 1) & (m->cap - 1))
		if (m->key[j] == k)
			return 0; /* the first (lowest) rank of a pair stands */
	m->key[j] = k;
	m->rank[j] = rank;
	m->merged[j] = merged;
	m->count++;
	return 0;
}

static int pmap_get(const struct pmap *m, uint32_t a, uint32_t b, uint32_t *rank,
		    uint32_t *merged)
{
	uint64_t k = pair_key(a, b);

	if (!m->cap)
		return 0;
	for (size_t j = XXH3_64bits(&k, 8) & (m->cap - 1); m->key[j]; j = (j + 1) & (m->cap - 1))
		if (m->key[j] == k) {
			*rank = m->rank[j];
			*merged = m->merged[j];
			return 1;
		}
	return 0;
}

void pmap_free(struct pmap *m)
{
	free(m->key);
	free(m->rank);
	free(m->merged);
	memset(m, 0, sizeof *m);
}

/* ----------------------------------------------------------------- ids */

int tok_ids_push(struct tok_ids *ids, uint32_t id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 256;
		uint32_t *v = realloc(ids->v, cap * sizeof *v);

		if (!v)
			return -1;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

void tok_ids_free(struct tok_ids *ids)
{
	free(ids->v);
	memset(ids, 0, sizeof *ids);
}

/* ----------------------------------------------------------------- accessors */

uint32_t tok_vocab_size(const struct tokenizer *t)
{
	return t->ntok;
}

const char *tok_format(const struct tokenizer *t)
{
	return t->format;
}

const char *tok_family(const struct tokenizer *t)
{
	return t->family;
}

const unsigned char *tok_bytes(const struct tokenizer *t, uint32_t id, size_t *len)
{
	if (id >= t->ntok || !t->bytes[id])
		return NULL;
	*len = t->len[id];
	return t->bytes[id];
}

size_t tok_special_count(const struct tokenizer *t)
{
	return t->nspecial;
}

const char *tok_special(const struct tokenizer *t, size_t i, uint32_t *id)
{
	*id = t->special_id[i];
	return t->special_text[i];
}

int64_t tok_doc_token(const struct tokenizer *t, const char **text)
{
	static const char *const prefer[] = { "<|begin_of_text|>", "<|endoftext|>" };

	for (size_t p = 0; p < 2; p++)
		for (size_t i = 0; i < t->nspecial; i++)
			if (!strcmp(t->special_text[i], prefer[p])) {
				*text = t->special_text[i];
				return t->special_id[i];
			}
	*text = NULL;
	return -1;
}

void tok_free(struct tokenizer *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->ntok; i++)
		free(t->bytes[i]);
	free(t->bytes);
	free(t->len);
	for (size_t i = 0; i < t->nspecial; i++)
		free(t->special_text[i]);
	free(t->special_text);
	free(t->special_id);
	bmap_free(&t->vocab);
	pmap_free(&t->merges);
	if (t->re)
		pcre2_code_free(t->re);
	free(t);
}

/* ----------------------------------------------------------------- BPE */

struct tok_state {
	const struct tokenizer *t;
	pcre2_match_data *md;
	struct bmap cache;        /* piece -> offset of its ids in pool (ids: count, then ids) */
	unsigned char *keys;      /* the cached pieces' bytes */
	size_t keys_n, keys_cap;
	struct tok_ids pool;
	uint32_t *parts, *ranks;  /* BPE scratch of the piece at hand */
	size_t parts_cap;
};

#define CACHE_MAX_PIECES (1u << 20)
#define CACHE_MAX_PIECE 256 /* longer pieces (whitespace runs) are not cached */

struct tok_state *tok_state_new(const struct tokenizer *t)
{
	struct tok_state *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->t = t;
	if (!(s->md = pcre2_match_data_create_from_pattern(t->re, NULL))) {
		free(s);
		return NULL;
	}
	return s;
}

void tok_state_free(struct tok_state *s)
{
	if (!s)
		return;
	pcre2_match_data_free(s->md);
	bmap_free(&s->cache);
	free(s->keys);
	tok_ids_free(&s->pool);
	free(s->parts);
	free(s->ranks);
	free(s);
}

/* The rank of merging tokens a and b, and the token it makes; 0 when they do not merge. */
static int pair_rank(const struct tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank,
		     uint32_t *merged)
{
	unsigned char buf[1024];
	size_t la = t->len[a], lb = t->len[b];

	if (!t->ranks_are_ids)
		return pmap_get(&t->merges, a, b, rank, merged);
	/* tiktoken: a pair merges when its bytes are a token, ranked by that token's id */
	if (la + lb > sizeof buf)
		return 0;
	memcpy(buf, t->bytes[a], la);
	memcpy(buf + la, t->bytes[b], lb);
	if (!bmap_get(&t->vocab, buf, la + lb, merged))
		return 0;
	*rank = *merged;
	return 1;
}

static int grow_parts(struct tok_state *s, size_t n)
{
	uint32_t *p, *r;

	if (n <= s->parts_cap)
		return 0;
	p = realloc(s->parts, n * sizeof *p);
	if (p)
		s->parts = p;
	r = realloc(s->ranks, n * sizeof *r);
	if (r)
		s->ranks = r;
	if (!p || !r)
		return -1;
	s->parts_cap = n;
	return 0;
}

/* The byte tokens of piece into s->parts; their count, or -1 (a byte no token stands for). */
static long byte_tokens(struct tok_state *s, const unsigned char *piece, size_t n, char *err,
			size_t errlen)
{
	const struct tokenizer *t = s->t;

	if (grow_parts(s, n + 1)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!t->has_byte[piece[i]]) {
			snprintf(err, errlen, "byte 0x%02x has no token in this vocabulary",
				 piece[i]);
			return -1;
		}
		s->parts[i] = t->byte_id[piece[i]];
	}
	return (long)n;
}

/*
 * BPE of one piece into out: merge the adjacent pair of lowest rank (the
 * leftmost of equal ranks) until none merges. ranks[i] is the rank of the
 * pair (parts[i], parts[i+1]), UINT32_MAX when it does not merge.
 */
static int bpe(struct tok_state *s, const unsigned char *piece, size_t len, struct tok_ids *out,
	       char *err, size_t errlen)
{
	const struct tokenizer *t = s->t;
	uint32_t *p, *r, merged;
	long n = byte_tokens(s, piece, len, err, errlen);

	if (n < 0)
		return -1;
	p = s->parts;
	r = s->ranks;
	for (long i = 0; i + 1 < n; i++)
		if (!pair_rank(t, p[i], p[i + 1], &r[i], &merged))
			r[i] = UINT32_MAX;
	while (n > 1) {
		long best = -1;
		uint32_t low = UINT32_MAX;

		for (long i = 0; i + 1 < n; i++)
			if (r[i] < low) {
				low = r[i];
				best = i;
			}
		if (best < 0)
			break;
		pair_rank(t, p[best], p[best + 1], &low, &merged);
		p[best] = merged;
		memmove(p + best + 1, p + best + 2, (size_t)(n - best - 2) * sizeof *p);
		memmove(r + best + 1, r + best + 2, (size_t)(n - best - 2) * sizeof *r);
		n--;
		if (best > 0 && !pair_rank(t, p[best - 1], p[best], &r[best - 1], &merged))
			r[best - 1] = UINT32_MAX;
		if (best + 1 < n && !pair_rank(t, p[best], p[best + 1], &r[best], &merged))
			r[best] = UINT32_MAX;
	}
	for (long i = 0; i < n; i++)
		if (tok_ids_push(out, p[i])) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	return 0;
}

/* Forget the cache (it grew past CACHE_MAX_PIECES): its keys point into s->keys. */
static void cache_reset(struct tok_state *s)
{
	bmap_free(&s->cache);
	s->keys_n = 0;
	s->pool.n = 0;
}

/* Remember piece's ids (the last cnt of out). */
static void cache_put(struct tok_state *s, const unsigned char *piece, size_t len,
		      const uint32_t *ids, size_t cnt)
{
	size_t off;

	if (len > CACHE_MAX_PIECE || s->cache.count >= CACHE_MAX_PIECES)
		return;
	if (s->keys_n + len > s->keys_cap) {
		/* the table holds pointers into keys: start over rather than move them */
		if (s->keys_cap)
			cache_reset(s);
		if (!s->keys_cap) {
			s->keys_cap = 16u << 20;
			if (!(s->keys = malloc(s->keys_cap))) {
				s->keys_cap = 0;
				return;
			}
		}
	}
	off = s->pool.n;
	if (tok_ids_push(&s->pool, (uint32_t)cnt))
		return;
	for (size_t i = 0; i < cnt; i++)
		if (tok_ids_push(&s->pool, ids[i]))
			return;
	memcpy(s->keys + s->keys_n, piece, len);
	if (bmap_put(&s->cache, s->keys + s->keys_n, (uint32_t)len, (uint32_t)off) == 0)
		s->keys_n += len;
}

/* One piece's ids appended to out: whole when it is a token (ignore_merges), cached, or BPE. */
static int encode_piece(struct tok_state *s, const unsigned char *piece, size_t len,
			struct tok_ids *out, char *err, size_t errlen)
{
	const struct tokenizer *t = s->t;
	uint32_t v;
	size_t before = out->n;

	if (t->ignore_merges && bmap_get(&t->vocab, piece, len, &v))
		return tok_ids_push(out, v) ? (snprintf(err, errlen, "out of memory"), -1) : 0;
	if (bmap_get(&s->cache, piece, len, &v)) {
		for (uint32_t i = 0; i < s->pool.v[v]; i++)
			if (tok_ids_push(out, s->pool.v[v + 1 + i])) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		return 0;
	}
	if (bpe(s, piece, len, out, err, errlen))
		return -1;
	cache_put(s, piece, len, out->v + before, out->n - before);
	return 0;
}

int tok_encode(struct tok_state *s, const char *text, size_t len, struct tok_ids *out, char *err,
	       size_t errlen)
{
	const unsigned char *u = (const unsigned char *)text;
	size_t at = 0;

	if (s->t->ids_only) {
		snprintf(err, errlen, "a tokenizer loaded for decoding cannot encode");
		return -1;
	}

	while (at < len) {
		int rc = pcre2_match(s->t->re, u, len, at, 0, s->md, NULL);
		PCRE2_SIZE *ov;
		size_t start, end;

		if (rc == PCRE2_ERROR_NOMATCH) {
			start = end = len;
		} else if (rc < 0) {
			PCRE2_UCHAR msg[160];

			pcre2_get_error_message(rc, msg, sizeof msg);
			snprintf(err, errlen, "at byte %zu: %s", at, (const char *)msg);
			return -1;
		} else {
			ov = pcre2_get_ovector_pointer(s->md);
			start = ov[0];
			end = ov[1];
		}
		/* text between matches is a piece of its own (HF's "Isolated") */
		if (start > at && encode_piece(s, u + at, start - at, out, err, errlen))
			return -1;
		if (end > start && encode_piece(s, u + start, end - start, out, err, errlen))
			return -1;
		if (end == start) { /* an empty match: step over one character */
			if (end >= len)
				break;
			end = start + 1;
			while (end < len && (u[end] & 0xc0) == 0x80)
				end++;
			if (encode_piece(s, u + start, end - start, out, err, errlen))
				return -1;
		}
		at = end;
	}
	return 0;
}
