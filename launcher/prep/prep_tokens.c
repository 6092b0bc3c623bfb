/*
 * launcher/prep/prep_tokens.c - `stork prep --tokenizer FILE`: documents into
 * llm.c token shards through a real tokenizer (launcher/prep/tokenizer.h), on
 * every core, and `stork prep --decode` back to text.
 *
 * Documents: each input file is one (directories give their files in name
 * order, a glob its matches in name order), or each non-empty line with --split-lines, or the string field
 * --field of each line of a JSON Lines file. Every document starts with
 * the tokenizer's document token (Llama 3's <|begin_of_text|>, GPT-2's
 * <|endoftext|>: what llm.c's data scripts do). The first (1 - F) of the
 * input's bytes go to training, the rest to validation, the cut moved to
 * the next line start, validation starting a document of its own.
 *
 * Threads: the documents of one input file are encoded by --threads
 * threads (default: the CPUs this process may use), each taking the next
 * document in turn; the ids are written in document order, so the output
 * does not depend on the threads.
 *
 * Output: NAME_train.bin and NAME_val.bin (or NAME_train_000000.bin ...
 * every --shard-tokens tokens), 16-bit ids when the vocabulary fits, else
 * llm.c's 32-bit shards, each header naming the vocabulary; and
 * NAME.manifest.json (the tokenizer's file, SHA-256 and kind, the
 * vocabulary, special tokens, documents, tokens, shards), which `stork
 * run` holds against the model before the job starts.
 */
#include "config.h"
#include "launcher/prep/prep.h"
#include "launcher/prep/prep_tokens.h"
#include "launcher/sha256_file.h"
#include "launcher/prep/tokenizer.h"
#include "lib/io/atomic_file.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/formats/stork_json.h"
#include "lib/formats/token_shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One document: bytes of its file's text (or of a decoded JSON string). */
struct doc {
	const char *text;
	size_t len;
	int val;             /* the first document of validation, or after it */
	struct tok_ids ids;
	char err[256];
	int failed;
};

/* Where the output stands. */
struct out_set {
	const struct prep_opts *o;
	int token_bytes;
	uint32_t vocab;
	double encode_s;     /* time spent encoding (the threads' part) */
	struct shards {
		const char *kind;             /* "train", "val" */
		int fd, index;
		char path[PATH_MAX], tmp[PATH_MAX];
		uint64_t ntok, total, docs;
		json_t *names;
		unsigned char buf[1 << 16];
		size_t nbuf;
	} part[2];
};

/* ----------------------------------------------------------------- shards */

static int shard_open(struct out_set *s, struct shards *p)
{
	static const char zero[DATA_HEADER_BYTES];
	const struct prep_opts *o = s->o;

	if (o->shard_tokens)
		snprintf(p->path, sizeof p->path, "%s/%s_%s_%06d.bin", o->dir, o->name, p->kind,
			 p->index);
	else
		snprintf(p->path, sizeof p->path, "%s/%s_%s.bin", o->dir, o->name, p->kind);
	p->ntok = 0;
	p->nbuf = 0;
	p->fd = atomic_tmp_open(p->path, p->tmp, sizeof p->tmp, 0644);
	if (p->fd < 0 || write_all(p->fd, zero, sizeof zero)) {
		stork_error("prep: cannot write beside %s: %s", p->path, strerror(errno));
		return -1;
	}
	return 0;
}

static int shard_flush(struct shards *p)
{
	if (write_all(p->fd, p->buf, p->nbuf)) {
		stork_error("prep: cannot write %s: %s", p->tmp, strerror(errno));
		return -1;
	}
	p->nbuf = 0;
	return 0;
}

