/*
 * daemon/checkpoint.c - see checkpoint.h.
 *
 * The checksum is a word-at-a-time multiply-xorshift hash (8 bytes per
 * step): it catches truncation and corruption at memory speed, which
 * matters because the signal-to-requeue time includes hashing ~1.5 GB for
 * GPT-2 124M. It is not cryptographic and need not be.
 */
#include "config.h"
#include "daemon/checkpoint.h"

#include "lib/atomic_file.h"
#include "lib/fault.h"
#include "lib/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPT_MAGIC "STORKOPT"
#define OPT_VERSION 1

struct opt_header {
	char magic[8];
	uint32_t version;
	uint32_t reserved;
	uint64_t n;
	int64_t step;
};

static const char *const ckpt_files[] = { "model.bin", "optimizer.bin", "state.json" };
#define NFILES (sizeof ckpt_files / sizeof ckpt_files[0])

/* ------------------------------------------------------------- checksum */

static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w * 0x9E3779B97F4A7C15ULL;
	h = (h << 27 | h >> 37) * 0xBF58476D1CE4E5B9ULL;
	return h;
}

int ckpt_checksum_file(const char *path, uint64_t *sum, uint64_t *size)
{
	static const size_t bufsize = 1 << 20;
	uint64_t h = 0xCBF29CE484222325ULL, total = 0;
	unsigned char *buf;
	ssize_t got;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	buf = malloc(bufsize);
	if (!buf) {
		close(fd);
		return -1;
	}
	while ((got = read(fd, buf, bufsize)) > 0) {
		size_t i = 0;

		/* Whole words; the buffer size keeps words aligned across reads
		 * except at the very end of the file. */
		for (; i + 8 <= (size_t)got; i += 8) {
			uint64_t w;

			memcpy(&w, buf + i, 8);
			h = mix(h, w);
		}
		for (; i < (size_t)got; i++)
			h = mix(h, buf[i]);
		total += (uint64_t)got;
	}
	free(buf);
	close(fd);
	if (got < 0)
		return -1;
	*sum = mix(h, total);
	*size = total;
	return 0;
}

/* ------------------------------------------------------------- writing */

