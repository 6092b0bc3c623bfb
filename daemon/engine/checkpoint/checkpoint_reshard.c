/*
 * daemon/engine/checkpoint/checkpoint_reshard.c - a rank's shard read from a checkpoint that
 * another layout wrote, by byte ranges, with no copy of the whole model.
 *
 * Every shard, the new rank's and each old file's, is a list of pieces
 * (gpt2_shard_pieces): runs of floats contiguous both in the shard and in
 * the whole model, in increasing order. The rank keeps the list of what it
 * still lacks; each old file's list is intersected with it in one merge
 * pass, every overlap is read with pread straight into the rank's own
 * arrays, and what was read leaves the list. The parameters come from the
 * first replica of every (stage, tensor slice); the moments from every
 * replica that holds them (ZeRO-1 parts) and only for the parts this rank
 * holds: both lists are first cut to the parts (the segments). A tensor
 * that several old shards hold (a replicated norm, the tied embedding on
 * the last stage) is read once, from the first that has it. When every
 * source is done the lists must be empty, else the checkpoint does not
 * cover the shard and the resume fails.
 *
 * Memory: the rank's own parameters and moments (which it needs anyway)
 * and the piece lists (24 bytes a piece; a few thousand for GPT-2 124M
 * under tensor parallelism), where reading the whole model took six times
 * the model's floats.
 */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/checkpoint/checkpoint_format.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/parallel/zero.h"

#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ piece lists */

struct plist {
	struct shard_piece *p;
	size_t n, cap;
	int oom;
};

static void plist_push(struct plist *l, size_t full, size_t local, size_t n)
{
	struct shard_piece *grown;

	if (l->oom || !n)
		return;
	if (l->n && l->p[l->n - 1].full + l->p[l->n - 1].n == full &&
	    l->p[l->n - 1].local + l->p[l->n - 1].n == local) {
		l->p[l->n - 1].n += n;
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;

		if (!(grown = realloc(l->p, cap * sizeof *grown))) {
			l->oom = 1;
			return;
		}
		l->p = grown;
		l->cap = cap;
	}
	l->p[l->n++] = (struct shard_piece){ .full = full, .local = local, .n = n };
}

static void plist_add(void *arg, const struct shard_piece *p)
{
	plist_push(arg, p->full, p->local, p->n);
}

static void plist_free(struct plist *l)
{
	free(l->p);
	memset(l, 0, sizeof *l);
}

/* The parts of a shard whose moments a file or a rank holds, packed in this order. */
struct parts {
	int n;
	uint64_t lo[CKPT_MAX_SEGMENTS], hi[CKPT_MAX_SEGMENTS];
};

/* Where local index x sits in the packed moments (x must be inside a part). */
static size_t packed_at(const struct parts *s, size_t x)
{
	size_t before = 0;

	for (int k = 0; k < s->n; k++) {
		if (x >= s->lo[k] && x < s->hi[k])
			return before + (x - s->lo[k]);
		before += s->hi[k] - s->lo[k];
	}
	return (size_t)-1;
}

/* in cut to the parts (local ranges) into out: each piece then lies inside one part. */
static void plist_cut(const struct plist *in, const struct parts *s, struct plist *out)
{
	for (size_t i = 0; i < in->n; i++) {
		const struct shard_piece *p = &in->p[i];

		for (int k = 0; k < s->n; k++) {
			size_t lo = p->local > s->lo[k] ? p->local : s->lo[k];
			size_t hi = p->local + p->n < s->hi[k] ? p->local + p->n : s->hi[k];

			if (lo < hi)
				plist_push(out, p->full + (lo - p->local), lo, hi - lo);
		}
	}
}

/* ---------------------------------------------------------------- sources */

/* One old file (or model.bin with optimizer.bin) and the part of the model it holds. */
struct source {
	char path[4200];
	int fd_params, fd_moments;
	off_t params_at, m_at, v_at;   /* where its parameters, m and v begin */
	struct parts parts;            /* of its moments */
	struct gpt2_shard shard;
};