/* Header, fsync, rename into place; the name joins the manifest's list. */
static int shard_commit(struct out_set *s, struct shards *p)
{
	int32_t h[DATA_HEADER_INTS] = { s->token_bytes == 2 ? DATA_MAGIC : DATA_MAGIC_U32,
					s->token_bytes == 2 ? DATA_VERSION : DATA_VERSION_U32,
					(int32_t)p->ntok };
	const char *base = strrchr(p->path, '/');

	h[DATA_HEADER_VOCAB] = (int32_t)s->vocab;
	if (shard_flush(p))
		return -1;
	if (pwrite_all(p->fd, h, sizeof h, 0) || fsync(p->fd) || close(p->fd) ||
	    rename(p->tmp, p->path)) {
		stork_error("prep: cannot write %s: %s", p->path, strerror(errno));
		return -1;
	}
	p->fd = -1;
	json_array_append_new(p->names, json_string(base ? base + 1 : p->path));
	printf("wrote %s: %llu tokens\n", p->path, (unsigned long long)p->ntok);
	p->index++;
	return 0;
}

static int shard_put(struct out_set *s, struct shards *p, uint32_t id)
{
	if (p->fd < 0 && shard_open(s, p))
		return -1;
	for (int b = 0; b < s->token_bytes; b++) /* little-endian, as the header */
		p->buf[p->nbuf++] = (unsigned char)(id >> (8 * b));
	p->ntok++;
	p->total++;
	if (p->nbuf + 4 > sizeof p->buf && shard_flush(p))
		return -1;
	if (p->ntok >= (s->o->shard_tokens ? s->o->shard_tokens : (uint64_t)INT32_MAX))
		return s->o->shard_tokens ? shard_commit(s, p) :
			(stork_error("prep: more than %d tokens for one shard: use --shard-tokens",
				     INT32_MAX), -1);
	return 0;
}

static void shards_abandon(struct out_set *s)
{
	for (int k = 0; k < 2; k++)
		if (s->part[k].fd >= 0) {
			close(s->part[k].fd);
			unlink(s->part[k].tmp);
		}
}

/* ----------------------------------------------------------------- encoding */

struct pool {
	const struct tokenizer *tok;
	struct doc *docs;
	size_t n;
	atomic_size_t next;
};

static void *encode_docs(void *arg)
{
	struct pool *p = arg;
	struct tok_state *st = tok_state_new(p->tok);
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n) {
		struct doc *d = &p->docs[i];

		if (!st) {
			snprintf(d->err, sizeof d->err, "out of memory");
			d->failed = 1;
		} else if (tok_encode(st, d->text, d->len, &d->ids, d->err, sizeof d->err)) {
			d->failed = 1;
		}
	}
	tok_state_free(st);
	return NULL;
}

/* Encode n documents on the threads, then write them in order. */
static int encode_and_write(struct out_set *s, const struct tokenizer *tok, uint32_t doc_token,
			    struct doc *docs, size_t n, const char *file)
{
	int threads = s->o->threads > 0 ? s->o->threads : 1;
	double t0 = clock_monotonic();
	pthread_t th[256];
	struct pool p = { .tok = tok, .docs = docs, .n = n };
	int started = 0, rc = 0;

	if (threads > 256)
		threads = 256;
	if ((size_t)threads > n)
		threads = n ? (int)n : 1;
	for (int t = 1; t < threads; t++)
		if (!pthread_create(&th[started], NULL, encode_docs, &p))
			started++;
	encode_docs(&p);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	s->encode_s += clock_monotonic() - t0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct shards *part = &s->part[docs[i].val];

		if (docs[i].failed) {
			stork_error("prep: %s, document %zu: %s", file, i + 1, docs[i].err);
			rc = -1;
			break;
		}
		part->docs++;
		rc = shard_put(s, part, doc_token);
		for (size_t k = 0; k < docs[i].ids.n && !rc; k++)
			rc = shard_put(s, part, docs[i].ids.v[k]);
	}
	for (size_t i = 0; i < n; i++)
		tok_ids_free(&docs[i].ids);
	return rc;
}

/* ----------------------------------------------------------------- documents */

