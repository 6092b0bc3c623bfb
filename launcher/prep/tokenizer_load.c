/*
 * launcher/prep/tokenizer_load.c - the three tokenizer file formats (see
 * tokenizer.h) into one struct tokenizer: ids with their bytes, merge
 * ranks, special tokens, the pattern.
 *
 * Byte-level vocabularies (GPT-2's and every tokenizer.json of its kind)
 * spell each byte as one printable character: GPT-2's bytes_to_unicode,
 * bytes 33-126, 161-172 and 174-255 as themselves, the 68 others as
 * U+0100 onwards in byte order. A token's name is turned back into its
 * bytes here, once; encoding then works on bytes only.
 */
#include "config.h"
#include "launcher/prep/tokenizer_impl.h"

#include "lib/formats/stork_json.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The patterns of the two families (GPT-2's; Llama 3's, also its tokenizer.json's Split). */
static const char gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char llama3_pattern[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define MAX_TOKENIZER_FILE (512u << 20)

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The byte GPT-2's bytes_to_unicode spells as code point cp, or -1. */
static int byte_of(uint32_t cp)
{
	static int16_t table[324];
	static int ready;

	if (!ready) { /* a race here writes the same values */
		int n = 0;

		for (int b = 0; b < 256; b++) {
			int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;

			table[printable ? b : 256 + n++] = (int16_t)b;
		}
		ready = 1;
	}
	return cp < 324 ? table[cp] : -1;
}

/* Decode one UTF-8 code point at *s (advancing it); -1 when malformed. */
static long utf8_next(const unsigned char **s, const unsigned char *end)
{
	const unsigned char *p = *s;
	int n = p[0] < 0x80 ? 0 : p[0] >= 0xf0 ? 3 : p[0] >= 0xe0 ? 2 : p[0] >= 0xc0 ? 1 : -1;
	long cp = n == 0 ? p[0] : n == 1 ? p[0] & 0x1f : n == 2 ? p[0] & 0x0f : p[0] & 0x07;

	if (n < 0 || p + n >= end + (n ? 0 : 1))
		return -1;
	for (int i = 1; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	*s = p + n + 1;
	return cp;
}

/* A byte-level token name into its bytes (malloc'd, *len); NULL when it is not byte-level. */
static unsigned char *name_bytes(const char *name, size_t nlen, uint32_t *len)
{
	const unsigned char *p = (const unsigned char *)name, *end = p + nlen;
	unsigned char *out = malloc(nlen + 1);
	uint32_t n = 0;

	while (out && p < end) {
		long cp = utf8_next(&p, end);
		int b = cp < 0 ? -1 : byte_of((uint32_t)cp);

		if (b < 0) {
			free(out);
			return NULL;
		}
		out[n++] = (unsigned char)b;
	}
	*len = n;
	return out;
}

/* Room for ids below n. */
static int grow_ids(struct tokenizer *t, uint32_t n)
{
	unsigned char **b;
	uint32_t *l;

	if (n <= t->ntok)
		return 0;
	b = realloc(t->bytes, n * sizeof *b);
	if (b)
		t->bytes = b;
	l = realloc(t->len, n * sizeof *l);
	if (l)
		t->len = l;
	if (!b || !l)
		return -1;
	memset(t->bytes + t->ntok, 0, (n - t->ntok) * sizeof *b);
	memset(t->len + t->ntok, 0, (n - t->ntok) * sizeof *l);
	t->ntok = n;
	return 0;
}

/* Give id the bytes (taken); regular tokens go into the vocabulary map too. */
static int set_token(struct tokenizer *t, uint32_t id, unsigned char *bytes, uint32_t len,
		     int regular, const char *path, char *err, size_t errlen)
{
	if (grow_ids(t, id + 1))
		return fail(err, errlen, "%s: out of memory", path);
	if (t->bytes[id]) {
		free(bytes);
		return fail(err, errlen, "%s: id %u is given to two tokens", path, id);
	}
	t->bytes[id] = bytes;
	t->len[id] = len;
	if (regular && bmap_put(&t->vocab, bytes, len, id))
		return fail(err, errlen, "%s: out of memory", path);
	return 0;
}

static int add_special(struct tokenizer *t, const char *text, uint32_t id, const char *path,
		       char *err, size_t errlen)
{
	char **st = realloc(t->special_text, (t->nspecial + 1) * sizeof *st);
	uint32_t *si;
	size_t n = strlen(text);
	unsigned char *b;

	if (st)
		t->special_text = st;
	si = realloc(t->special_id, (t->nspecial + 1) * sizeof *si);
	if (si)
		t->special_id = si;
	b = malloc(n + 1);
	if (!st || !si || !b || !(t->special_text[t->nspecial] = strdup(text))) {
		free(b);
		return fail(err, errlen, "%s: out of memory", path);
	}
	t->special_id[t->nspecial++] = id;
	memcpy(b, text, n + 1);
	if (id < t->ntok && t->bytes[id]) { /* also a vocabulary entry: the same id */
		free(b);
		return 0;
	}
	return set_token(t, id, b, (uint32_t)n, 0, path, err, errlen);
}

/* The single-byte tokens (and byte_fallback's <0xXX> where a byte has none). */
static void find_bytes(struct tokenizer *t, int byte_fallback)
{
	for (int b = 0; b < 256; b++) {
		unsigned char one = (unsigned char)b;
		char fb[8];

		t->has_byte[b] = bmap_get(&t->vocab, &one, 1, &t->byte_id[b]);
		snprintf(fb, sizeof fb, "<0x%02X>", b);
		if (!t->has_byte[b] && byte_fallback)
			t->has_byte[b] = bmap_get(&t->vocab, (const unsigned char *)fb, strlen(fb),
						  &t->byte_id[b]);
	}
}

static int compile(struct tokenizer *t, const char *pattern, const char *path, char *err,
		   size_t errlen)
{
	int code;
	PCRE2_SIZE at;

	t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
			      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
	if (!t->re) {
		PCRE2_UCHAR msg[160];

		pcre2_get_error_message(code, msg, sizeof msg);
		return fail(err, errlen, "%s: the pre-tokenizer's pattern at offset %zu: %s", path,
			    (size_t)at, (const char *)msg);
	}
	pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* without JIT (e.g. SELinux) it interprets */
	snprintf(t->family, sizeof t->family, "%s",
		 !strcmp(pattern, gpt2_pattern) ? "gpt2" :
		 !strcmp(pattern, llama3_pattern) ? "llama3" : "custom");
	return 0;
}

/* ----------------------------------------------------------------- merges */

/* Merge k of "a b": rank k, a's and b's ids, and the id of their concatenation. */
static int add_merge(struct tokenizer *t, const char *a, size_t la, const char *b, size_t lb,
		     uint32_t k, const char *path, char *err, size_t errlen)
{
	uint32_t ba, bb, ida, idb, idm;
	unsigned char *xa = name_bytes(a, la, &ba), *xb = name_bytes(b, lb, &bb), *xm;
	int ok;

	if (!xa || !xb) {
		free(xa);
		free(xb);
		return fail(err, errlen, "%s: merge %u (%.*s %.*s) is not byte-level", path, k,
			    (int)la, a, (int)lb, b);
	}
	xm = malloc((size_t)ba + bb + 1);
	ok = xm && bmap_get(&t->vocab, xa, ba, &ida) && bmap_get(&t->vocab, xb, bb, &idb);
	if (ok) {
		memcpy(xm, xa, ba);
		memcpy(xm + ba, xb, bb);
		ok = bmap_get(&t->vocab, xm, (size_t)ba + bb, &idm);
	}
	free(xa);
	free(xb);
	free(xm);
	if (!ok)
		return fail(err, errlen, "%s: merge %u (%.*s %.*s) names a token the vocabulary "
			    "lacks", path, k, (int)la, a, (int)lb, b);
	return pmap_put(&t->merges, ida, idb, k, idm) ? fail(err, errlen, "%s: out of memory",
								  path) : 0;
}

/* The vocabulary object (name -> id) of a tokenizer.json or an encoder.json. */
static int read_vocab(struct tokenizer *t, const json_t *vocab, const char *path, char *err,
		      size_t errlen)
{
	const char *name;
	json_t *v;

	if (!json_is_object(vocab))
		return fail(err, errlen, "%s: the vocabulary is not an object of token -> id",
			    path);
	json_object_foreach((json_t *)vocab, name, v) {
		uint32_t len;
		unsigned char *b;
		json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;

		if (id < 0 || id >= (1 << 24))
			return fail(err, errlen, "%s: token %s has id %s", path, name,
				    json_is_integer(v) ? "out of range" : "that is not an integer");
		b = name_bytes(name, strlen(name), &len);
		if (!b) /* byte_fallback's <0xXX> and the like: as written */
			b = (unsigned char *)strdup(name), len = (uint32_t)strlen(name);
		if (!b || set_token(t, (uint32_t)id, b, len, 1, path, err, errlen))
			return b ? -1 : fail(err, errlen, "%s: out of memory", path);
	}
	return 0;
}

/* ----------------------------------------------------------------- tokenizer.json */

/* The pattern a tokenizer.json's pre-tokenizer splits with, or NULL (err says why). */
static const char *hf_pattern(const json_t *pre, const char *path, char *err, size_t errlen)
{
	const char *type = json_string_value(json_object_get(pre, "type"));
	const json_t *list = json_object_get(pre, "pretokenizers"), *split, *bl;
	const char *re;

	if (type && !strcmp(type, "ByteLevel")) {
		const json_t *use = json_object_get(pre, "use_regex");

		if (use && !json_is_true(use)) {
			fail(err, errlen, "%s: a ByteLevel pre-tokenizer without its regex is not "
				 "supported", path);
			return NULL;
		}
		return gpt2_pattern;
	}
	if (!type || strcmp(type, "Sequence") || json_array_size(list) != 2) {
		fail(err, errlen, "%s: pre_tokenizer %s is not supported (byte-level BPE: ByteLevel, "
			 "or a Split by a regex then ByteLevel)", path, type ? type : "(none)");
		return NULL;
	}
	split = json_array_get(list, 0);
	bl = json_array_get(list, 1);
	re = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
	if (strcmp(json_string_value(json_object_get(split, "type")) ?: "", "Split") || !re ||
	    strcmp(json_string_value(json_object_get(split, "behavior")) ?: "", "Isolated") ||
	    json_is_true(json_object_get(split, "invert")) ||
	    strcmp(json_string_value(json_object_get(bl, "type")) ?: "", "ByteLevel") ||
	    json_is_true(json_object_get(bl, "use_regex"))) {
		fail(err, errlen, "%s: pre_tokenizer Sequence: only [Split (a Regex, Isolated), "
			 "ByteLevel (use_regex false)] is supported", path);
		return NULL;
	}
	return re;
}

static int load_hf(struct tokenizer *t, json_t *root, const char *path, char *err, size_t errlen)
{
	const json_t *model = json_object_get(root, "model"), *merges, *added, *norm;
	const char *type = json_string_value(json_object_get(model, "type")), *pattern;
	const json_t *pre = json_object_get(root, "pre_tokenizer");
	size_t k;
	json_t *m;

	if (!type || strcmp(type, "BPE"))
		return fail(err, errlen, "%s: model.type %s is not supported: byte-level BPE only "
			    "(GPT-2, Llama 3 and the like; a SentencePiece Unigram or WordPiece "
			    "tokenizer is not)", path, type ? type : "(none)");
	norm = json_object_get(root, "normalizer");
	if (norm && !json_is_null(norm))
		return fail(err, errlen, "%s: a normalizer (%s) is not supported", path,
			    json_string_value(json_object_get(norm, "type")) ?: "?");
	if (!(pattern = hf_pattern(pre, path, err, errlen)) || compile(t, pattern, path, err, errlen))
		return -1;
	if (json_is_true(json_object_get(pre, "add_prefix_space")))
		return fail(err, errlen, "%s: ByteLevel add_prefix_space is not supported", path);
	snprintf(t->format, sizeof t->format, "tokenizer.json");
	t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
	if (read_vocab(t, json_object_get(model, "vocab"), path, err, errlen))
		return -1;
	merges = t->ids_only ? NULL : json_object_get(model, "merges");
	json_array_foreach(merges, k, m) {
		const char *s = json_string_value(m), *sp;
		int rc;

		if (s && (sp = strchr(s, ' ')))
			rc = add_merge(t, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), (uint32_t)k, path,
				       err, errlen);
		else if (json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
			 json_is_string(json_array_get(m, 1)))
			rc = add_merge(t, json_string_value(json_array_get(m, 0)),
				       json_string_length(json_array_get(m, 0)),
				       json_string_value(json_array_get(m, 1)),
				       json_string_length(json_array_get(m, 1)), (uint32_t)k, path, err,
				       errlen);
		else
			rc = fail(err, errlen, "%s: merge %zu is neither \"a b\" nor [a, b]", path, k);
		if (rc)
			return -1;
	}
	added = json_object_get(root, "added_tokens");
	json_array_foreach(added, k, m) {
		json_int_t id = json_integer_value(json_object_get(m, "id"));
		const char *content = json_string_value(json_object_get(m, "content"));

		if (!content || id < 0 || id >= (1 << 24))
			return fail(err, errlen, "%s: added token %zu has no content or id", path, k);
		if (add_special(t, content, (uint32_t)id, path, err, errlen))
			return -1;
	}
	find_bytes(t, json_is_true(json_object_get(model, "byte_fallback")));
	return 0;
}

/* ----------------------------------------------------------------- encoder.json + vocab.bpe */

static int load_openai(struct tokenizer *t, json_t *root, const char *path, char *err,
		       size_t errlen)
{
	char bpe_path[4200], *line = NULL, *slash;
	size_t cap = 0;
	ssize_t n;
	uint32_t k = 0, eot;
	FILE *f;
	int rc = 0;

	snprintf(t->format, sizeof t->format, "encoder.json + vocab.bpe");
	if (compile(t, gpt2_pattern, path, err, errlen) || read_vocab(t, root, path, err, errlen))
		return -1;
	snprintf(bpe_path, sizeof bpe_path, "%s", path);
	slash = strrchr(bpe_path, '/');
	snprintf(slash ? slash + 1 : bpe_path, sizeof bpe_path - (size_t)(slash ? slash + 1 - bpe_path : 0),
		 "vocab.bpe");
	if (!(f = fopen(bpe_path, "r")))
		return fail(err, errlen, "%s: its merges, %s: %s", path, bpe_path, strerror(errno));
	while (!rc && !t->ids_only && (n = getline(&line, &cap, f)) > 0) {
		char *sp;

		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (!n || !strncmp(line, "#version", 8))
			continue;
		if (!(sp = strchr(line, ' ')))
			rc = fail(err, errlen, "%s: line %u is not a merge \"a b\"", bpe_path, k + 1);
		else
			rc = add_merge(t, line, (size_t)(sp - line), sp + 1, strlen(sp + 1), k++,
				       bpe_path, err, errlen);
	}
	free(line);
	fclose(f);
	if (rc)
		return -1;
	if (bmap_get(&t->vocab, (const unsigned char *)"<|endoftext|>", 13, &eot) &&
	    add_special(t, "<|endoftext|>", eot, path, err, errlen))
		return -1;
	find_bytes(t, 0);
	return 0;
}

/* ----------------------------------------------------------------- tiktoken */

static int b64_value(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 :
	       c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 (with = padding) into out; the byte count, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
	long o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = b64_value((unsigned char)s[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return o;
}

/* tiktoken's special tokens for the vocabularies it knows by size. */
static int tiktoken_specials(struct tokenizer *t, uint32_t ranks, const char *path, char *err,
			     size_t errlen)
{
	if (ranks == 50256) {
		if (compile(t, gpt2_pattern, path, err, errlen))
			return -1;
		return add_special(t, "<|endoftext|>", 50256, path, err, errlen);
	}
	if (ranks == 128000) {
		if (compile(t, llama3_pattern, path, err, errlen) ||
		    add_special(t, "<|begin_of_text|>", 128000, path, err, errlen) ||
		    add_special(t, "<|end_of_text|>", 128001, path, err, errlen))
			return -1;
		for (uint32_t id = 128002; id < 128256; id++) {
			char name[48];

			snprintf(name, sizeof name, "<|reserved_special_token_%u|>", id - 128002);
			if (add_special(t, name, id, path, err, errlen))
				return -1;
		}
		return 0;
	}
	return fail(err, errlen, "%s: %u ranks: a tiktoken file of GPT-2 (50256 ranks) or Llama 3 "
		    "(128000) is supported; for another, use its tokenizer.json", path, ranks);
}

static int load_tiktoken(struct tokenizer *t, const char *path, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned long lineno = 0;
	FILE *f = fopen(path, "r");
	int rc = 0;

	if (!f)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	snprintf(t->format, sizeof t->format, "tiktoken");
	t->ranks_are_ids = 1;
	t->ignore_merges = 1;
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		char *sp = memchr(line, ' ', (size_t)n), *end;
		unsigned char *b = malloc((size_t)n);
		long len = sp ? b64_decode(line, (size_t)(sp - line), b) : -1;
		unsigned long rank = sp ? strtoul(sp + 1, &end, 10) : 0;

		lineno++;
		if (!b || len <= 0 || !sp || (*end && *end != '\n' && *end != '\r') ||
		    rank >= (1u << 24)) {
			free(b);
			rc = fail(err, errlen, "%s: line %lu is not \"BASE64 RANK\"", path, lineno);
		} else {
			rc = set_token(t, (uint32_t)rank, b, (uint32_t)len, 1, path, err, errlen);
		}
	}
	free(line);
	fclose(f);
	if (rc)
		return -1;
	if (t->ntok != lineno)
		return fail(err, errlen, "%s: %lu ranks but ids up to %u: the ranks must be 0 .. N-1",
			    path, lineno, t->ntok - 1);
	if (tiktoken_specials(t, t->ntok, path, err, errlen))
		return -1;
	find_bytes(t, 0);
	return 0;
}

/* ----------------------------------------------------------------- tok_load */

static struct tokenizer *load(const char *path, int ids_only, char *err, size_t errlen)
{
	struct tokenizer *t = calloc(1, sizeof *t);
	FILE *f;
	int c, rc;

	if (!t) {
		fail(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	if (!(f = fopen(path, "r"))) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		free(t);
		return NULL;
	}
	t->ids_only = ids_only;
	while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
		;
	fclose(f);
	if (c == '{') {
		json_t *root = sj_load_file_strict(path, MAX_TOKENIZER_FILE, err, errlen);

		rc = !root ? -1 :
		     json_is_object(json_object_get(root, "model")) ? load_hf(t, root, path, err, errlen) :
						      load_openai(t, root, path, err, errlen);
		json_decref(root);
	} else {
		rc = load_tiktoken(t, path, err, errlen);
	}
	if (!rc) {
		for (int b = 0; b < 256; b++)
			if (!t->has_byte[b]) {
				rc = fail(err, errlen, "%s: byte 0x%02x has no token: not a byte-level "
					  "vocabulary", path, b);
				break;
			}
	}
	if (rc) {
		tok_free(t);
		return NULL;
	}
	return t;
}

struct tokenizer *tok_load(const char *path, char *err, size_t errlen)
{
	return load(path, 0, err, errlen);
}

struct tokenizer *tok_load_ids(const char *path, char *err, size_t errlen)
{
	return load(path, 1, err, errlen);
}
