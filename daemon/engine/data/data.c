/*
 * daemon/engine/data/data.c - see data.h for the sample stream and the position.
 *
 * data_open expands the globs, reads every shard's header and checks it
 * against the file size. The loader keeps two permutations: the shard order
 * of the current epoch (drawn from position.rng) and the sample order of the
 * current shard visit (drawn from rng_seed(position.rng, visit + 1)); both
 * are recomputed from the position whenever it moves to another epoch or
 * shard, so restoring a position needs nothing else. The next epoch's state
 * is rng_seed(position.rng, 0). Without shuffling both orders are the
 * identity.
 */
#include "config.h"
#include "daemon/engine/data/data.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/rng.h"
#include "lib/formats/token_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA_RNG_STREAM 0x64617461ULL   /* "data" */

struct data_shard {
	char *path;
	uint64_t ntok;
	uint32_t nsamples;
	int token_bytes;                /* 2 or 4 (lib/formats/token_shard.h) */
};

/*
 * The helper thread of cfg.prefetch. While a fill is under way the thread
 * owns the loader's reading state (position, orders, open file); the
 * caller's thread touches it only once the fill is over (every entry point
 * waits for it), so the two never race and need one lock for the flags.
 */
struct prefetch {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int started;                    /* the thread runs */
	int filling, quit;              /* under lock */
	int pending;                    /* caller's: a batch was asked for, not yet taken */
	struct data_position start;     /* caller's: where that batch begins */
	int *inputs, *targets;          /* the batch, B*T ints each */
	int rc;                         /* and how reading it went */
	char err[1024];
};

struct data_loader {
	struct data_config cfg;         /* cfg.key points at key, globs unused */
	char key[64];
	struct data_shard *shards;
	size_t nshards;
	struct data_position pos;
	uint64_t start_rng;
	uint32_t *shard_order;          /* for epoch order_epoch */
	uint64_t order_epoch;
	int order_valid;
	uint32_t *sample_order;         /* for (sample_epoch, sample_visit) */
	uint64_t sample_epoch, sample_visit;
	int sample_valid;
	int fd;                         /* open shard fd_shard, or -1 */
	size_t fd_shard;
	unsigned char *row;             /* T+1 tokens as read: 2 or 4 bytes each */
	double read_delay;              /* test builds: a slow file system */
	double waited;                  /* seconds data_next held its caller since data_take_wait */
	struct prefetch pf;
};

/* ---------------------------------------------------------------- shards */

/* Read and check path's header (lib/formats/token_shard.c) and what the run needs of it; fill s. */
static int shard_check(struct data_shard *s, const struct data_config *cfg,
		       char *err, size_t errlen)
{
	uint64_t need = (uint64_t)cfg->batch_size * (uint64_t)cfg->seq_len + 1;
	struct token_shard h;
	int rc = token_shard_check(s->path, &h, err, errlen);

	if (rc)
		return rc;
	if (cfg->vocab_size && h.vocab > cfg->vocab_size)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: made for a %d-token vocabulary, more "
			    "than the model's %d: set model.vocab_size: %d", s->path, h.vocab,
			    cfg->vocab_size, h.vocab);
	s->ntok = h.ntok;
	s->token_bytes = h.token_bytes;
	if (s->ntok < need)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: %llu tokens, fewer than the %llu one "
			    "batch needs (batch_size %d x seq_len %d + 1): use a larger shard or a "
			    "smaller train.batch_size or train.seq_len", s->path,
			    (unsigned long long)s->ntok, (unsigned long long)need,
			    cfg->batch_size, cfg->seq_len);
	if ((s->ntok - 1) / (uint64_t)cfg->seq_len > UINT32_MAX)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: too many samples in one shard (at "
			    "most 2^32)", s->path);
	s->nsamples = (uint32_t)((s->ntok - 1) / (uint64_t)cfg->seq_len);
	return 0;
}