static int fsync_file(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "cannot fsync %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n < (1u << 30) ? n : (1u << 30));

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_optimizer(const char *path, const struct adamw_state *opt, char *err,
			   size_t errlen)
{
	struct opt_header h = { .version = OPT_VERSION, .n = opt->n, .step = opt->step };
	int fd;

	memcpy(h.magic, OPT_MAGIC, 8);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	if (write_all(fd, &h, sizeof h) < 0 || write_all(fd, opt->m, opt->n * sizeof(float)) < 0 ||
	    write_all(fd, opt->v, opt->n * sizeof(float)) < 0 || fsync(fd) < 0)
		goto fail;
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static void key_hex(struct json *j, const char *key, uint64_t v)
{
	char hex[24];

	snprintf(hex, sizeof hex, "%016" PRIx64, v);
	json_key_string(j, key, hex);
}

static int write_state(const char *path, const struct ckpt_state *st, char *err, size_t errlen)
{
	struct json j;
	int rc;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_int(&j, "step", st->step);
	json_key_begin_object(&j, "train_data");
	json_key_uint(&j, "epoch", st->train.epoch);
	json_key_uint(&j, "shard", st->train.shard);
	json_key_uint(&j, "sample", st->train.sample);
	key_hex(&j, "rng", st->train.rng);
	json_end_object(&j);
	key_hex(&j, "config_hash", st->config_hash);
	key_hex(&j, "model_hash", st->model_hash);
	json_key_int(&j, "restart_count", st->restart_count);
	json_end_object(&j);
	rc = json_error(&j) ? -1 : atomic_write_file(path, json_str(&j), json_len(&j), err, errlen);
	json_free(&j);
	return rc;
}

static int write_manifest(const char *dir, int64_t step, char *err, size_t errlen)
{
	char path[4096];
	struct json j;
	int rc = -1;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_int(&j, "step", step);
	json_key_begin_array(&j, "files");
	for (size_t i = 0; i < NFILES; i++) {
		uint64_t sum, size;

		snprintf(path, sizeof path, "%s/%s", dir, ckpt_files[i]);
		if (ckpt_checksum_file(path, &sum, &size) < 0) {
			snprintf(err, errlen, "cannot read back %s: %s", path, strerror(errno));
			goto out;
		}
		json_begin_object(&j);
		json_key_string(&j, "name", ckpt_files[i]);
		json_key_uint(&j, "size", size);
		key_hex(&j, "checksum", sum);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_end_object(&j);
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	if (!json_error(&j))
		rc = atomic_write_file(path, json_str(&j), json_len(&j), err, errlen);
out:
	json_free(&j);
	return rc;
}

static void remove_tree(const char *dir)
{
	char path[4096];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
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

static void prune(const char *root, int keep)
{
	char path[4096];
	int64_t *steps = NULL;
	int n;

	if (keep <= 0)
		return;
	n = list_steps(root, &steps);
	for (int i = keep; i < n; i++) {
		snprintf(path, sizeof path, "%s/step_%08" PRId64, root, steps[i]);
		remove_tree(path);
	}
	free(steps);
}

int ckpt_save(const char *root, const struct gpt2 *m, const struct adamw_state *opt,
	      const struct ckpt_state *st, int keep, char *err, size_t errlen)
{
	char tmp[4096], final[4096], path[4096], name[64];

	snprintf(name, sizeof name, "step_%08" PRId64, st->step);
	snprintf(tmp, sizeof tmp, "%s/%s.tmp", root, name);
	snprintf(final, sizeof final, "%s/%s", root, name);
	remove_tree(tmp); /* an abandoned attempt */
	if (mkdir_p(tmp, 0755) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, "%s/model.bin", tmp);
	if (gpt2_save(m, path, err, errlen) < 0 || fsync_file(path, err, errlen) < 0)
		goto fail;
	fault_delay("STORK_FAULT_CKPT_DELAY"); /* widens the half-written window */
	snprintf(path, sizeof path, "%s/optimizer.bin", tmp);
	if (write_optimizer(path, opt, err, errlen) < 0)
		goto fail;
	snprintf(path, sizeof path, "%s/state.json", tmp);
	if (write_state(path, st, err, errlen) < 0)
		goto fail;
	if (write_manifest(tmp, st->step, err, errlen) < 0 || fsync_dir(tmp) < 0)
		goto fail;
	remove_tree(final); /* a checkpoint of the same step from a crashed attempt */
	if (rename(tmp, final) < 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
		goto fail;
	}
	fsync_dir(root);
	snprintf(path, sizeof path, "%s/latest", root);
	if (atomic_symlink_replace(name, path) < 0) {
		snprintf(err, errlen, "cannot point %s at %s: %s", path, name, strerror(errno));
		return -1;
	}
	fsync_dir(root);
	prune(root, keep);
	return 0;
fail:
	remove_tree(tmp);
	return -1;
}

/* ------------------------------------------------------------- reading */

/* Check dir against its manifest. Returns 0, or -1 with the reason. */
static int verify(const char *dir, char *why, size_t len)
{
	char path[4096], err[256];
	struct json_value *man;
	const struct json_value *files;
	int rc = -1;

	snprintf(path, sizeof path, "%s/manifest.json", dir);
	man = json_parse_file(path, err, sizeof err);
	if (!man) {
		snprintf(why, len, "%s", err);
		return -1;
	}
	files = json_get(man, "files");
	for (size_t i = 0; i < NFILES; i++) {
		const struct json_value *f = files ? json_at(files, i) : NULL;
		const char *name = f ? json_get_string(f, "name") : NULL;
		const char *want = f ? json_get_string(f, "checksum") : NULL;
		int64_t want_size;
		uint64_t sum, size;
		char hex[24];

		if (!name || !want || json_get_int(f, "size", &want_size) < 0 ||
		    strcmp(name, ckpt_files[i])) {
			snprintf(why, len, "%s: entry %zu is not %s", path, i, ckpt_files[i]);
			goto out;
		}
		snprintf(path, sizeof path, "%s/%s", dir, name);
		if (ckpt_checksum_file(path, &sum, &size) < 0) {
			snprintf(why, len, "cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		if ((int64_t)size != want_size) {
			snprintf(why, len, "%s has %" PRIu64 " bytes, the manifest says %" PRId64,
				 path, size, want_size);
			goto out;
		}
		snprintf(hex, sizeof hex, "%016" PRIx64, sum);
		if (strcmp(hex, want)) {
			snprintf(why, len, "%s: checksum %s, the manifest says %s", path, hex, want);
			goto out;
		}
	}
	rc = 0;
out:
	json_value_free(man);
	return rc;
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
		if (verify(dir, why, sizeof why) == 0)
			return 1;
		snprintf(msg, sizeof msg, "checkpoint %s is not usable (%s); trying older ones", dir, why);
		notice(arg, msg);
	}
	count = list_steps(root, &steps);
	for (int i = 0; i < count && !found; i++) {
		snprintf(dir, len, "%s/step_%08" PRId64, root, steps[i]);
		if (n > 0 && !strcmp(strrchr(dir, '/') + 1, target))
			continue;
		if (verify(dir, why, sizeof why) == 0) {
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

static int get_hex(const struct json_value *o, const char *key, uint64_t *out)
{
	const char *s = json_get_string(o, key);
	char *end;

	if (!s)
		return -1;
	*out = strtoull(s, &end, 16);
	return *end ? -1 : 0;
}

int ckpt_read_state(const char *dir, struct ckpt_state *st, char *err, size_t errlen)
{
	char path[4096], why[256];
	struct json_value *v;
	const struct json_value *d;
	int64_t step, e, sh, sa, rc = 0;

	snprintf(path, sizeof path, "%s/state.json", dir);
	v = json_parse_file(path, why, sizeof why);
	if (!v) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	d = json_get(v, "train_data");
	if (json_get_int(v, "step", &step) < 0 || !d || json_get_int(d, "epoch", &e) < 0 ||
	    json_get_int(d, "shard", &sh) < 0 || json_get_int(d, "sample", &sa) < 0 ||
	    get_hex(d, "rng", &st->train.rng) < 0 || get_hex(v, "config_hash", &st->config_hash) < 0 ||
	    get_hex(v, "model_hash", &st->model_hash) < 0 ||
	    json_get_int(v, "restart_count", &rc) < 0) {
		snprintf(err, errlen, "%s: missing or malformed fields", path);
		json_value_free(v);
		return -1;
	}
	st->step = step;
	st->train.epoch = (uint64_t)e;
	st->train.shard = (uint64_t)sh;
	st->train.sample = (uint64_t)sa;
	st->restart_count = (int)rc;
	json_value_free(v);
	return 0;
}

static void shape_str(const struct gpt2_config *c, char *buf, size_t len)
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
		shape_str(&m->config, have, sizeof have);
		shape_str(expect, want, sizeof want);
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