struct docs {
	struct doc *v;
	size_t n, cap;
	char **owned;         /* decoded JSON strings */
	size_t nowned;
};

static int doc_push(struct docs *d, const char *text, size_t len, int val)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 1024;
		struct doc *v = realloc(d->v, cap * sizeof *v);

		if (!v)
			return -1;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = (struct doc){ .text = text, .len = len, .val = val };
	return 0;
}

static void docs_clear(struct docs *d)
{
	for (size_t i = 0; i < d->nowned; i++)
		free(d->owned[i]);
	free(d->owned);
	d->owned = NULL;
	d->nowned = 0;
	d->n = 0;
}

/*
 * Where the train/validation cut falls in the input's bytes: *pos is the
 * bytes read so far, split where validation starts. A whole file (cut
 * set) that crosses it is cut after the first newline at or after the
 * split (or kept whole for training when it has none); a line or a JSON
 * record is never cut: validation starts with the next one.
 */
static int add_doc(struct docs *d, const char *text, size_t len, uint64_t *pos, uint64_t split,
		   int cut)
{
	uint64_t a = *pos;

	*pos += len;
	if (a >= split)
		return doc_push(d, text, len, 1);
	if (a + len <= split || !cut)
		return doc_push(d, text, len, 0);
	for (size_t k = (size_t)(split - a); k < len; k++)
		if (text[k] == '\n')
			return doc_push(d, text, k + 1, 0) ||
			       (k + 1 < len ? doc_push(d, text + k + 1, len - k - 1, 1) : 0);
	return doc_push(d, text, len, 0);
}

/* The documents of one file's bytes (buf, len) by the options. */
static int split_docs(const struct prep_opts *o, const char *path, char *buf, size_t len,
		      struct docs *d, uint64_t *pos, uint64_t split)
{
	char *line = buf, *end = buf + len;

	if (!o->split_lines && !o->field)
		return add_doc(d, buf, len, pos, split, 1);
	for (size_t lineno = 1; line < end; lineno++) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);

		if (o->field && n) {
			json_error_t je;
			json_t *v = json_loadb(line, n, 0, &je);
			const json_t *f = json_object_get(v, o->field);
			char **owned, *copy;

			if (!json_is_string(f)) {
				stork_error("prep: %s:%zu: %s", path, lineno,
					    !v ? je.text : "no string field by the --field name");
				json_decref(v);
				return -1;
			}
			copy = malloc(json_string_length(f) + 1);
			owned = realloc(d->owned, (d->nowned + 1) * sizeof *owned);
			if (owned)
				d->owned = owned;
			if (!copy || !owned) {
				free(copy);
				json_decref(v);
				return -1;
			}
			memcpy(copy, json_string_value(f), json_string_length(f) + 1);
			d->owned[d->nowned++] = copy;
			if (add_doc(d, copy, json_string_length(f), pos, split, 0)) {
				json_decref(v);
				return -1;
			}
			*pos += n + 1 - json_string_length(f); /* the cut counts the file's bytes */
			json_decref(v);
		} else if (n) { /* --split-lines: the line without its newline */
			if (add_doc(d, line, n, pos, split, 0))
				return -1;
			*pos += nl ? 1 : 0;
		} else {
			(*pos)++;
		}
		line = nl ? nl + 1 : end;
	}
	return 0;
}

/* ----------------------------------------------------------------- inputs */

struct inputs {
	char **path;
	size_t n;
	uint64_t bytes;
};

