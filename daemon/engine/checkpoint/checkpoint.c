/*
 * daemon/engine/checkpoint/checkpoint.c - see checkpoint.h.
 *
 * Each file's checksum is XXH3-64 (xxHash), computed from the very buffers
 * that go to disk while they are written, so a commit never reads a file
 * back: the signal-to-requeue time includes ~1.5 GB of checkpoint for GPT-2
 * 124M. XXH3 catches truncation and corruption at memory speed; it is not
 * cryptographic and need not be. Manifests name it ("hash": "xxh3-64").
 * Manifests without that field come from the first format, whose
 * word-at-a-time multiply-xorshift checksum is kept only to verify them.
 */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/checkpoint/checkpoint_format.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/direct_write.h"
#include "lib/fault.h"
#include "lib/io/io.h"
#include "lib/formats/stork_json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char *const ckpt_files[] = { "model.bin", "optimizer.bin", "state.json" };
#define NFILES (sizeof ckpt_files / sizeof ckpt_files[0])

/* ------------------------------------------------------------- checksum */

#define HASH_NAME "xxh3-64"

/* Who may read what checkpoints hold (run.shared): this user alone, or the
 * run directory's group too; nobody else ever writes them. */
static mode_t file_mode = 0600, dir_mode = 0700;

void ckpt_share_with_group(bool shared)
{
	file_mode = shared ? 0640 : 0600;
	dir_mode = shared ? 0750 : 0700;
}

/* The checksum of the first manifest format (no "hash" field). */
static uint64_t legacy_mix(uint64_t h, uint64_t w)
{
	h ^= w * 0x9E3779B97F4A7C15ULL;
	h = (h << 27 | h >> 37) * 0xBF58476D1CE4E5B9ULL;
	return h;
}

struct legacy_state {
	uint64_t h, total;
};

/* Feed got bytes; whole words, so buffers must be a multiple of 8 long
 * except the file's last one. */
static void legacy_update(struct legacy_state *st, const unsigned char *buf, size_t got)
{
	size_t i = 0;

	for (; i + 8 <= got; i += 8) {
		uint64_t w;

		memcpy(&w, buf + i, 8);
		st->h = legacy_mix(st->h, w);
	}
	for (; i < got; i++)
		st->h = legacy_mix(st->h, buf[i]);
	st->total += got;
}

/*
 * The checksum (legacy: of the first manifest format, else XXH3-64) and
 * size of the file at path, reading it once. -1 with errno on error.
 */