/* Expand the globs into dl->shards. */
static int find_shards(struct data_loader *dl, char *err, size_t errlen)
{
	const struct data_config *cfg = &dl->cfg;

	for (int g = 0; g < cfg->nglobs; g++) {
		glob_t gl;
		int grc = glob(cfg->globs[g], 0, NULL, &gl);
		struct data_shard *more;

		if (grc == GLOB_NOMATCH)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: '%s' matches no file",
				    cfg->key, cfg->globs[g]);
		if (grc)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot expand '%s'%s",
				    cfg->key, cfg->globs[g],
				    grc == GLOB_ABORTED ? ": a directory is unreadable" : "");
		more = realloc(dl->shards, (dl->nshards + gl.gl_pathc) * sizeof *more);
		if (!more) {
			globfree(&gl);
			return msg_fail(err, errlen, STORK_EXIT_INTERNAL, "out of memory");
		}
		dl->shards = more;
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			struct data_shard *s = &dl->shards[dl->nshards];

			memset(s, 0, sizeof *s);
			if (!(s->path = strdup(gl.gl_pathv[i]))) {
				globfree(&gl);
				return msg_fail(err, errlen, STORK_EXIT_INTERNAL, "out of memory");
			}
			dl->nshards++;
		}
		globfree(&gl);
	}
	if (!dl->nshards)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: no file patterns given",
			    cfg->key);
	return 0;
}

/* ---------------------------------------------------------------- orders */