/* The rank being filled and what it still lacks. */
struct target {
	float *params, *m, *v;
	struct parts parts;
	struct plist want_params, want_moments;
	char *err;
	size_t errlen;
};

static int read_floats(int fd, float *dst, size_t n, off_t at)
{
	return pread_all(fd, dst, n * sizeof(float), at) == (ssize_t)(n * sizeof(float)) ? 0 : -1;
}

/* Read one overlap: n floats, at the target's local index a and the source's b. */
static int read_overlap(const struct source *src, struct target *t, int moments, size_t a,
			size_t b, size_t n)
{
	if (!moments)
		return read_floats(src->fd_params, t->params + a, n,
				   src->params_at + (off_t)(b * sizeof(float)));
	size_t pa = packed_at(&t->parts, a), pb = packed_at(&src->parts, b);

	return read_floats(src->fd_moments, t->m + pa, n, src->m_at + (off_t)(pb * sizeof(float))) ||
	       read_floats(src->fd_moments, t->v + pa, n, src->v_at + (off_t)(pb * sizeof(float)));
}

/*
 * Read every overlap of *want with have (both sorted by whole-model
 * offset) and leave in *want what have did not cover. 0 or -1.
 */
static int take(const struct source *src, struct target *t, int moments, struct plist *want,
		const struct plist *have)
{
	struct plist left = { 0 };
	size_t j = 0;

	for (size_t i = 0; i < want->n; i++) {
		size_t at = want->p[i].full, end = at + want->p[i].n;

		while (j < have->n && have->p[j].full + have->p[j].n <= at)
			j++;
		for (size_t k = j; at < end && k < have->n && have->p[k].full < end; k++) {
			size_t lo = have->p[k].full > at ? have->p[k].full : at;
			size_t hi = have->p[k].full + have->p[k].n < end ? have->p[k].full + have->p[k].n : end;

			if (lo >= hi)
				continue;
			if (lo > at)
				plist_push(&left, at, want->p[i].local + (at - want->p[i].full), lo - at);
			if (read_overlap(src, t, moments, want->p[i].local + (lo - want->p[i].full),
					 have->p[k].local + (lo - have->p[k].full), hi - lo)) {
				snprintf(t->err, t->errlen, "%s: truncated while reading a resharded part",
					 src->path);
				plist_free(&left);
				return -1;
			}
			at = hi;
		}
		if (at < end)
			plist_push(&left, at, want->p[i].local + (at - want->p[i].full), end - at);
	}
	if (left.oom) {
		snprintf(t->err, t->errlen, "out of memory resharding %s", src->path);
		plist_free(&left);
		return -1;
	}
	plist_free(want);
	*want = left;
	return 0;
}

/* Take from src what the target lacks: its parameters (if asked) and the moments it holds. */
static int take_source(const struct gpt2_config *c, const struct source *src, struct target *t,
		       int params)
{
	struct plist have = { 0 }, cut = { 0 };
	int rc = -1;

	gpt2_shard_pieces(c, &src->shard, plist_add, &have);
	plist_cut(&have, &src->parts, &cut);
	if (have.oom || cut.oom) {
		snprintf(t->err, t->errlen, "out of memory resharding %s", src->path);
		goto out;
	}
	if (params && t->want_params.n && take(src, t, 0, &t->want_params, &have))
		goto out;
	if (t->want_moments.n && take(src, t, 1, &t->want_moments, &cut))
		goto out;
	rc = 0;
out:
	plist_free(&have);
	plist_free(&cut);
	return rc;
}

/* The model's shape in a file's header against the configuration's. */
static int same_shape(const int32_t *hdr, const char *path, const struct gpt2_config *want,
		      char *err, size_t errlen)
{
	struct gpt2_config have;
	char a[256], b[256];

	if (gpt2_config_from_header(hdr, path, &have, err, errlen) < 0)
		return -1;
	if (memcmp(&have, want, sizeof have)) {
		ckpt_shape_str(&have, a, sizeof a);
		ckpt_shape_str(want, b, sizeof b);
		snprintf(err, errlen, "checkpoint %s holds a model of another shape: it has %s; the "
			 "configuration asks for %s", path, a, b);
		return -1;
	}
	return 0;
}