static int digest_file(const char *path, int legacy, uint64_t *sum, uint64_t *size)
{
	static const size_t bufsize = 1 << 20;
	struct legacy_state old = { 0xCBF29CE484222325ULL, 0 };
	XXH3_state_t *x = legacy ? NULL : XXH3_createState();
	unsigned char *buf = malloc(bufsize);
	uint64_t total = 0;
	ssize_t got = -1;
	int fd = -1, saved;

	if (!buf || (!legacy && (!x || XXH3_64bits_reset(x) == XXH_ERROR))) {
		errno = ENOMEM;
		goto out;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		goto out;
	while ((got = read(fd, buf, bufsize)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (legacy)
			legacy_update(&old, buf, (size_t)got);
		else
			XXH3_64bits_update(x, buf, (size_t)got);
		total += (uint64_t)got;
	}
	*sum = legacy ? legacy_mix(old.h, old.total) : XXH3_64bits_digest(x);
	*size = total;
out:
	saved = errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	XXH3_freeState(x);
	errno = saved;
	return got == 0 ? 0 : -1;
}

/* ------------------------------------------------------------- writing */

/* A piece of a file being written. */
struct span {
	const void *p;
	size_t n;
};

/* A file's manifest entry: its checksum and size. */
struct digest {
	uint64_t sum, size;
};

/*
 * Create path with the spans one after the other, fsynced, past the page
 * cache where the file system allows (lib/io/direct_write.h); its checksum
 * comes from the same buffers. 0 or -1 with a message.
 */
static int write_spans(const char *path, const struct span *spans, int nspans,
		       struct digest *d, char *err, size_t errlen)
{
	XXH3_state_t *x = XXH3_createState();
	struct iovec iov[8];

	if (!x || XXH3_64bits_reset(x) == XXH_ERROR || nspans > (int)(sizeof iov / sizeof iov[0])) {
		XXH3_freeState(x);
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(ENOMEM));
		return -1;
	}
	d->size = 0;
	for (int i = 0; i < nspans; i++) {
		iov[i] = (struct iovec){ (void *)spans[i].p, spans[i].n };
		XXH3_64bits_update(x, spans[i].p, spans[i].n);
		d->size += spans[i].n;
	}
	d->sum = XXH3_64bits_digest(x);
	XXH3_freeState(x);
	if (write_file_synced(path, 0, file_mode, iov, nspans) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int write_optimizer(const char *path, const struct adamw_state *opt, struct digest *d,
			   char *err, size_t errlen)
{
	struct opt_header h = { .version = OPT_VERSION, .n = opt->n, .step = opt->step };
	struct span spans[] = { { &h, sizeof h },
				{ opt->m, opt->n * sizeof(float) },
				{ opt->v, opt->n * sizeof(float) } };

	memcpy(h.magic, OPT_MAGIC, 8);
	return write_spans(path, spans, 3, d, err, errlen);
}

/* model.bin: the llm.c model file of the whole model (gpt2_save's format). */
static int write_model(const char *path, const struct gpt2 *m, struct digest *d, char *err,
		       size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	struct span spans[] = { { hdr, sizeof hdr }, { m->params, m->num_params * sizeof(float) } };

	if (m->shard.tp_size != 1 || m->shard.first_layer != 0 ||
	    m->shard.last_layer != m->config.num_layers) {
		snprintf(err, errlen, "cannot write %s from a shard of the model", path);
		return -1;
	}
	gpt2_header(m, hdr);
	return write_spans(path, spans, 2, d, err, errlen);
}

/* The spike detector's window: {"loss": [...], "grad_norm": [...], "in_row": k}, oldest first. */
static json_t *spike_json(const struct spike_window *w)
{
	json_t *loss = json_array(), *norm = json_array();

	for (int i = 0; loss && norm && i < w->n; i++)
		if (json_array_append_new(loss, json_real(w->loss[i])) < 0 ||
		    json_array_append_new(norm, json_real(w->norm[i])) < 0)
			goto fail;
	if (loss && norm)
		return json_pack("{s:o, s:o, s:i}", "loss", loss, "grad_norm", norm, "in_row",
				 w->in_row);
fail:
	json_decref(loss);
	json_decref(norm);
	return NULL;
}

static int write_state(const char *path, const struct ckpt_state *st,
		       const struct ckpt_layout *l, struct digest *d, char *err, size_t errlen)
{
	json_t *v = json_pack("{s:I, s:{s:I, s:I, s:I, s:o}, s:o, s:o, s:i}",
			      "step", (json_int_t)st->step,
			      "train_data", "epoch", (json_int_t)st->train.epoch,
			      "shard", (json_int_t)st->train.shard,
			      "sample", (json_int_t)st->train.sample,
			      "rng", sj_hex64(st->train.rng),
			      "config_hash", sj_hex64(st->config_hash),
			      "model_hash", sj_hex64(st->model_hash),
			      "restart_count", st->restart_count);
	char *text = NULL;
	int rc = -1;

	if (v && st->global_batch > 0)
		json_object_set_new(v, "global_batch", json_integer(st->global_batch));
	if (v && st->was.batch_size > 0)
		json_object_set_new(v, "settings",
				    json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:f}",
					      "batch_size", st->was.batch_size,
					      "grad_accum", st->was.grad_accum,
					      "seq_len", st->was.seq_len, "dp", st->was.dp,
					      "tp", st->was.tp, "pp", st->was.pp,
					      "zero", st->was.zero, "steps", (json_int_t)st->was.steps,
					      "lr", st->was.lr));
	if (v && (st->spike.n > 0 || st->spike.in_row > 0))
		json_object_set_new(v, "spike_window", spike_json(&st->spike));
	if (v && l)
		json_object_set_new(v, "layout", json_pack("{s:i, s:i, s:i, s:i, s:i}",
							   "world", l->world, "dp", l->dp,
							   "tp", l->tp, "pp", l->pp, "zero", l->zero));
	if (v && (text = json_dumps(v, JSON_INDENT(2)))) {
		d->size = strlen(text);
		d->sum = XXH3_64bits(text, d->size);
		rc = atomic_write_file(path, text, d->size, err, errlen);
	} else {
		snprintf(err, errlen, "cannot format %s: out of memory", path);
	}
	free(text);
	json_decref(v);
	return rc;
}

/*
 * The manifest of dir: the fixed files (model.bin, optimizer.bin and
 * state.json, or state.json alone when sharded) with their digests in
 * fixed[], then the nshards shard files from shard `first` on with theirs
 * in shards[] (first is not 0 only on a node-local tier, which holds its
 * node's shards; the manifest then says "first_shard").
 */
static int write_manifest(const char *dir, int64_t step, const struct digest *fixed, int first,
			  int nshards, const struct digest *shards, char *err, size_t errlen)
{
	char path[4096], name[64];
	json_t *files = json_array(), *v;
	int k = 0, rc = -1;

	for (size_t i = 0; files && i < NFILES; i++)
		if (!nshards || !strcmp(ckpt_files[i], "state.json")) {
			json_array_append_new(files, json_pack("{s:s, s:I, s:o}", "name", ckpt_files[i],
							       "size", (json_int_t)fixed[k].size,
							       "checksum", sj_hex64(fixed[k].sum)));
			k++;
		}
	for (int i = 0; files && i < nshards; i++) {
		snprintf(name, sizeof name, SHARD_NAME, first + i);
		json_array_append_new(files, json_pack("{s:s, s:I, s:o}", "name", name,
						       "size", (json_int_t)shards[i].size,
						       "checksum", sj_hex64(shards[i].sum)));
	}
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	v = json_pack("{s:I, s:i, s:s, s:o}", "step", (json_int_t)step, "shards", nshards,
		      "hash", HASH_NAME, "files", files);
	if (v && first)
		json_object_set_new(v, "first_shard", json_integer(first));
	if (v)
		rc = sj_write_file(path, v, err, errlen);
	else
		snprintf(err, errlen, "cannot format %s: out of memory", path);
	json_decref(v);
	return rc;
}

/* Steps of the committed step_N directories under root, newest first. */
static int list_steps(const char *root, int64_t **out)
{
	struct dirent *e;
	int64_t *v = NULL;
	int n = 0, cap = 0;
	DIR *d = opendir(root);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char *end;
		long long s;

		if (strncmp(e->d_name, "step_", 5))
			continue;
		s = strtoll(e->d_name + 5, &end, 10);
		if (*end || end == e->d_name + 5)
			continue; /* step_N.tmp and strangers */
		if (n == cap) {
			int64_t *nv = realloc(v, sizeof *v * (size_t)(cap = cap ? 2 * cap : 16));

			if (!nv)
				break;
			v = nv;
		}
		v[n++] = s;
	}
	closedir(d);
	for (int i = 1; i < n; i++) /* insertion sort, descending */
		for (int k = i; k > 0 && v[k] > v[k - 1]; k--) {
			int64_t t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	*out = v;
	return n;
}

static void prune(const char *root, struct ckpt_keep keep)
{
	char path[4096];
	int64_t *steps = NULL;
	int n;

	if (keep.newest <= 0)
		return;
	n = list_steps(root, &steps); /* newest first */
	for (int i = keep.newest; i < n; i++) {
		if (keep.milestones > 0 && steps[i] % keep.milestones == 0)
			continue; /* a milestone stays, whatever its age */
		snprintf(path, sizeof path, "%s/step_%08" PRId64, root, steps[i]);
		remove_tree(path);
	}
	free(steps);
}

/*
 * The commit of a complete step_N.tmp/ (every file and the manifest
 * fsynced): rename it to step_N/, point `latest` at it, drop the oldest
 * beyond keep. Before the rename nothing has changed for a reader.
 */
static int publish(const char *root, const char *tmp, const char *final, const char *name,
		   struct ckpt_keep keep, char *err, size_t errlen)
{
	char path[4200];

	remove_tree(final); /* a checkpoint of the same step from a crashed attempt */
	if (rename(tmp, final) < 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
		remove_tree(tmp);
		return -1;
	}
	/* Until checkpoints/ is on disk the rename may vanish in a crash:
	 * not committed, and not left for a later attempt to trust. */
	if (fsync_dir(root) < 0) {
		snprintf(err, errlen, "cannot fsync %s after renaming %s: %s", root, name,
			 strerror(errno));
		remove_tree(final);
		return -1;
	}
	snprintf(path, sizeof path, "%s/latest", root);
	if (atomic_symlink_replace(name, path) < 0) {
		snprintf(err, errlen, "cannot point %s at %s: %s", path, name, strerror(errno));
		return -1;
	}
	if (fsync_dir(root) < 0) {
		snprintf(err, errlen, "cannot fsync %s after pointing latest at %s: %s", root, name,
			 strerror(errno));
		return -1;
	}
	prune(root, keep);
	return 0;
}

int ckpt_save(const char *root, const struct gpt2 *m, const struct adamw_state *opt,
	      const struct ckpt_state *st, struct ckpt_keep keep, char *err, size_t errlen)
{
	char tmp[4096], final[4096], path[4096], name[64];
	struct digest d[NFILES]; /* model.bin, optimizer.bin, state.json */

	snprintf(name, sizeof name, "step_%08" PRId64, st->step);
	snprintf(tmp, sizeof tmp, "%s/%s.tmp", root, name);
	snprintf(final, sizeof final, "%s/%s", root, name);
	remove_tree(tmp); /* an abandoned attempt */
	if (mkdir_p(tmp, dir_mode) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (path_join(path, sizeof path, tmp, "model.bin") < 0) {
		msg_format(err, errlen, "cannot write into %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (write_model(path, m, &d[0], err, errlen) < 0)
		goto fail;
	fault_delay("STORK_FAULT_CKPT_DELAY"); /* widens the half-written window */
	if (fault_at_step("STORK_FAULT_CKPT_FAIL", st->step)) {
		msg_format(err, errlen, "cannot write %s/optimizer.bin: %s (fault injection)", tmp,
			   strerror(ENOSPC));
		goto fail;
	}
	/* model.bin fitted, and the other names are no longer */
	path_join(path, sizeof path, tmp, "optimizer.bin");
	if (write_optimizer(path, opt, &d[1], err, errlen) < 0)
		goto fail;
	path_join(path, sizeof path, tmp, "state.json");
	if (write_state(path, st, NULL, &d[2], err, errlen) < 0)
		goto fail;
	if (write_manifest(tmp, st->step, d, 0, 0, NULL, err, errlen) < 0)
		goto fail;
	if (fsync_dir(tmp) < 0) {
		snprintf(err, errlen, "cannot fsync %s: %s", tmp, strerror(errno));
		goto fail;
	}
	return publish(root, tmp, final, name, keep, err, errlen);
fail:
	remove_tree(tmp);
	return -1;
}

/* ------------------------------------------------------------- reading */

/* Check one file of dir against its manifest entry f, expected to be `name`. */
static int verify_file(const char *dir, const json_t *f, const char *name, int legacy, char *why,
		       size_t len)
{
	const char *have = json_string_value(json_object_get(f, "name"));
	const char *want = json_string_value(json_object_get(f, "checksum"));
	int64_t want_size = sj_int(f, "size", -1);
	char path[4096], hex[24];
	uint64_t sum = 0, size = 0; /* set by digest_file; gcc -fsanitize=thread cannot tell */

	if (!have || !want || want_size < 0 || strcmp(have, name)) {
		msg_format(why, len, "%s/manifest.json: no entry for %s", dir, name);
		return -1;
	}
	if (path_join(path, sizeof path, dir, name) < 0 ||
	    digest_file(path, legacy, &sum, &size) < 0) {
		msg_format(why, len, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	if ((int64_t)size != want_size) {
		msg_format(why, len, "%s has %" PRIu64 " bytes, the manifest says %" PRId64, path, size,
			 want_size);
		return -1;
	}
	snprintf(hex, sizeof hex, "%016" PRIx64, sum);
	if (strcmp(hex, want)) {
		msg_format(why, len, "%s: checksum %s, the manifest says %s", path, hex, want);
		return -1;
	}
	return 0;
}

/*
 * Check dir against its manifest: model.bin, optimizer.bin and state.json,
 * or (sharded) state.json and every shard, each read once. *legacy tells
 * whether the manifest is of the first format (no "hash" field). Returns
 * 0, or -1 with the reason.
 */
static int verify(const char *dir, int *legacy, char *why, size_t len)
{
	char path[4096], name[64];
	const json_t *files, *hash;
	json_t *man;
	int64_t shards, first;
	size_t i = 0;
	int rc = -1;

	if (path_join(path, sizeof path, dir, "manifest.json") < 0) {
		msg_format(why, len, "%s: %s", dir, strerror(errno));
		return -1;
	}
	man = sj_load_file(path, why, len);
	if (!man)
		return -1;
	files = json_object_get(man, "files");
	shards = sj_int(man, "shards", json_object_get(man, "shards") ? -1 : 0);
	first = sj_int(man, "first_shard", 0);
	hash = json_object_get(man, "hash");
	*legacy = hash == NULL;
	if (!json_is_array(files) || shards < 0 || first < 0 || first > INT32_MAX - shards) {
		msg_format(why, len, "%s: no file list or a bad shard count", path);
		goto out;
	}
	if (hash && (!json_is_string(hash) || strcmp(json_string_value(hash), HASH_NAME))) {
		msg_format(why, len, "%s: checksums of an unknown kind (\"hash\": %s); this Stork knows %s",
			 path, json_is_string(hash) ? json_string_value(hash) : "not a string",
			 HASH_NAME);
		goto out;
	}
	for (size_t k = 0; k < NFILES; k++)
		if ((!shards || !strcmp(ckpt_files[k], "state.json")) &&
		    verify_file(dir, json_array_get(files, i++), ckpt_files[k], *legacy, why, len))
			goto out;
	for (int64_t k = first; k < first + shards; k++) {
		snprintf(name, sizeof name, SHARD_NAME, (int)k);
		if (verify_file(dir, json_array_get(files, i++), name, *legacy, why, len))
			goto out;
	}
	rc = 0;
out:
	json_decref(man);
	return rc;
}

/* verify(), telling notice() when the checkpoint is of the first format. */
static int verify_noting(const char *dir, char *why, size_t len, ckpt_notice_fn notice,
			 void *arg)
{
	char msg[4400];
	int legacy = 0;

	if (verify(dir, &legacy, why, len) < 0)
		return -1;
	if (legacy) {
		snprintf(msg, sizeof msg, "checkpoint %s has a manifest of the first format (no "
			 "\"hash\" field): verified with its older checksum", dir);
		notice(arg, msg);
	}
	return 0;
}

int ckpt_find_any(const char *path, char *dir, size_t len, ckpt_notice_fn notice, void *arg)
{
	char sub[4200];
	struct stat st;

	snprintf(sub, sizeof sub, "%s/manifest.json", path);
	if (stat(sub, &st) == 0) {
		char why[1024], msg[1400];

		snprintf(dir, len, "%s", path);
		if (verify_noting(dir, why, sizeof why, notice, arg) == 0)
			return 1;
		snprintf(msg, sizeof msg, "checkpoint %s is not usable (%s)", dir, why);
		notice(arg, msg);
		return 0;
	}
	snprintf(sub, sizeof sub, "%s/checkpoints", path);
	if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
		return ckpt_find(sub, dir, len, notice, arg);
	return ckpt_find(path, dir, len, notice, arg);
}

int ckpt_find(const char *root, char *dir, size_t len, ckpt_notice_fn notice, void *arg)
{
	char link[4096], target[256], why[1024], msg[1400];
	int64_t *steps = NULL;
	ssize_t n;
	int count, found = 0;

	snprintf(link, sizeof link, "%s/latest", root);
	n = readlink(link, target, sizeof target - 1);
	if (n > 0) {
		target[n] = '\0';
		snprintf(dir, len, "%s/%s", root, target);
		if (verify_noting(dir, why, sizeof why, notice, arg) == 0)
			return 1;
		snprintf(msg, sizeof msg, "checkpoint %s is not usable (%s); trying older ones", dir, why);
		notice(arg, msg);
	}
	count = list_steps(root, &steps);
	for (int i = 0; i < count && !found; i++) {
		snprintf(dir, len, "%s/step_%08" PRId64, root, steps[i]);
		if (n > 0 && !strcmp(strrchr(dir, '/') + 1, target))
			continue;
		if (verify_noting(dir, why, sizeof why, notice, arg) == 0) {
			found = 1;
			if (n > 0) {
				snprintf(msg, sizeof msg, "resuming from the older checkpoint %s", dir);
				notice(arg, msg);
			}
		} else {
			snprintf(msg, sizeof msg, "checkpoint %s is not usable (%s)", dir, why);
			notice(arg, msg);
		}
	}
	free(steps);
	return found;
}

/* The settings of state.json (all 0 where a checkpoint of an earlier version has none). */
static void read_settings(const json_t *o, struct ckpt_settings *w)
{
	w->batch_size = (int)sj_int(o, "batch_size", 0);
	w->grad_accum = (int)sj_int(o, "grad_accum", 0);
	w->seq_len = (int)sj_int(o, "seq_len", 0);
	w->dp = (int)sj_int(o, "dp", 0);
	w->tp = (int)sj_int(o, "tp", 0);
	w->pp = (int)sj_int(o, "pp", 0);
	w->zero = (int)sj_int(o, "zero", 0);
	w->steps = sj_int(o, "steps", 0);
	w->lr = sj_real(o, "lr", 0.0);
}

/* state.json's spike_window, when there is one (else an empty window); -1 when malformed. */
static int read_spike(const json_t *o, struct spike_window *w)
{
	const json_t *loss = json_object_get(o, "loss"), *norm = json_object_get(o, "grad_norm");
	size_t n = json_array_size(loss);

	spike_init(w);
	if (!o)
		return 0;
	if (!json_is_array(loss) || !json_is_array(norm) || json_array_size(norm) != n ||
	    n > SPIKE_WINDOW_MAX || !json_is_integer(json_object_get(o, "in_row")))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const json_t *a = json_array_get(loss, i), *b = json_array_get(norm, i);

		if (!json_is_number(a) || !json_is_number(b))
			return -1;
		w->loss[i] = (float)json_number_value(a);
		w->norm[i] = (float)json_number_value(b);
	}
	w->n = (int)n;
	w->in_row = (int)sj_int(o, "in_row", 0);
	return w->in_row < 0 ? -1 : 0;
}

int ckpt_read_state(const char *dir, struct ckpt_state *st, char *err, size_t errlen)
{
	char path[4096];
	json_t *v;
	const json_t *d;
	json_int_t step, e, sh, sa, rc;

	snprintf(path, sizeof path, "%s/state.json", dir);
	v = sj_load_file(path, err, errlen);
	if (!v)
		return -1;
	d = json_object_get(v, "train_data");
	if (json_unpack(v, "{s:I, s:{s:I, s:I, s:I}, s:I}", "step", &step, "train_data", "epoch", &e,
			"shard", &sh, "sample", &sa, "restart_count", &rc) < 0 ||
	    sj_get_hex64(d, "rng", &st->train.rng) < 0 ||
	    sj_get_hex64(v, "config_hash", &st->config_hash) < 0 ||
	    sj_get_hex64(v, "model_hash", &st->model_hash) < 0 ||
	    read_spike(json_object_get(v, "spike_window"), &st->spike) < 0) {
		snprintf(err, errlen, "%s: missing or malformed fields", path);
		json_decref(v);
		return -1;
	}
	st->step = step;
	st->train.epoch = (uint64_t)e;
	st->train.shard = (uint64_t)sh;
	st->train.sample = (uint64_t)sa;
	st->restart_count = (int)rc;
	st->global_batch = sj_int(v, "global_batch", 0);
	read_settings(json_object_get(v, "settings"), &st->was);
	json_decref(v);
	return 0;
}

void ckpt_shape_str(const struct gpt2_config *c, char *buf, size_t len)
{
	snprintf(buf, len, "layers %d, heads %d, channels %d, max_seq_len %d, vocab %d (padded %d)",
		 c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size,
		 c->padded_vocab_size);
}

static int read_optimizer(const char *path, size_t n, struct adamw_state *opt, char *err,
			  size_t errlen)
{
	struct opt_header h;
	FILE *f = fopen(path, "rb");

	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, OPT_MAGIC, 8) ||
	    h.version != OPT_VERSION || h.n != n) {
		snprintf(err, errlen, "%s: not an optimizer state for %zu parameters", path, n);
		goto fail;
	}
	if (adamw_init(opt, n) < 0) {
		snprintf(err, errlen, "out of memory reading %s", path);
		goto fail;
	}
	opt->step = h.step;
	if (fread(opt->m, sizeof(float), n, f) != n || fread(opt->v, sizeof(float), n, f) != n) {
		snprintf(err, errlen, "%s is truncated", path);
		adamw_free(opt);
		goto fail;
	}
	fclose(f);
	return 0;
fail:
	fclose(f);
	return -1;
}

int ckpt_load(const char *dir, const struct gpt2_config *expect, struct gpt2 *m,
	      struct adamw_state *opt, char *err, size_t errlen)
{
	char path[4096], have[256], want[256];

	snprintf(path, sizeof path, "%s/model.bin", dir);
	if (gpt2_load(m, path, err, errlen) < 0)
		return -1;
	if (expect && memcmp(&m->config, expect, sizeof *expect)) {
		ckpt_shape_str(&m->config, have, sizeof have);
		ckpt_shape_str(expect, want, sizeof want);
		snprintf(err, errlen, "checkpoint %s holds a model of another shape: it has %s; the configuration asks for %s",
			 path, have, want);
		gpt2_free(m);
		return -1;
	}
	snprintf(path, sizeof path, "%s/optimizer.bin", dir);
	if (read_optimizer(path, m->num_params, opt, err, errlen) < 0) {
		gpt2_free(m);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- shards */

static void step_dirs(const char *root, int64_t step, char *tmp, char *final, size_t len,
		      char *name, size_t nlen)
{
	snprintf(name, nlen, "step_%08" PRId64, step);
	snprintf(tmp, len, "%s/%s.tmp", root, name);
	snprintf(final, len, "%s/%s", root, name);
}

int ckpt_prepare(const char *root, int64_t step, char *err, size_t errlen)
{
	char tmp[4096], final[4096], name[64];

	step_dirs(root, step, tmp, final, sizeof tmp, name, sizeof name);
	remove_tree(tmp); /* an abandoned attempt */
	if (mkdir_p(tmp, dir_mode) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

void ckpt_abandon(const char *root, int64_t step)
{
	char tmp[4096], final[4096], name[64];

	step_dirs(root, step, tmp, final, sizeof tmp, name, sizeof name);
	remove_tree(tmp);
}

int ckpt_write_shard(const char *root, int64_t step, const struct ckpt_shard_info *info,
		     const float *params, const float *m, const float *v, uint64_t *sum,
		     uint64_t *size, char *err, size_t errlen)
{
	struct digest d;
	char tmp[4096], final[4096], name[64], path[4200];
	struct shard_header h = { .version = SHARD_VERSION };
	uint64_t nm = 0;

	memcpy(h.magic, SHARD_MAGIC, 8);
	h.rank = info->rank;
	h.world = info->layout.world;
	h.dp = info->layout.dp;
	h.tp = info->layout.tp;
	h.pp = info->layout.pp;
	h.zero = info->layout.zero;
	h.tp_rank = info->tp_rank;
	h.dp_rank = info->dp_rank;
	h.stage = info->stage;
	h.first_layer = info->first_layer;
	h.last_layer = info->last_layer;
	gpt2_config_header(&info->config, h.model);
	h.nparams = info->nparams;
	h.nseg = (uint32_t)info->nseg;
	for (int k = 0; k < info->nseg; k++) {
		h.seg_lo[k] = info->seg_lo[k];
		h.seg_hi[k] = info->seg_hi[k];
		nm += info->seg_hi[k] - info->seg_lo[k];
	}
	h.opt_step = info->opt_step;
	step_dirs(root, step, tmp, final, sizeof tmp, name, sizeof name);
	snprintf(name, sizeof name, SHARD_NAME, info->rank);
	snprintf(path, sizeof path, "%s/%s", tmp, name);
	{
		struct span spans[] = { { &h, sizeof h },
					{ params, info->nparams * sizeof(float) },
					{ m, nm * sizeof(float) },
					{ v, nm * sizeof(float) } };

		if (write_spans(path, spans, 4, &d, err, errlen) < 0)
			return -1;
	}
	fault_delay("STORK_FAULT_CKPT_DELAY");
	if (info->rank == 0 && fault_at_step("STORK_FAULT_CKPT_FAIL", step)) {
		snprintf(err, errlen, "cannot write %s: %s (fault injection)", path, strerror(ENOSPC));
		return -1;
	}
	*sum = d.sum;
	*size = d.size;
	return 0;
}

int ckpt_commit(const char *root, const struct ckpt_state *st, const struct ckpt_layout *l,
		const uint64_t *sums, const uint64_t *sizes, struct ckpt_keep keep, char *err,
		size_t errlen)
{
	return ckpt_commit_part(root, st, l, 0, l->world, sums, sizes, keep, err, errlen);
}

int ckpt_commit_part(const char *root, const struct ckpt_state *st, const struct ckpt_layout *l,
		     int first, int count, const uint64_t *sums, const uint64_t *sizes,
		     struct ckpt_keep keep,
		     char *err, size_t errlen)
{
	char tmp[4096], final[4096], name[64], path[4200];
	struct digest state, *shards = calloc((size_t)count, sizeof *shards);

	step_dirs(root, st->step, tmp, final, sizeof tmp, name, sizeof name);
	if (!shards) {
		snprintf(err, errlen, "out of memory committing %s", tmp);
		goto fail;
	}
	for (int k = 0; k < count; k++)
		shards[k] = (struct digest){ .sum = sums[k], .size = sizes[k] };
	snprintf(path, sizeof path, "%s/state.json", tmp);
	if (write_state(path, st, l, &state, err, errlen) < 0 ||
	    write_manifest(tmp, st->step, &state, first, count, shards, err, errlen) < 0)
		goto fail;
	if (fsync_dir(tmp) < 0) {
		snprintf(err, errlen, "cannot fsync %s: %s", tmp, strerror(errno));
		goto fail;
	}
	free(shards);
	return publish(root, tmp, final, name, keep, err, errlen);
fail:
	free(shards);
	remove_tree(tmp);
	return -1;
}

/* --------------------------------------------------- the whole model back */

void ckpt_full_free(struct ckpt_full *f)
{
	free(f->params);
	free(f->m);
	free(f->v);
	memset(f, 0, sizeof *f);
}

/* A whole-model checkpoint: model.bin and optimizer.bin. */
static int load_full_plain(const char *dir, struct ckpt_full *f, char *err, size_t errlen)
{
	struct gpt2 m;
	struct adamw_state opt;

	if (ckpt_load(dir, NULL, &m, &opt, err, errlen) < 0)
		return -1;
	f->config = m.config;
	f->params = m.params;
	m.params = NULL;
	f->m = opt.m;
	f->v = opt.v;
	f->opt_step = opt.step;
	gpt2_free(&m);
	return 0;
}

/* All n bytes at offset at; a file that ends first is an error. */
static int read_exact(int fd, void *buf, size_t n, off_t at)
{
	return pread_all(fd, buf, n, at) == (ssize_t)n ? 0 : -1;
}

int ckpt_open_shard(const char *dir, int k, const struct ckpt_layout *l, struct shard_header *h,
		    char *err, size_t errlen)
{
	char path[4200];
	struct stat st;
	int fd;

	snprintf(path, sizeof path, "%s/" SHARD_NAME, dir, k);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (read_exact(fd, h, sizeof *h, 0) < 0 || memcmp(h->magic, SHARD_MAGIC, 8) ||
	    h->version != SHARD_VERSION || h->rank != k || h->world != l->world || h->dp != l->dp ||
	    h->tp != l->tp || h->pp != l->pp || h->zero != l->zero ||
	    h->nseg > CKPT_MAX_SEGMENTS) {
		snprintf(err, errlen, "%s: not shard %d of a dp %d x tp %d x pp %d checkpoint", path,
			 k, l->dp, l->tp, l->pp);
		close(fd);
		return -1;
	}
	/* its parameter count against its length, before anyone allocates for it */
	if (fstat(fd, &st) < 0 || h->nparams > ((uint64_t)st.st_size - sizeof *h) / sizeof(float)) {
		snprintf(err, errlen, "%s: truncated: its header's nparams (%llu) is more than the file's %lld "
			 "bytes hold", path, (unsigned long long)h->nparams, (long long)st.st_size);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Read a shard's parameters (when params is not NULL) and place its parts
 * of the moments into lm, lv (the shard's layout).
 */
static int read_shard(int fd, const struct shard_header *h, float *params, float *lm, float *lv)
{
	off_t at = (off_t)sizeof *h;
	uint64_t nm = 0;

	if (params && read_exact(fd, params, h->nparams * sizeof(float), at) < 0)
		return -1;
	at += (off_t)(h->nparams * sizeof(float));
	for (uint32_t k = 0; k < h->nseg; k++)
		nm += h->seg_hi[k] - h->seg_lo[k];
	for (uint32_t k = 0, done = 0; k < h->nseg; k++) {
		size_t n = h->seg_hi[k] - h->seg_lo[k];

		if (h->seg_hi[k] > h->nparams || h->seg_lo[k] > h->seg_hi[k] ||
		    read_exact(fd, lm + h->seg_lo[k], n * sizeof(float),
			       at + (off_t)(done * sizeof(float))) < 0 ||
		    read_exact(fd, lv + h->seg_lo[k], n * sizeof(float),
			       at + (off_t)((nm + done) * sizeof(float))) < 0)
			return -1;
		done += (uint32_t)n;
	}
	return 0;
}

/*
 * Before anything is allocated for a whole model of total parameters: the
 * shards that hold one replica (data-parallel rank 0 of every stage and
 * tensor slice) each hold the count their place in the model implies, and
 * together the whole. 0, or -1 with err naming the shard and the field.
 */
static int shards_hold(const char *dir, const struct ckpt_layout *l, const struct gpt2_config *c,
		       size_t total, char *err, size_t errlen)
{
	size_t sizes[GPT2_NUM_TENSORS], sum = 0;
	struct shard_header h;

	for (int stage = 0; stage < l->pp; stage++) {
		for (int tp = 0; tp < l->tp; tp++) {
			int k = stage * l->dp * l->tp + tp, fd = ckpt_open_shard(dir, k, l, &h, err, errlen);
			struct gpt2_shard s = { .tp_rank = tp, .tp_size = l->tp };

			if (fd < 0)
				return -1;
			close(fd);
			s.first_layer = h.first_layer;
			s.last_layer = h.last_layer;
			if (gpt2_shard_check(c, &s, err, errlen) < 0 ||
			    gpt2_shard_sizes(c, &s, sizes) != h.nparams) {
				snprintf(err, errlen, "%s/" SHARD_NAME ": its header's nparams (%llu) or "
					 "layers [%d, %d) are not those of its place in this model", dir, k,
					 (unsigned long long)h.nparams, h.first_layer, h.last_layer);
				return -1;
			}
			sum += h.nparams;
		}
	}
	if (sum < total) {
		snprintf(err, errlen, "%s: its shards hold %zu parameters, the model has %zu", dir, sum,
			 total);
		return -1;
	}
	return 0;
}

/*
 * A sharded checkpoint: for every (stage, tp slice), the parameters of its
 * first replica and the moments of every replica's parts (ZeRO-1) or of the
 * first (otherwise), placed into the whole model.
 */
static int load_full_sharded(const char *dir, const struct ckpt_layout *l, struct ckpt_full *f,
			     char *err, size_t errlen)
{
	struct shard_header h;
	size_t sizes[GPT2_NUM_TENSORS], total, n;
	struct gpt2_shard whole;
	float *lp = NULL, *lm = NULL, *lv = NULL;
	int fd, rc = -1;

	if ((fd = ckpt_open_shard(dir, 0, l, &h, err, errlen)) < 0)
		return -1;
	close(fd);
	{
		char path[4200];

		snprintf(path, sizeof path, "%s/" SHARD_NAME, dir, 0);
		if (gpt2_config_from_header(h.model, path, &f->config, err, errlen) < 0)
			return -1;
	}
	gpt2_shard_whole(&f->config, &whole);
	total = gpt2_shard_sizes(&f->config, &whole, sizes);
	if (shards_hold(dir, l, &f->config, total, err, errlen) < 0)
		return -1;
	f->params = malloc(total * sizeof(float));
	f->m = malloc(total * sizeof(float));
	f->v = malloc(total * sizeof(float));
	lp = malloc(total * sizeof(float));
	lm = malloc(total * sizeof(float));
	lv = malloc(total * sizeof(float));
	if (!f->params || !f->m || !f->v || !lp || !lm || !lv) {
		snprintf(err, errlen, "out of memory reading %s", dir);
		goto out;
	}
	for (int stage = 0; stage < l->pp; stage++) {
		for (int tp = 0; tp < l->tp; tp++) {
			struct gpt2_shard s = { .tp_rank = tp, .tp_size = l->tp };

			for (int dp = 0; dp < (l->zero ? l->dp : 1); dp++) {
				int k = stage * l->dp * l->tp + dp * l->tp + tp;

				if ((fd = ckpt_open_shard(dir, k, l, &h, err, errlen)) < 0)
					goto out;
				s.first_layer = h.first_layer;
				s.last_layer = h.last_layer;
				n = gpt2_shard_check(&f->config, &s, err, errlen) < 0 ?
					    0 : gpt2_shard_sizes(&f->config, &s, sizes);
				if (!n || n != h.nparams ||
				    read_shard(fd, &h, dp == 0 ? lp : NULL, lm, lv) < 0) {
					snprintf(err, errlen, "%s/" SHARD_NAME ": truncated or not of this model",
						 dir, k);
					close(fd);
					goto out;
				}
				close(fd);
				if (dp == 0)
					f->opt_step = h.opt_step;
			}
			gpt2_shard_copy(&f->config, &s, f->params, lp, 0);
			gpt2_shard_copy(&f->config, &s, f->m, lm, 0);
			gpt2_shard_copy(&f->config, &s, f->v, lv, 0);
		}
	}
	rc = 0;
out:
	free(lp);
	free(lm);
	free(lv);
	if (rc)
		ckpt_full_free(f);
	return rc;
}

int ckpt_read_part(const char *dir, int *first, int *count, char *err, size_t errlen)
{
	char path[4200];
	json_t *man;

	snprintf(path, sizeof path, "%s/manifest.json", dir);
	if (!(man = sj_load_file(path, err, errlen)))
		return -1;
	*first = (int)sj_int(man, "first_shard", 0);
	*count = (int)sj_int(man, "shards", 0);
	json_decref(man);
	return 0;
}

int ckpt_read_layout(const char *dir, struct ckpt_layout *l, char *err, size_t errlen)
{
	char path[4096];
	json_t *v, *o;
	int w, dp, tp, pp, zero;
	int rc = 0;

	memset(l, 0, sizeof *l);
	snprintf(path, sizeof path, "%s/state.json", dir);
	if (!(v = sj_load_file(path, err, errlen)))
		return -1;
	o = json_object_get(v, "layout");
	if (o) {
		if (json_unpack(o, "{s:i, s:i, s:i, s:i, s:i}", "world", &w, "dp", &dp, "tp", &tp,
				"pp", &pp, "zero", &zero) < 0 ||
		    w < 1 || dp < 1 || tp < 1 || pp < 1 || (int64_t)dp * tp * pp != w) {
			snprintf(err, errlen, "%s: malformed layout", path);
			rc = -1;
		} else {
			*l = (struct ckpt_layout){ .world = w, .dp = dp, .tp = tp, .pp = pp,
						   .zero = zero, .sharded = 1 };
		}
	}
	json_decref(v);
	return rc;
}

int ckpt_load_full(const char *dir, const struct gpt2_config *expect, struct ckpt_full *f,
		   char *err, size_t errlen)
{
	char have[256], want[256];
	struct ckpt_layout l;

	memset(f, 0, sizeof *f);
	if (ckpt_read_layout(dir, &l, err, errlen) < 0)
		return -1;
	if (l.sharded ? load_full_sharded(dir, &l, f, err, errlen) :
			load_full_plain(dir, f, err, errlen))
		return -1;
	if (expect && memcmp(&f->config, expect, sizeof *expect)) {
		ckpt_shape_str(&f->config, have, sizeof have);
		ckpt_shape_str(expect, want, sizeof want);
		snprintf(err, errlen, "checkpoint %s%s holds a model of another shape: it has %s; the configuration asks for %s",
			 dir, l.sharded ? "" : "/model.bin", have, want);
		ckpt_full_free(f);
		return -1;
	}
	return 0;
}

int ckpt_read_own_shard(const char *dir, const struct ckpt_shard_info *want, float *params,
			float *m, float *v, int64_t *opt_step, char *err, size_t errlen)
{
	struct shard_header h;
	int fd = ckpt_open_shard(dir, want->rank, &want->layout, &h, err, errlen);
	int32_t model[GPT2_HEADER_INTS];
	struct gpt2_config has;
	char path[4200], a[256], b[256];
	uint64_t nm = 0;
	int rc = -1;

	if (fd < 0)
		return -1;
	/* the header's shape judged on its own first, so that a field beyond
	 * any model's limits is named as such */
	snprintf(path, sizeof path, "%s/" SHARD_NAME, dir, want->rank);
	if (gpt2_config_from_header(h.model, path, &has, err, errlen) < 0)
		goto out;
	gpt2_config_header(&want->config, model);
	if (memcmp(model, h.model, sizeof model)) {
		ckpt_shape_str(&has, a, sizeof a);
		ckpt_shape_str(&want->config, b, sizeof b);
		snprintf(err, errlen, "%s holds a model of another shape: it has %s; the configuration "
			 "asks for %s", path, a, b);
		goto out;
	}
	for (int k = 0; k < want->nseg; k++)
		nm += want->seg_hi[k] - want->seg_lo[k];
	if (h.nparams != want->nparams || (int)h.nseg != want->nseg || h.tp_rank != want->tp_rank ||
	    h.stage != want->stage || h.first_layer != want->first_layer ||
	    h.last_layer != want->last_layer) {
		snprintf(err, errlen, "%s/" SHARD_NAME ": not this rank's part of the layout", dir,
			 want->rank);
		goto out;
	}
	for (int k = 0; k < want->nseg; k++)
		if (h.seg_lo[k] != want->seg_lo[k] || h.seg_hi[k] != want->seg_hi[k]) {
			snprintf(err, errlen, "%s/" SHARD_NAME ": optimizer parts differ", dir, want->rank);
			goto out;
		}
	if (read_exact(fd, params, h.nparams * sizeof(float), (off_t)sizeof h) < 0 ||
	    read_exact(fd, m, nm * sizeof(float),
		       (off_t)(sizeof h + h.nparams * sizeof(float))) < 0 ||
	    read_exact(fd, v, nm * sizeof(float),
		       (off_t)(sizeof h + (h.nparams + nm) * sizeof(float))) < 0) {
		snprintf(err, errlen, "%s/" SHARD_NAME ": truncated", dir, want->rank);
		goto out;
	}
	*opt_step = h.opt_step;
	rc = 0;
out:
	close(fd);
	return rc;
}

int ckpt_export(const char *dir, const char *out, char *err, size_t errlen)
{
	struct ckpt_full f;
	struct gpt2 m;
	int rc;

	if (ckpt_load_full(dir, NULL, &f, err, errlen) < 0)
		return -1;
	if ((rc = gpt2_shard_from_full(&m, &f.config, NULL, f.params)) < 0) {
		snprintf(err, errlen, "%s", m.err);
		ckpt_full_free(&f);
		return -1;
	}
	rc = gpt2_save(&m, out, err, errlen);
	gpt2_free(&m);
	ckpt_full_free(&f);
	return rc;
}