static void fisher_yates(uint32_t *a, uint32_t n, uint64_t state)
{
	for (uint32_t i = 0; i < n; i++)
		a[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rng_below(&state, i), t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* Make the shard order and the current shard's sample order match pos. */
static int ensure_orders(struct data_loader *dl)
{
	const struct data_position *p = &dl->pos;
	const struct data_shard *s;

	if (!dl->order_valid || dl->order_epoch != p->epoch) {
		if (dl->cfg.shuffle)
			fisher_yates(dl->shard_order, (uint32_t)dl->nshards, p->rng);
		else
			for (size_t i = 0; i < dl->nshards; i++)
				dl->shard_order[i] = (uint32_t)i;
		dl->order_epoch = p->epoch;
		dl->order_valid = 1;
	}
	if (dl->sample_valid && dl->sample_epoch == p->epoch && dl->sample_visit == p->shard)
		return 0;
	s = &dl->shards[dl->shard_order[p->shard]];
	free(dl->sample_order);
	if (!(dl->sample_order = malloc((size_t)s->nsamples * sizeof(uint32_t))))
		return STORK_EXIT_INTERNAL;
	if (dl->cfg.shuffle)
		fisher_yates(dl->sample_order, s->nsamples, rng_seed(p->rng, p->shard + 1));
	else
		for (uint32_t i = 0; i < s->nsamples; i++)
			dl->sample_order[i] = i;
	dl->sample_epoch = p->epoch;
	dl->sample_visit = p->shard;
	dl->sample_valid = 1;
	return 0;
}

static void advance(struct data_loader *dl)
{
	struct data_position *p = &dl->pos;

	if (++p->sample < dl->shards[dl->shard_order[p->shard]].nsamples)
		return;
	p->sample = 0;
	if (++p->shard < dl->nshards)
		return;
	p->shard = 0;
	p->epoch++;
	p->rng = rng_seed(p->rng, 0);
}

/* ----------------------------------------------------------------- reads */

/* Token t of a row read from a shard of w-byte little-endian tokens. */
static uint32_t token_at(const unsigned char *row, size_t w, int t)
{
	const unsigned char *p = row + (size_t)t * w;

	return w == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 :
			(uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				(uint32_t)p[3] << 24;
}

/* Read sample `sample` of shard `si` into inputs/targets (T ints each). */
static int read_sample(struct data_loader *dl, size_t si, uint32_t sample,
		       int *inputs, int *targets, char *err, size_t errlen)
{
	const struct data_shard *s = &dl->shards[si];
	int T = dl->cfg.seq_len;
	size_t w = (size_t)s->token_bytes, bytes = (size_t)(T + 1) * w;
	off_t off = DATA_HEADER_BYTES + (off_t)sample * T * (off_t)w;
	ssize_t n;

	if (dl->fd < 0 || dl->fd_shard != si) {
		if (dl->fd >= 0)
			close(dl->fd);
		dl->fd = open(s->path, O_RDONLY | O_CLOEXEC);
		if (dl->fd < 0)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot open: %s",
				    s->path, strerror(errno));
		dl->fd_shard = si;
	}
	fault_sleep(dl->read_delay);
	n = pread(dl->fd, dl->row, bytes, off);
	if (n != (ssize_t)bytes)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: short read at token %llu%s%s: "
			    "was the file changed during the run?", s->path,
			    (unsigned long long)sample * (unsigned long long)T,
			    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
	for (int t = 0; t <= T; t++) {
		uint32_t tok = token_at(dl->row, w, t);

		if (dl->cfg.vocab_size && tok >= (uint32_t)dl->cfg.vocab_size)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: token %u at position "
				    "%llu is not below the vocabulary size %d", s->path,
				    tok, (unsigned long long)sample * T + (unsigned)t,
				    dl->cfg.vocab_size);
		if (t < T)
			inputs[t] = (int)tok;
		if (t > 0)
			targets[t - 1] = (int)tok;
	}
	return 0;
}

/* This rank's next batch, read here and now. */
static int read_batch(struct data_loader *dl, int *inputs, int *targets, char *err, size_t errlen)
{
	int B = dl->cfg.batch_size, T = dl->cfg.seq_len, rc;
	int first = dl->cfg.rank * B, slots = dl->cfg.nranks * B;

	for (int i = 0; i < slots; i++) {
		if ((rc = ensure_orders(dl)))
			return msg_fail(err, errlen, rc, "out of memory");
		if (i >= first && i < first + B) {
			size_t row = (size_t)(i - first) * (size_t)T;

			rc = read_sample(dl, dl->shard_order[dl->pos.shard],
					 dl->sample_order[dl->pos.sample],
					 inputs + row, targets + row, err, errlen);
			if (rc)
				return rc;
		}
		advance(dl);
	}
	return 0;
}

/* ------------------------------------------------------------- prefetch */

static void *prefetch_main(void *arg)
{
	struct data_loader *dl = arg;
	struct prefetch *pf = &dl->pf;

	pthread_mutex_lock(&pf->lock);
	for (;;) {
		while (!pf->filling && !pf->quit)
			pthread_cond_wait(&pf->cond, &pf->lock);
		if (pf->quit)
			break;
		pthread_mutex_unlock(&pf->lock);
		pf->rc = read_batch(dl, pf->inputs, pf->targets, pf->err, sizeof pf->err);
		pthread_mutex_lock(&pf->lock);
		pf->filling = 0;
		pthread_cond_broadcast(&pf->cond);
	}
	pthread_mutex_unlock(&pf->lock);
	return NULL;
}

/* Until the fill under way (if any) is over: then the loader is ours. */
static void prefetch_wait(struct prefetch *pf)
{
	pthread_mutex_lock(&pf->lock);
	while (pf->filling)
		pthread_cond_wait(&pf->cond, &pf->lock);
	pthread_mutex_unlock(&pf->lock);
}

/* Ask the thread for the batch at the current position. */
static void prefetch_start(struct data_loader *dl)
{
	struct prefetch *pf = &dl->pf;

	pf->start = dl->pos;
	pf->pending = 1;
	pthread_mutex_lock(&pf->lock);
	pf->filling = 1;
	pthread_cond_signal(&pf->cond);
	pthread_mutex_unlock(&pf->lock);
}

/* Drop the batch asked for: the position is about to move. */
static void prefetch_cancel(struct data_loader *dl)
{
	if (!dl->pf.started || !dl->pf.pending)
		return;
	prefetch_wait(&dl->pf);
	dl->pf.pending = 0;
	dl->pos = dl->pf.start;
	dl->order_valid = dl->sample_valid = 0;
}

static int prefetch_open(struct data_loader *dl)
{
	struct prefetch *pf = &dl->pf;
	size_t n = (size_t)dl->cfg.batch_size * (size_t)dl->cfg.seq_len;

	pf->inputs = malloc(n * sizeof(int));
	pf->targets = malloc(n * sizeof(int));
	if (!pf->inputs || !pf->targets || pthread_mutex_init(&pf->lock, NULL) ||
	    pthread_cond_init(&pf->cond, NULL))
		return -1;
	if (pthread_create(&pf->thread, NULL, prefetch_main, dl))
		return -1;
	pf->started = 1;
	return 0;
}

static void prefetch_close(struct data_loader *dl)
{
	struct prefetch *pf = &dl->pf;

	if (pf->started) {
		pthread_mutex_lock(&pf->lock);
		pf->quit = 1;
		pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->lock);
		pthread_join(pf->thread, NULL);
		pthread_mutex_destroy(&pf->lock);
		pthread_cond_destroy(&pf->cond);
	}
	free(pf->inputs);
	free(pf->targets);
}