static int input_add(struct inputs *in, const char *path)
{
	struct stat st;
	char **v;

	if (stat(path, &st) && strpbrk(path, "*?[")) { /* a glob the shell did not expand */
		glob_t g;
		int rc = 0;

		if (glob(path, 0, NULL, &g)) {
			stork_error("prep: '%s' matches no file", path);
			return -1;
		}
		for (size_t i = 0; i < g.gl_pathc && !rc; i++)
			rc = input_add(in, g.gl_pathv[i]);
		globfree(&g);
		return rc;
	}
	if (stat(path, &st)) {
		stork_error("prep: %s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) { /* its files (and subdirectories') in name order */
		struct dirent **ents;
		int n = scandir(path, &ents, NULL, alphasort), rc = 0;

		if (n < 0) {
			stork_error("prep: %s: %s", path, strerror(errno));
			return -1;
		}
		for (int i = 0; i < n; i++) {
			char sub[PATH_MAX];

			if (!rc && ents[i]->d_name[0] != '.') {
				snprintf(sub, sizeof sub, "%s/%s", path, ents[i]->d_name);
				rc = input_add(in, sub);
			}
			free(ents[i]);
		}
		free(ents);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		stork_error("prep: %s: not a regular file", path);
		return -1;
	}
	if (!(v = realloc(in->path, (in->n + 1) * sizeof *v)) || !(v[in->n] = strdup(path))) {
		stork_error("prep: out of memory");
		return -1;
	}
	in->path = v;
	in->n++;
	in->bytes += (uint64_t)st.st_size;
	return 0;
}

static char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;

	if (fd >= 0 && fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
		if (pread_all(fd, buf, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
			free(buf);
			buf = NULL;
		} else {
			*len = (size_t)st.st_size;
		}
	}
	if (fd >= 0)
		close(fd);
	return buf;
}

/* ----------------------------------------------------------------- manifest */

static int write_manifest(const struct out_set *s, const struct tokenizer *tok,
			  const char *tok_path, const char *sha, int64_t doc_token,
			  const char *doc_text)
{
	char path[PATH_MAX], real[PATH_MAX], err[512];
	json_t *m = json_object(), *specials = json_array();
	uint32_t id;

	for (size_t i = 0; i < tok_special_count(tok); i++) {
		const char *text = tok_special(tok, i, &id);

		json_array_append_new(specials, json_pack("{s:s, s:I}", "text", text, "id",
							  (json_int_t)id));
	}
	json_object_set_new(m, "tokenizer",
			    json_pack("{s:s, s:s, s:s, s:s}", "path",
				      realpath(tok_path, real) ? real : tok_path, "sha256", sha,
				      "format", tok_format(tok), "family", tok_family(tok)));
	json_object_set_new(m, "vocab_size", json_integer(s->vocab));
	json_object_set_new(m, "token_bytes", json_integer(s->token_bytes));
	json_object_set_new(m, "document_token",
			    json_pack("{s:s, s:I}", "text", doc_text, "id", (json_int_t)doc_token));
	json_object_set_new(m, "special_tokens", specials);
	for (int k = 0; k < 2; k++)
		json_object_set_new(m, s->part[k].kind,
				    json_pack("{s:I, s:I, s:O}", "documents",
					      (json_int_t)s->part[k].docs, "tokens",
					      (json_int_t)s->part[k].total, "shards",
					      s->part[k].names));
	snprintf(path, sizeof path, "%s/%s.manifest.json", s->o->dir, s->o->name);
	if (sj_write_file(path, m, err, sizeof err) < 0) {
		stork_error("prep: %s", err);
		json_decref(m);
		return -1;
	}
	printf("wrote %s\n", path);
	json_decref(m);
	return 0;
}

/* ----------------------------------------------------------------- prep_tokenized */

static int run(const struct prep_opts *o, const struct tokenizer *tok, struct inputs *in,
	       struct out_set *s, int64_t doc_token)
{
	uint64_t pos = 0, split = in->bytes - (uint64_t)(o->share * (double)in->bytes);
	struct docs d = { 0 };
	int rc = 0;

	for (size_t f = 0; f < in->n && !rc; f++) {
		size_t len = 0;
		char *buf = read_file(in->path[f], &len);

		if (!buf) {
			stork_error("prep: cannot read %s: %s", in->path[f], strerror(errno));
			return -1;
		}
		if (!o->binary && memchr(buf, '\0', len < 65536 ? len : 65536)) {
			stork_error("prep: %s: not text (a NUL byte); --binary takes it anyway",
				    in->path[f]);
			free(buf);
			return -1;
		}
		if (split_docs(o, in->path[f], buf, len, &d, &pos, split)) {
			rc = -1;
		} else {
			rc = encode_and_write(s, tok, (uint32_t)doc_token, d.v, d.n, in->path[f]);
			if (isatty(STDERR_FILENO))
				fprintf(stderr, "\rprep: %zu of %zu files, %llu tokens", f + 1, in->n,
					(unsigned long long)(s->part[0].total + s->part[1].total));
		}
		docs_clear(&d);
		free(buf);
	}
	if (isatty(STDERR_FILENO))
		fputc('\n', stderr);
	free(d.v);
	return rc;
}

int prep_tokenized(const struct prep_opts *o, char **files, int nfiles)
{
	struct tokenizer *tok;
	struct inputs in = { 0 };
	struct out_set *s = calloc(1, sizeof *s);
	char err[1024], sha[65];
	const char *doc_text;
	int64_t doc_token;
	int rc = STORK_EXIT_DATA;

	if (!s)
		return STORK_EXIT_INTERNAL;
	if (!(tok = tok_load(o->tokenizer, err, sizeof err))) {
		stork_error("prep: --tokenizer %s", err);
		free(s);
		return STORK_EXIT_DATA;
	}
	if ((doc_token = tok_doc_token(tok, &doc_text)) < 0) {
		stork_error("prep: %s has neither <|begin_of_text|> nor <|endoftext|> to start "
			    "documents with", o->tokenizer);
		goto out;
	}
	for (int i = 0; i < nfiles; i++)
		if (input_add(&in, files[i]))
			goto out;
	if (!in.n || in.bytes < 2) {
		stork_error("prep: no text in the input");
		goto out;
	}
	if (file_sha256(o->tokenizer, sha) < 0 || mkdir_p(o->dir, 0700) < 0) {
		stork_error("prep: cannot read %s or create %s: %s", o->tokenizer, o->dir,
			    strerror(errno));
		goto out;
	}
	s->o = o;
	s->vocab = tok_vocab_size(tok);
	s->token_bytes = s->vocab <= 65536 ? 2 : 4;
	for (int k = 0; k < 2; k++) {
		s->part[k].kind = k ? "val" : "train";
		s->part[k].fd = -1;
		s->part[k].names = json_array();
	}
	if (run(o, tok, &in, s, doc_token) ||
	    (s->part[0].fd >= 0 && shard_commit(s, &s->part[0])) ||
	    (s->part[1].fd >= 0 && shard_commit(s, &s->part[1])))
		goto out;
	if (!s->part[0].total || !s->part[1].total) {
		stork_error("prep: the input is too small for both a training and a validation "
			    "part with --val-share %g", o->share);
		goto out;
	}
	if (write_manifest(s, tok, o->tokenizer, sha, doc_token, doc_text))
		goto out;
	if (fsync_dir(o->dir))
		stork_warn("prep: cannot fsync directory %s: %s", o->dir, strerror(errno));
	printf("encoded %llu tokens in %.3f s: %.0f tokens/s on %d thread(s)\n",
	       (unsigned long long)(s->part[0].total + s->part[1].total), s->encode_s,
	       (double)(s->part[0].total + s->part[1].total) / (s->encode_s > 0 ? s->encode_s : 1e-9),
	       o->threads);
	printf("vocabulary: %u tokens (%s, %s; %d-bit ids; documents start with %s = %lld)\n",
	       s->vocab, tok_format(tok), tok_family(tok), 8 * s->token_bytes, doc_text,
	       (long long)doc_token);
	/* Llama 3's tokens need a Llama (preflight refuses them for gpt2) */
	printf("configuration:\n  model:\n%s    vocab_size: %u\n  data:\n"
	       "    train: [\"%s/%s_train%s.bin\"]\n    val: [\"%s/%s_val%s.bin\"]\n",
	       !strcmp(tok_family(tok), "llama3") ? "    arch: llama\n" : "", s->vocab, o->dir,
	       o->name, o->shard_tokens ? "_*" : "", o->dir, o->name, o->shard_tokens ? "_*" : "");
	rc = STORK_EXIT_OK;
out:
	shards_abandon(s);
	for (int k = 0; k < 2; k++)
		json_decref(s->part[k].names);
	for (size_t i = 0; i < in.n; i++)
		free(in.path[i]);
	free(in.path);
	free(s);
	tok_free(tok);
	return rc;
}

/* ----------------------------------------------------------------- decode */

/* Print one shard's text (tok NULL: a byte-level shard). */
static int decode_one(const char *shard, const struct tokenizer *tok)
{
	struct token_shard sh;
	char err[1024];
	unsigned char buf[1 << 16];
	uint64_t done = 0;
	int fd, rc = STORK_EXIT_OK;

	if (token_shard_check(shard, &sh, err, sizeof err)) {
		stork_error("prep: %s", err);
		return STORK_EXIT_DATA;
	}
	if (!tok && sh.vocab != PREP_VOCAB_SIZE) {
		stork_error("prep: %s holds ids of a %d-token vocabulary: give its --tokenizer",
			    shard, sh.vocab);
		return STORK_EXIT_USAGE;
	}
	if ((fd = open(shard, O_RDONLY | O_CLOEXEC)) < 0) {
		stork_error("prep: %s: %s", shard, strerror(errno));
		return STORK_EXIT_DATA;
	}
	while (done < sh.ntok && rc == STORK_EXIT_OK) {
		size_t want = (size_t)(sh.ntok - done) * (size_t)sh.token_bytes;
		ssize_t got = pread_all(fd, buf, want < sizeof buf ? want : sizeof buf,
					DATA_HEADER_BYTES + (off_t)(done * (uint64_t)sh.token_bytes));

		if (got <= 0 || got % sh.token_bytes) {
			stork_error("prep: %s: short read", shard);
			rc = STORK_EXIT_DATA;
			break;
		}
		for (ssize_t k = 0; k < got; k += sh.token_bytes) {
			uint32_t id = buf[k] | (uint32_t)buf[k + 1] << 8;
			const unsigned char *b;
			size_t n;
			unsigned char byte;

			if (sh.token_bytes == 4)
				id |= (uint32_t)buf[k + 2] << 16 | (uint32_t)buf[k + 3] << 24;
			if (tok) {
				b = tok_bytes(tok, id, &n);
			} else if (id == PREP_EOT) { /* byte shards: end of text is not text */
				b = (const unsigned char *)"\n<|endoftext|>\n";
				n = 15;
			} else {
				byte = (unsigned char)id;
				b = &byte;
				n = 1;
			}
			if (!b) {
				stork_error("prep: %s: id %u is outside the vocabulary", shard, id);
				rc = STORK_EXIT_DATA;
				break;
			}
			fwrite(b, 1, n, stdout);
		}
		done += (uint64_t)got / (uint64_t)sh.token_bytes;
	}
	close(fd);
	return rc;
}

int prep_decode(char **shards, int n, const char *tokenizer)
{
	struct tokenizer *tok = NULL;
	char err[1024];
	int rc = STORK_EXIT_OK;

	/* decoding needs the ids' bytes only: the merges are not read */
	if (tokenizer && !(tok = tok_load_ids(tokenizer, err, sizeof err))) {
		stork_error("prep: --tokenizer %s", err);
		return STORK_EXIT_DATA;
	}
	for (int i = 0; i < n && rc == STORK_EXIT_OK; i++)
		rc = decode_one(shards[i], tok);
	tok_free(tok);
	return rc;
}