/* A whole-model checkpoint: model.bin's parameters, optimizer.bin's moments. */
static int take_plain(const char *dir, const struct gpt2_config *c, struct target *t,
		      int64_t *opt_step)
{
	struct source src = { .fd_params = -1, .fd_moments = -1 };
	int32_t hdr[GPT2_HEADER_INTS];
	struct opt_header oh;
	size_t sizes[GPT2_NUM_TENSORS], total;
	char opt_path[4200];
	int rc = -1;

	gpt2_shard_whole(c, &src.shard);
	total = gpt2_shard_sizes(c, &src.shard, sizes);
	snprintf(src.path, sizeof src.path, "%s/model.bin", dir);
	snprintf(opt_path, sizeof opt_path, "%s/optimizer.bin", dir);
	if ((src.fd_params = open(src.path, O_RDONLY | O_CLOEXEC)) < 0 ||
	    (src.fd_moments = open(opt_path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(t->err, t->errlen, "cannot open %s: %s",
			 src.fd_params < 0 ? src.path : opt_path, strerror(errno));
		goto out;
	}
	if (pread_all(src.fd_params, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
		snprintf(t->err, t->errlen, "%s: truncated header", src.path);
		goto out;
	}
	if (same_shape(hdr, src.path, c, t->err, t->errlen))
		goto out;
	if (pread_all(src.fd_moments, &oh, sizeof oh, 0) != (ssize_t)sizeof oh ||
	    memcmp(oh.magic, OPT_MAGIC, 8) || oh.version != OPT_VERSION || oh.n != total) {
		snprintf(t->err, t->errlen, "%s: not an optimizer state for %zu parameters", opt_path,
			 total);
		goto out;
	}
	src.params_at = (off_t)sizeof hdr;
	src.m_at = (off_t)sizeof oh;
	src.v_at = src.m_at + (off_t)(total * sizeof(float));
	src.parts = (struct parts){ .n = 1, .hi = { total } };
	*opt_step = oh.step;
	rc = take_source(c, &src, t, 1);
out:
	if (src.fd_params >= 0)
		close(src.fd_params);
	if (src.fd_moments >= 0)
		close(src.fd_moments);
	return rc;
}

/* Shard file k of a sharded checkpoint: its parameters if asked, its moments. */
static int take_shard(const char *dir, const struct ckpt_layout *l, int k,
		      const struct gpt2_config *c, struct target *t, int params, int64_t *opt_step)
{
	struct shard_header h;
	struct source src;
	size_t sizes[GPT2_NUM_TENSORS];
	uint64_t nm = 0;
	int fd, rc = -1;

	memset(&src, 0, sizeof src);
	snprintf(src.path, sizeof src.path, "%s/" SHARD_NAME, dir, k);
	if ((fd = ckpt_open_shard(dir, k, l, &h, t->err, t->errlen)) < 0)
		return -1;
	if (same_shape(h.model, src.path, c, t->err, t->errlen))
		goto out;
	src.shard = (struct gpt2_shard){ .tp_rank = h.tp_rank, .tp_size = l->tp,
					 .first_layer = h.first_layer, .last_layer = h.last_layer };
	if (gpt2_shard_check(c, &src.shard, t->err, t->errlen) < 0 ||
	    gpt2_shard_sizes(c, &src.shard, sizes) != h.nparams) {
		snprintf(t->err, t->errlen, "%s: not a shard of this model", src.path);
		goto out;
	}
	src.parts.n = (int)h.nseg;
	for (uint32_t s = 0; s < h.nseg; s++) {
		if (h.seg_lo[s] > h.seg_hi[s] || h.seg_hi[s] > h.nparams) {
			snprintf(t->err, t->errlen, "%s: malformed optimizer parts", src.path);
			goto out;
		}
		src.parts.lo[s] = h.seg_lo[s];
		src.parts.hi[s] = h.seg_hi[s];
		nm += h.seg_hi[s] - h.seg_lo[s];
	}
	src.fd_params = src.fd_moments = fd;
	src.params_at = (off_t)sizeof h;
	src.m_at = src.params_at + (off_t)(h.nparams * sizeof(float));
	src.v_at = src.m_at + (off_t)(nm * sizeof(float));
	if (params)
		*opt_step = h.opt_step;
	rc = take_source(c, &src, t, params);
out:
	close(fd);
	return rc;
}

/* Every file of a sharded checkpoint the target may need, first replicas first. */
static int take_sharded(const char *dir, const struct ckpt_layout *l, const struct gpt2_config *c,
			struct target *t, int64_t *opt_step)
{
	for (int dp = 0; dp < (l->zero ? l->dp : 1); dp++)
		for (int stage = 0; stage < l->pp; stage++)
			for (int tp = 0; tp < l->tp; tp++) {
				int k = stage * l->dp * l->tp + dp * l->tp + tp;

				if (!t->want_params.n && !t->want_moments.n)
					return 0;
				if (take_shard(dir, l, k, c, t, dp == 0, opt_step))
					return -1;
			}
	return 0;
}

int ckpt_read_resharded(const char *dir, const struct ckpt_shard_info *want, float *params,
			float *m, float *v, int64_t *opt_step, char *err, size_t errlen)
{
	struct gpt2_shard shard = { .tp_rank = want->tp_rank, .tp_size = want->layout.tp,
				    .first_layer = want->first_layer,
				    .last_layer = want->last_layer };
	struct target t = { .params = params, .m = m, .v = v, .err = err, .errlen = errlen };
	struct plist all = { 0 };
	struct ckpt_layout l;
	int rc = -1;

	if (ckpt_read_layout(dir, &l, err, errlen) < 0)
		return -1;
	t.parts.n = want->nseg;
	for (int k = 0; k < want->nseg; k++) {
		t.parts.lo[k] = want->seg_lo[k];
		t.parts.hi[k] = want->seg_hi[k];
	}
	gpt2_shard_pieces(&want->config, &shard, plist_add, &all);
	plist_cut(&all, &t.parts, &t.want_moments);
	t.want_params = all;
	memset(&all, 0, sizeof all);
	if (t.want_params.oom || t.want_moments.oom) {
		snprintf(err, errlen, "out of memory resharding %s", dir);
		goto out;
	}
	if (l.sharded ? take_sharded(dir, &l, &want->config, &t, opt_step) :
			take_plain(dir, &want->config, &t, opt_step))
		goto out;
	if (t.want_params.n || t.want_moments.n) {
		snprintf(err, errlen, "checkpoint %s does not hold all of rank %d's part of the "
			 "model (%zu piece(s) of parameters, %zu of moments missing)", dir, want->rank,
			 t.want_params.n, t.want_moments.n);
		goto out;
	}
	rc = 0;
out:
	plist_free(&t.want_params);
	plist_free(&t.want_moments);
	return rc;
}

void ckpt_shard_info_of(const struct gpt2_config *g, const struct par_layout *l,
			struct ckpt_shard_info *info)
{
	struct gpt2_shard s;
	struct zero_plan z;
	size_t sizes[GPT2_NUM_TENSORS];

	layout_shard(l, &s);
	*info = (struct ckpt_shard_info){
		.rank = l->rank,
		.layout = { .world = l->world, .dp = l->dp, .tp = l->tp, .pp = l->pp,
			    .zero = l->zero, .sharded = 1 },
		.config = *g,
		.tp_rank = l->tp_rank, .dp_rank = l->dp_rank, .stage = l->stage,
		.first_layer = l->first_layer, .last_layer = l->last_layer,
		.nparams = gpt2_shard_sizes(g, &s, sizes),
		.nseg = 1,
	};
	info->seg_hi[0] = info->nparams;
	if (!l->zero)
		return;
	zero_plan_layout(&z, sizes, l->dp, l->dp_rank);
	info->nseg = z.nseg;
	for (int k = 0; k < z.nseg; k++) {
		info->seg_lo[k] = z.seg[k].lo;
		info->seg_hi[k] = z.seg[k].hi;
	}
}