static int next_batch(struct data_loader *dl, int *inputs, int *targets, char *err, size_t errlen)
{
	struct prefetch *pf = &dl->pf;
	size_t n = (size_t)dl->cfg.batch_size * (size_t)dl->cfg.seq_len;
	int rc;

	if (!pf->started)
		return read_batch(dl, inputs, targets, err, errlen);
	if (pf->pending) {
		prefetch_wait(pf);
		pf->pending = 0;
		if (pf->rc) {
			snprintf(err, errlen, "%s", pf->err);
			return pf->rc;
		}
		memcpy(inputs, pf->inputs, n * sizeof(int));
		memcpy(targets, pf->targets, n * sizeof(int));
	} else if ((rc = read_batch(dl, inputs, targets, err, errlen))) {
		return rc;
	}
	prefetch_start(dl);
	return 0;
}

int data_next(struct data_loader *dl, int *inputs, int *targets, char *err, size_t errlen)
{
	double t0 = clock_monotonic();
	int rc = next_batch(dl, inputs, targets, err, errlen);

	dl->waited += clock_monotonic() - t0;
	return rc;
}

double data_take_wait(struct data_loader *dl)
{
	double w = dl ? dl->waited : 0.0;

	if (dl)
		dl->waited = 0.0;
	return w;
}

/* -------------------------------------------------------------- position */

void data_rewind(struct data_loader *dl)
{
	prefetch_cancel(dl);
	memset(&dl->pos, 0, sizeof dl->pos);
	dl->pos.rng = dl->start_rng;
	dl->order_valid = dl->sample_valid = 0;
}

void data_get_position(const struct data_loader *dl, struct data_position *pos)
{
	/* a batch asked for but not taken is still the next one */
	*pos = dl->pf.pending ? dl->pf.start : dl->pos;
}

int data_set_position(struct data_loader *dl, const struct data_position *pos,
		      char *err, size_t errlen)
{
	struct data_position save;
	int rc;

	prefetch_cancel(dl);
	save = dl->pos;
	if (pos->shard >= dl->nshards || (dl->cfg.shuffle && !pos->rng))
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: saved data position (epoch "
			    "%llu, shard %llu) does not fit the %zu shard(s) found now: "
			    "did the data change since the checkpoint?", dl->cfg.key,
			    (unsigned long long)pos->epoch, (unsigned long long)pos->shard,
			    dl->nshards);
	dl->pos = *pos;
	dl->order_valid = dl->sample_valid = 0;
	if ((rc = ensure_orders(dl)))
		goto fail;
	if (pos->sample >= dl->shards[dl->shard_order[pos->shard]].nsamples) {
		rc = msg_fail(err, errlen, STORK_EXIT_DATA, "%s: saved data position (sample "
			  "%llu of shard %s) is past the shard's %u samples: did the data "
			  "change since the checkpoint?", dl->cfg.key,
			  (unsigned long long)pos->sample,
			  dl->shards[dl->shard_order[pos->shard]].path,
			  dl->shards[dl->shard_order[pos->shard]].nsamples);
		goto fail;
	}
	return 0;
fail:
	dl->pos = save;
	dl->order_valid = dl->sample_valid = 0;
	return rc;
}

/* ------------------------------------------------------------- lifecycle */

int data_open(struct data_loader **out, const struct data_config *cfg,
	      char *err, size_t errlen)
{
	struct data_loader *dl;
	int rc;

	*out = NULL;
	if (!cfg->key)
		return msg_fail(err, errlen, STORK_EXIT_INTERNAL, "data: no config key given");
	if (cfg->batch_size <= 0 || cfg->seq_len <= 0 || cfg->nranks <= 0 ||
	    cfg->rank < 0 || cfg->rank >= cfg->nranks || cfg->nglobs < 0)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG, "%s: batch_size %d, seq_len %d "
			    "and rank %d of %d must be positive and in range", cfg->key,
			    cfg->batch_size, cfg->seq_len, cfg->rank, cfg->nranks);
	if (!(dl = calloc(1, sizeof *dl)))
		return msg_fail(err, errlen, STORK_EXIT_INTERNAL, "out of memory");
	dl->cfg = *cfg;
	snprintf(dl->key, sizeof dl->key, "%s", cfg->key ? cfg->key : "data");
	dl->cfg.key = dl->key;
	dl->fd = -1;
	if ((rc = find_shards(dl, err, errlen)))
		goto fail;
	for (size_t i = 0; i < dl->nshards; i++)
		if ((rc = shard_check(&dl->shards[i], cfg, err, errlen)))
			goto fail;
	dl->shard_order = malloc(dl->nshards * sizeof(uint32_t));
	dl->row = malloc((size_t)(cfg->seq_len + 1) * sizeof(uint32_t)); /* the wider kind */
	if (!dl->shard_order || !dl->row) {
		rc = msg_fail(err, errlen, STORK_EXIT_INTERNAL, "out of memory");
		goto fail;
	}
	dl->start_rng = rng_seed(cfg->seed, DATA_RNG_STREAM);
	data_rewind(dl);
	dl->read_delay = fault_seconds("STORK_FAULT_DATA_DELAY");
	if (cfg->prefetch && prefetch_open(dl) < 0) {
		rc = msg_fail(err, errlen, STORK_EXIT_INTERNAL, "%s: cannot start the prefetch thread",
			  dl->key);
		goto fail;
	}
	*out = dl;
	return 0;
fail:
	data_close(dl);
	return rc;
}

size_t data_num_shards(const struct data_loader *dl)
{
	return dl->nshards;
}

uint64_t data_num_tokens(const struct data_loader *dl)
{
	uint64_t n = 0;

	for (size_t i = 0; i < dl->nshards; i++)
		n += dl->shards[i].ntok;
	return n;
}

const char *data_shard_path(const struct data_loader *dl, size_t i)
{
	return i < dl->nshards ? dl->shards[i].path : NULL;
}

void data_close(struct data_loader *dl)
{
	if (!dl)
		return;
	prefetch_close(dl);
	if (dl->fd >= 0)
		close(dl->fd);
	for (size_t i = 0; i < dl->nshards; i++)
		free(dl->shards[i].path);
	free(dl->shards);
	free(dl->shard_order);
	free(dl->sample_order);
	free(dl->row);
	free(dl);
}
