/*
 * lib/formats/safetensors.c - see safetensors.h.
 *
 * st_open reads the 8-byte length and the header, and nothing else: the
 * tensors stay on disk until a read asks for a byte range. Each file's
 * tensors are checked against its data section once, sorted by offset
 * (they must tile it exactly); the set's tensors are then kept sorted by
 * name for st_find's binary search.
 *
 * A 16-bit read lands in the upper half of the caller's float buffer and
 * is widened in place from the front: float i (bytes 4i..4i+3) never
 * reaches a 16-bit value not yet read (bytes 2n+2j, j > i), so no second
 * buffer is needed however large the tensor.
 */
#include "config.h"
#include "lib/formats/safetensors.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/io.h"
#include "lib/formats/stork_json.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads little-endian F32 data in place"
#endif

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define INDEX_MAX (64u << 20) /* an index of 405B parameters is ~100 KB */

struct st_file {
	char *path;
	int fd;
	json_t *meta;            /* "__metadata__" or NULL */
};

struct safetensors {
	char *name;              /* the file, or the index */
	struct st_file *files;
	int nfiles;
	struct st_tensor *t;     /* sorted by name */
	size_t n;
};

static const struct {
	const char *name;
	enum st_dtype type;
	size_t size;
} dtypes[] = {
	{ "F32", ST_F32, 4 },
	{ "BF16", ST_BF16, 2 },
	{ "F16", ST_F16, 2 },
};

const char *st_dtype_name(enum st_dtype t)
{
	return dtypes[t].name;
}

size_t st_dtype_size(enum st_dtype t)
{
	return dtypes[t].size;
}

/* ------------------------------------------------------------ conversions */

float st_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

float st_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {               /* infinity, or NaN with its payload */
		bits = sign | 0x7f800000u | man << 13;
	} else if (exp == 0) {           /* zero or subnormal: man * 2^-24, exact */
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	} else {                         /* rebias the exponent: 15 -> 127 */
		bits = sign | (exp + 112) << 23 | man << 13;
	}
	memcpy(&f, &bits, sizeof f);
	return f;
}

uint16_t st_f32_to_bf16(float f)
{
	uint32_t bits;

	memcpy(&bits, &f, sizeof bits);
	if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one (quiet bit set) */
		return (uint16_t)(bits >> 16 | 0x0040);
	/* Add just under half of the dropped part's unit, plus one when the
	 * kept part is odd: halfway cases go to the even neighbour. A carry
	 * into the exponent is right (the next binade, or infinity). */
	bits += 0x7fffu + ((bits >> 16) & 1);
	return (uint16_t)(bits >> 16);
}

/* ---------------------------------------------------------------- helpers */

/* "[4, 8]" into buf. */
static const char *shape_text(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t o = 0;

	o += snprintf(buf, len, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
	return buf;
}

/* A name fit for a message: not empty, no control characters. The
 * offending byte's position in *at, or -1 for an empty name. */
static bool printable_name(const char *name, long *at)
{
	*at = -1;
	if (!*name)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f) {
			*at = (long)(p - (const unsigned char *)name);
			return false;
		}
	return true;
}

/* Product of shape as elements and as bytes of esize each: false when a
 * size is negative or the bytes do not fit in 63 bits, counting a size 0
 * as 1 (a row of a [0, 2^40, 2^40] tensor would have no size). */
static bool shape_size(int ndim, const int64_t *shape, size_t esize, int64_t *nelem,
		       int64_t *bytes)
{
	int64_t n = 1, most = (int64_t)esize;

	for (int i = 0; i < ndim; i++)
		if (shape[i] < 0 || __builtin_mul_overflow(most, shape[i] ? shape[i] : 1, &most))
			return false;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	*nelem = n;
	*bytes = n * (int64_t)esize;
	return true;
}

/* -------------------------------------------------------- one file's header */

/* A tensor of a file as its header says, before the tiling check. */
struct entry {
	struct st_tensor t;
	uint64_t begin, end;     /* in the data section */
};

static int entry_by_offset(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* The dtype, shape and data_offsets of the header entry v called name. */
static int parse_entry(const char *path, const char *name, json_t *v, struct entry *e,
		       char *err, size_t errlen)
{
	json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *off = json_object_get(v, "data_offsets");
	int64_t bytes;
	size_t i;

	if (!json_is_object(v))
		return msg_fail(err, errlen, -1, "%s: tensor %s: its header entry is not an object",
				path, name);
	if (!json_is_string(dt))
		return msg_fail(err, errlen, -1, "%s: tensor %s: \"dtype\" is missing or not a string",
				path, name);
	for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
		if (!strcmp(json_string_value(dt), dtypes[i].name))
			break;
	if (i == sizeof dtypes / sizeof dtypes[0])
		return msg_fail(err, errlen, -1, "%s: tensor %s: dtype %.32s is not one Stork reads "
				"(F32, BF16, F16)", path, name, json_string_value(dt));
	e->t.dtype = dtypes[i].type;
	if (!json_is_array(shape) || json_array_size(shape) > ST_MAX_DIMS)
		return msg_fail(err, errlen, -1, "%s: tensor %s: \"shape\" is not a list of at most %d "
				"sizes", path, name, ST_MAX_DIMS);
	e->t.ndim = (int)json_array_size(shape);
	for (i = 0; i < json_array_size(shape); i++) {
		json_t *d = json_array_get(shape, i);

		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return msg_fail(err, errlen, -1, "%s: tensor %s: \"shape\" holds something other "
					"than a size >= 0 at index %zu", path, name, i);
		e->t.shape[i] = json_integer_value(d);
	}
	if (!shape_size(e->t.ndim, e->t.shape, dtypes[e->t.dtype].size, &e->t.nelem, &bytes)) {
		char s[256];

		return msg_fail(err, errlen, -1, "%s: tensor %s: shape %s is too large", path, name,
				shape_text(s, sizeof s, e->t.ndim, e->t.shape));
	}
	if (!json_is_array(off) || json_array_size(off) != 2 ||
	    !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)) ||
	    json_integer_value(json_array_get(off, 0)) < 0 ||
	    json_integer_value(json_array_get(off, 1)) < json_integer_value(json_array_get(off, 0)))
		return msg_fail(err, errlen, -1, "%s: tensor %s: \"data_offsets\" is not [BEGIN, END] "
				"with 0 <= BEGIN <= END", path, name);
	e->begin = json_integer_value(json_array_get(off, 0));
	e->end = json_integer_value(json_array_get(off, 1));
	if (e->end - e->begin != (uint64_t)bytes) {
		char s[256];

		return msg_fail(err, errlen, -1, "%s: tensor %s: data_offsets [%llu, %llu] span %llu "
				"bytes, its dtype %s and shape %s make %lld", path, name,
				(unsigned long long)e->begin, (unsigned long long)e->end,
				(unsigned long long)(e->end - e->begin), dtypes[e->t.dtype].name,
				shape_text(s, sizeof s, e->t.ndim, e->t.shape), (long long)bytes);
	}
	return 0;
}

/* The tensors must cover the data section (len bytes) exactly, in some
 * order: no overlap, no hole, nothing after the last. */
static int check_tiling(const char *path, struct entry *e, size_t n, uint64_t len, char *err,
			size_t errlen)
{
	uint64_t at = 0;

	qsort(e, n, sizeof *e, entry_by_offset);
	for (size_t i = 0; i < n; i++) {
		if (e[i].end > len)
			return msg_fail(err, errlen, -1, "%s: tensor %s: data_offsets [%llu, %llu] run "
					"past the end of the data section (%llu bytes): a truncated "
					"file?", path, e[i].t.name, (unsigned long long)e[i].begin,
					(unsigned long long)e[i].end, (unsigned long long)len);
		if (e[i].begin < at)
			return msg_fail(err, errlen, -1, "%s: tensors %s and %s overlap (bytes [%llu, "
					"%llu] and [%llu, %llu] of the data section)", path,
					e[i - 1].t.name, e[i].t.name,
					(unsigned long long)e[i - 1].begin,
					(unsigned long long)e[i - 1].end,
					(unsigned long long)e[i].begin, (unsigned long long)e[i].end);
		if (e[i].begin > at)
			return msg_fail(err, errlen, -1, "%s: bytes [%llu, %llu] of the data section "
					"belong to no tensor (before %s): the format allows no gaps",
					path, (unsigned long long)at, (unsigned long long)e[i].begin,
					e[i].t.name);
		at = e[i].end;
	}
	if (at != len)
		return msg_fail(err, errlen, -1, "%s: the last %llu bytes of the data section belong "
				"to no tensor: the format allows no trailing data", path,
				(unsigned long long)(len - at));
	return 0;
}

/* "__metadata__": an object of strings. */
static int check_metadata(const char *path, json_t *meta, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	if (!json_is_object(meta))
		return msg_fail(err, errlen, -1, "%s: \"__metadata__\" is not an object", path);
	json_object_foreach(meta, key, v)
		if (!json_is_string(v))
			return msg_fail(err, errlen, -1, "%s: \"__metadata__\" key %.64s is not a string",
					path, key);
	return 0;
}

/* The 8-byte length and the header of the open file fd (size bytes), as
 * parsed JSON; the data section's length in *data_len. */
static json_t *read_header(const char *path, int fd, uint64_t size, uint64_t *data_len,
			   char *err, size_t errlen)
{
	unsigned char len8[8];
	uint64_t hlen = 0;
	json_error_t je;
	json_t *h;
	char *text;

	if (size < 8) {
		msg_format(err, errlen, "%s: %llu bytes, too short for a safetensors file (it starts "
			   "with an 8-byte header length)", path, (unsigned long long)size);
		return NULL;
	}
	if (pread_all(fd, len8, 8, 0) != 8) {
		msg_format(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		return NULL;
	}
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | len8[i];
	if (hlen > ST_MAX_HEADER || hlen > size - 8) {
		msg_format(err, errlen, "%s: the header length %llu is %s: not a safetensors file, "
			   "or a truncated one", path, (unsigned long long)hlen,
			   hlen > size - 8 ? "beyond the end of the file" : "above the 100 MB limit");
		return NULL;
	}
	*data_len = size - 8 - hlen;
	if (!(text = malloc(hlen ? hlen : 1))) {
		msg_format(err, errlen, "%s: out of memory for a %llu-byte header", path,
			   (unsigned long long)hlen);
		return NULL;
	}
	errno = 0;
	if (pread_all(fd, text, hlen, 8) != (ssize_t)hlen) {
		msg_format(err, errlen, "%s: cannot read the header: %s", path,
			   errno ? strerror(errno) : "the file shrank");
		free(text);
		return NULL;
	}
	if (!hlen || text[0] != '{') {
		msg_format(err, errlen, "%s: the header does not start with '{': not a safetensors "
			   "file", path);
		free(text);
		return NULL;
	}
	h = json_loadb(text, hlen, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!h)
		msg_format(err, errlen, "%s: header, line %d column %d: %s", path, je.line, je.column,
			   je.text);
	return h;
}

/*
 * The header entries of the open file fd into a fresh array (*n of them);
 * the metadata object, when there is one, in *meta (a new reference).
 */
static struct entry *read_entries(const char *path, int fd, int index, size_t *n, json_t **meta,
				  char *err, size_t errlen)
{
	struct entry *e = NULL;
	uint64_t data_len = 0;
	struct stat st;
	const char *key;
	json_t *h, *v;
	size_t k = 0;

	*n = 0;
	*meta = NULL;
	if (fstat(fd, &st) < 0) {
		msg_format(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		msg_format(err, errlen, "%s: not a regular file", path);
		return NULL;
	}
	if (!(h = read_header(path, fd, st.st_size, &data_len, err, errlen)))
		return NULL;
	if (!json_is_object(h)) {
		msg_format(err, errlen, "%s: the header is not a JSON object", path);
		goto fail;
	}
	if (!(e = calloc(json_object_size(h) + 1, sizeof *e))) {
		msg_format(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	json_object_foreach(h, key, v) {
		long at;

		if (!strcmp(key, "__metadata__")) {
			if (check_metadata(path, v, err, errlen) < 0)
				goto fail;
			*meta = json_incref(v);
			continue;
		}
		if (!printable_name(key, &at)) {
			if (at < 0)
				msg_format(err, errlen, "%s: a tensor has an empty name", path);
			else
				msg_format(err, errlen, "%s: a tensor name holds control character "
					   "0x%02x (byte %ld)", path, (unsigned char)key[at], at);
			goto fail;
		}
		if (parse_entry(path, key, v, &e[k], err, errlen) < 0)
			goto fail;
		if (!(e[k].t.name = strdup(key))) {
			msg_format(err, errlen, "%s: out of memory", path);
			goto fail;
		}
		e[k].t.file = index;
		e[k].t.offset = 8 + (st.st_size - 8 - data_len) + e[k].begin;
		k++;
	}
	if (check_tiling(path, e, k, data_len, err, errlen) < 0)
		goto fail;
	json_decref(h);
	*n = k;
	return e;
fail:
	for (size_t i = 0; e && i < k + 1; i++)
		free((char *)e[i].t.name);
	free(e);
	json_decref(h);
	json_decref(*meta);
	*meta = NULL;
	return NULL;
}

/* --------------------------------------------------------------- the set */

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

/* An empty set called name, with room for nfiles files. */
static struct safetensors *set_new(const char *name, int nfiles)
{
	struct safetensors *st = calloc(1, sizeof *st);

	if (!st)
		return NULL;
	st->files = calloc(nfiles, sizeof *st->files);
	st->name = strdup(name);
	if (!st->files || !st->name) {
		free(st->files);
		free(st->name);
		free(st);
		return NULL;
	}
	return st;
}

/* Open path as file number st->nfiles of the set and add its tensors. */
static int set_add_file(struct safetensors *st, const char *path, char *err, size_t errlen)
{
	struct st_file *f = &st->files[st->nfiles];
	struct st_tensor *grown;
	struct entry *e;
	size_t n;

	f->fd = -1;
	if (!(f->path = strdup(path)))
		return msg_fail(err, errlen, -1, "%s: out of memory", path);
	st->nfiles++;
	if ((f->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return msg_fail(err, errlen, -1, "%s: cannot open: %s", path, strerror(errno));
	if (!(e = read_entries(path, f->fd, st->nfiles - 1, &n, &f->meta, err, errlen)))
		return -1;
	if (!(grown = realloc(st->t, (st->n + n + 1) * sizeof *grown))) {
		for (size_t i = 0; i < n; i++)
			free((char *)e[i].t.name);
		free(e);
		return msg_fail(err, errlen, -1, "%s: out of memory", path);
	}
	st->t = grown;
	for (size_t i = 0; i < n; i++)
		st->t[st->n++] = e[i].t;
	free(e);
	return 0;
}

/* Sort the set by name; a name in two files is refused. */
static int set_finish(struct safetensors *st, char *err, size_t errlen)
{
	qsort(st->t, st->n, sizeof *st->t, by_name);
	for (size_t i = 1; i < st->n; i++)
		if (!strcmp(st->t[i - 1].name, st->t[i].name))
			return msg_fail(err, errlen, -1, "%s: tensor %s is in both %s and %s", st->name,
					st->t[i].name, st->files[st->t[i - 1].file].path,
					st->files[st->t[i].file].path);
	return 0;
}

void st_close(struct safetensors *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++)
		free((char *)st->t[i].name);
	for (int i = 0; i < st->nfiles; i++) {
		if (st->files[i].fd >= 0)
			close(st->files[i].fd);
		free(st->files[i].path);
		json_decref(st->files[i].meta);
	}
	free(st->files);
	free(st->t);
	free(st->name);
	free(st);
}

struct safetensors *st_open(const char *path, char *err, size_t errlen)
{
	struct safetensors *st = set_new(path, 1);

	if (!st) {
		msg_format(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	if (set_add_file(st, path, err, errlen) < 0 || set_finish(st, err, errlen) < 0) {
		st_close(st);
		return NULL;
	}
	return st;
}

/* A shard's name from an index: a plain file name beside the index. */
static bool plain_file_name(const char *s)
{
	long at;

	return printable_name(s, &at) && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* The distinct file names of weight_map, in order of first mention. */
static const char **index_files(const char *index, json_t *map, int *nfiles, char *err,
				size_t errlen)
{
	const char **names = calloc(json_object_size(map) + 1, sizeof *names);
	const char *key;
	json_t *v;
	int n = 0;

	if (!names) {
		msg_format(err, errlen, "%s: out of memory", index);
		return NULL;
	}
	json_object_foreach(map, key, v) {
		const char *f = json_string_value(v);
		long at;
		int i;

		if (!printable_name(key, &at)) {
			msg_format(err, errlen, "%s: a weight_map name is empty or holds a control "
				   "character", index);
			free(names);
			return NULL;
		}
		if (!f || !plain_file_name(f)) {
			msg_format(err, errlen, "%s: weight_map entry %.200s: %s", index, key,
				   f ? "not a plain file name beside the index" : "not a string");
			free(names);
			return NULL;
		}
		for (i = 0; i < n && strcmp(names[i], f); i++)
			;
		if (i == n)
			names[n++] = f;
	}
	*nfiles = n;
	return names;
}

/* Every weight_map entry names the file that holds it. */
static int check_weight_map(const struct safetensors *st, json_t *map, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach(map, key, v) {
		const struct st_tensor *t = st_find(st, key);
		const char *f = json_string_value(v), *holder;

		if (!t)
			return msg_fail(err, errlen, -1, "%s: weight_map says tensor %.200s is in %s, "
					"which does not hold it", st->name, key, f);
		holder = st->files[t->file].path;
		if (strcmp(strrchr(holder, '/') ? strrchr(holder, '/') + 1 : holder, f))
			return msg_fail(err, errlen, -1, "%s: weight_map says tensor %s is in %s, but "
					"%s holds it", st->name, key, f, holder);
	}
	return 0;
}

struct safetensors *st_open_index(const char *index_path, char *err, size_t errlen)
{
	json_t *idx = sj_load_file_strict(index_path, INDEX_MAX, err, errlen), *map;
	struct safetensors *st = NULL;
	const char **files = NULL;
	char *dir = NULL, *slash;
	int nfiles = 0;

	if (!idx)
		return NULL;
	map = json_object_get(idx, "weight_map");
	if (!json_is_object(map) || !json_object_size(map)) {
		msg_format(err, errlen, "%s: no \"weight_map\" object naming the tensors' files",
			   index_path);
		goto fail;
	}
	if (!(files = index_files(index_path, map, &nfiles, err, errlen)))
		goto fail;
	if (!(dir = strdup(index_path)) || !(st = set_new(index_path, nfiles))) {
		msg_format(err, errlen, "%s: out of memory", index_path);
		goto fail;
	}
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = '\0';
	for (int i = 0; i < nfiles; i++) {
		char path[4096];

		if (snprintf(path, sizeof path, "%s%s", slash ? dir : "", files[i]) >=
		    (int)sizeof path) {
			msg_format(err, errlen, "%s: the path of %s is too long", index_path, files[i]);
			goto fail;
		}
		if (set_add_file(st, path, err, errlen) < 0)
			goto fail;
	}
	if (set_finish(st, err, errlen) < 0 || check_weight_map(st, map, err, errlen) < 0)
		goto fail;
	free(files);
	free(dir);
	json_decref(idx);
	return st;
fail:
	st_close(st);
	free(files);
	free(dir);
	json_decref(idx);
	return NULL;
}

struct safetensors *st_open_dir(const char *dir, char *err, size_t errlen)
{
	char path[4096];

	if (path_join(path, sizeof path, dir, INDEX_NAME) < 0) {
		msg_format(err, errlen, "%s: path too long", dir);
		return NULL;
	}
	if (access(path, F_OK) == 0)
		return st_open_index(path, err, errlen);
	if (path_join(path, sizeof path, dir, SINGLE_NAME) < 0) {
		msg_format(err, errlen, "%s: path too long", dir);
		return NULL;
	}
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		msg_format(err, errlen, "%s: neither %s nor %s: not a Hugging Face model directory "
			   "with safetensors weights", dir, SINGLE_NAME, INDEX_NAME);
		return NULL;
	}
	return st_open(path, err, errlen);
}

/* ---------------------------------------------------------------- lookups */

const char *st_name(const struct safetensors *st)
{
	return st->name;
}

size_t st_count(const struct safetensors *st)
{
	return st->n;
}

const struct st_tensor *st_tensor_at(const struct safetensors *st, size_t i)
{
	return i < st->n ? &st->t[i] : NULL;
}

const struct st_tensor *st_find(const struct safetensors *st, const char *name)
{
	struct st_tensor key = { .name = name };

	return bsearch(&key, st->t, st->n, sizeof *st->t, by_name);
}

const char *st_file_of(const struct safetensors *st, const struct st_tensor *t)
{
	return st->files[t->file].path;
}

const char *st_metadata(const struct safetensors *st, const char *key)
{
	return st->nfiles ? json_string_value(json_object_get(st->files[0].meta, key)) : NULL;
}

const struct st_tensor *st_expect(const struct safetensors *st, const char *name, int ndim,
				  const int64_t *shape, const char *source, char *err,
				  size_t errlen)
{
	const struct st_tensor *t = st_find(st, name);
	char have[256], want[256];

	if (!t) {
		msg_format(err, errlen, "%s: not in %s%s", name, st->nfiles > 1 ? "any file of " : "",
			   st->name);
		return NULL;
	}
	if (t->ndim == ndim && !memcmp(t->shape, shape, ndim * sizeof *shape))
		return t;
	msg_format(err, errlen, "%s in %s is %s, %s says %s", name, st_file_of(st, t),
		   shape_text(have, sizeof have, t->ndim, t->shape), source,
		   shape_text(want, sizeof want, ndim, shape));
	return NULL;
}

/* ------------------------------------------------------------------ reads */

/* count elements of t starting at file offset off, converted into out. */
static int read_convert(const struct safetensors *st, const struct st_tensor *t, uint64_t off,
			size_t count, float *out, char *err, size_t errlen)
{
	size_t esize = dtypes[t->dtype].size, bytes = count * esize;
	unsigned char *raw = (unsigned char *)out + (4 - esize) * count;
	ssize_t got;

	errno = 0;
	got = pread_all(st->files[t->file].fd, raw, bytes, (off_t)off);
	if (got != (ssize_t)bytes)
		return msg_fail(err, errlen, -1, "%s: tensor %s: cannot read %zu bytes at %llu: %s",
				st->files[t->file].path, t->name, bytes, (unsigned long long)off,
				got < 0 ? strerror(errno) : "the file is shorter than when it was opened");
	if (t->dtype == ST_F32)
		return 0;
	for (size_t i = 0; i < count; i++) {
		uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);

		out[i] = t->dtype == ST_BF16 ? st_bf16_to_f32(h) : st_f16_to_f32(h);
	}
	return 0;
}

int st_read_range(const struct safetensors *st, const struct st_tensor *t, int64_t first,
		  int64_t count, float *out, char *err, size_t errlen)
{
	if (first < 0 || count < 0 || first > t->nelem || count > t->nelem - first)
		return msg_fail(err, errlen, -1, "%s: tensor %s: elements [%lld, %lld + %lld) asked "
				"of a tensor of %lld", st_file_of(st, t), t->name, (long long)first,
				(long long)first, (long long)count, (long long)t->nelem);
	return read_convert(st, t, t->offset + (uint64_t)first * dtypes[t->dtype].size, count, out,
			    err, errlen);
}

int st_read(const struct safetensors *st, const struct st_tensor *t, float *out, char *err,
	    size_t errlen)
{
	return st_read_range(st, t, 0, t->nelem, out, err, errlen);
}

/* Elements in one row of the first dimension. */
static int64_t row_size(const struct st_tensor *t)
{
	int64_t n = 1;

	for (int i = 1; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

int st_read_rows(const struct safetensors *st, const struct st_tensor *t, int64_t row0,
		 int64_t nrows, float *out, char *err, size_t errlen)
{
	int64_t rows = t->ndim ? t->shape[0] : 0, width = row_size(t);

	if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0)
		return msg_fail(err, errlen, -1, "%s: tensor %s: rows [%lld, %lld) asked of a tensor "
				"of %lld rows", st_file_of(st, t), t->name, (long long)row0,
				(long long)(row0 + nrows), (long long)rows);
	return st_read_range(st, t, row0 * width, nrows * width, out, err, errlen);
}

int st_read_block(const struct safetensors *st, const struct st_tensor *t, int64_t row0,
		  int64_t nrows, int64_t col0, int64_t ncols, float *out, char *err,
		  size_t errlen)
{
	int64_t rows, cols;
	size_t esize = dtypes[t->dtype].size;

	if (t->ndim != 2)
		return msg_fail(err, errlen, -1, "%s: tensor %s: a block asked of a tensor of %d "
				"dimensions, not 2", st_file_of(st, t), t->name, t->ndim);
	rows = t->shape[0];
	cols = t->shape[1];
	if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0 || col0 < 0 ||
	    ncols < 0 || col0 > cols || ncols > cols - col0)
		return msg_fail(err, errlen, -1, "%s: tensor %s: rows [%lld, %lld) and columns [%lld, "
				"%lld) asked of a [%lld, %lld] tensor", st_file_of(st, t), t->name,
				(long long)row0, (long long)(row0 + nrows), (long long)col0,
				(long long)(col0 + ncols), (long long)rows, (long long)cols);
	if (col0 == 0 && ncols == cols)
		return st_read_range(st, t, row0 * cols, nrows * cols, out, err, errlen);
	for (int64_t r = 0; r < nrows; r++) {
		uint64_t off = t->offset + ((uint64_t)(row0 + r) * cols + col0) * esize;

		if (read_convert(st, t, off, ncols, out + r * ncols, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* ----------------------------------------------------------------- writer */

static int out_by_name(const void *a, const void *b)
{
	return strcmp((*(const struct st_out *const *)a)->name,
		      (*(const struct st_out *const *)b)->name);
}

/* The tensors in name order, checked (names, shapes, data). */
static const struct st_out **sorted_outputs(const char *path, const struct st_out *t, size_t n,
					    char *err, size_t errlen)
{
	const struct st_out **s = calloc(n + 1, sizeof *s);

	if (!s) {
		msg_format(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t nelem, bytes;
		long at;

		s[i] = &t[i];
		if (!t[i].name || !printable_name(t[i].name, &at)) {
			msg_format(err, errlen, "%s: tensor %zu: %s", path, i,
				   t[i].name && at >= 0 ? "its name holds a control character" :
				   "no name");
			goto fail;
		}
		if (!strcmp(t[i].name, "__metadata__")) {
			msg_format(err, errlen, "%s: tensor %zu: __metadata__ is not a tensor name",
				   path, i);
			goto fail;
		}
		if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS ||
		    !shape_size(t[i].ndim, t[i].shape, 4, &nelem, &bytes)) {
			msg_format(err, errlen, "%s: tensor %s: the shape is not a list of at most %d "
				   "sizes >= 0 of fewer than 2^63 bytes", path, t[i].name,
				   ST_MAX_DIMS);
			goto fail;
		}
		if (nelem && !t[i].data) {
			msg_format(err, errlen, "%s: tensor %s: no data", path, t[i].name);
			goto fail;
		}
	}
	qsort(s, n, sizeof *s, out_by_name);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(s[i - 1]->name, s[i]->name)) {
			msg_format(err, errlen, "%s: tensor %s is given twice", path, s[i]->name);
			goto fail;
		}
	return s;
fail:
	free(s);
	return NULL;
}

/* The header (without its length), padded so that the data starts at a
 * multiple of 8: malloc'd, its length in *len. */
static char *make_header(const struct st_out **s, size_t n, enum st_dtype dtype,
			 const char *const *meta, size_t *len)
{
	json_t *h = json_object(), *m = json_object();
	uint64_t at = 0;
	char *text = NULL, *padded = NULL;
	size_t tlen, pad;

	if (!h || !m)
		goto out;
	for (size_t i = 0; meta && meta[i] && meta[i + 1]; i += 2)
		if (json_object_set_new(m, meta[i], json_string(meta[i + 1])) < 0)
			goto out;
	if (!json_object_get(m, "format") && json_object_set_new(m, "format", json_string("pt")) < 0)
		goto out;
	if (json_object_set(h, "__metadata__", m) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *shape = json_array(), *e;
		int64_t nelem = 1;

		for (int d = 0; d < s[i]->ndim; d++) {
			nelem *= s[i]->shape[d];
			json_array_append_new(shape, json_integer(s[i]->shape[d]));
		}
		e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtypes[dtype].name, "shape", shape,
			      "data_offsets", (json_int_t)at,
			      (json_int_t)(at + nelem * dtypes[dtype].size));
		if (!e || json_object_set_new(h, s[i]->name, e) < 0)
			goto out;
		at += nelem * dtypes[dtype].size;
	}
	if (!(text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS)))
		goto out;
	tlen = strlen(text);
	pad = (8 - (8 + tlen) % 8) % 8;
	if (!(padded = malloc(tlen + pad + 1)))
		goto out;
	memcpy(padded, text, tlen);
	memset(padded + tlen, ' ', pad);
	padded[tlen + pad] = '\0';
	*len = tlen + pad;
out:
	free(text);
	json_decref(h);
	json_decref(m);
	return padded;
}

/* The data of one tensor (nelem floats) to fd as dtype. */
static int write_data(int fd, const float *data, int64_t nelem, enum st_dtype dtype)
{
	unsigned char buf[1 << 16];
	const size_t per = sizeof buf / 2;

	if (dtype == ST_F32)
		return nelem ? write_all(fd, data, (size_t)nelem * 4) : 0;
	for (int64_t i = 0; i < nelem; i += per) {
		size_t k = (size_t)(nelem - i) < per ? (size_t)(nelem - i) : per;

		for (size_t j = 0; j < k; j++) {
			uint16_t h = st_f32_to_bf16(data[i + j]);

			buf[2 * j] = (unsigned char)h;
			buf[2 * j + 1] = (unsigned char)(h >> 8);
		}
		if (write_all(fd, buf, 2 * k) < 0)
			return -1;
	}
	return 0;
}

int st_write(const char *path, const struct st_out *t, size_t n, enum st_dtype dtype,
	     const char *const *meta, char *err, size_t errlen)
{
	const struct st_out **s = NULL;
	size_t tlen = strlen(path) + 32, hlen = 0;
	char *tmp = NULL, *header = NULL;
	unsigned char len8[8];
	const char *what = "out of memory";
	int fd = -1, e = ENOMEM, rc = -1;
	bool tmp_exists = false; /* a temporary file of ours is there to remove on failure */

	if (dtype != ST_F32 && dtype != ST_BF16)
		return msg_fail(err, errlen, -1, "%s: Stork writes F32 or BF16, not %s", path,
				dtypes[dtype].name);
	if (!(s = sorted_outputs(path, t, n, err, errlen)))
		return -1;
	if (!(tmp = malloc(tlen)))
		goto fail;
	if (!(header = make_header(s, n, dtype, meta, &hlen))) {
		rc = msg_fail(err, errlen, -1, "%s: cannot make the header: out of memory, or a name "
			      "or metadata that is not UTF-8", path);
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hlen >> 8 * i);
	what = "cannot create a temporary file beside it";
	if ((fd = atomic_tmp_open(path, tmp, tlen, 0666)) < 0)
		goto fail_errno;
	tmp_exists = true;
	what = "cannot write";
	if (write_all(fd, len8, 8) < 0 || write_all(fd, header, hlen) < 0)
		goto fail_errno;
	for (size_t i = 0; i < n; i++) {
		int64_t nelem = 1;

		for (int d = 0; d < s[i]->ndim; d++)
			nelem *= s[i]->shape[d];
		if (write_data(fd, s[i]->data, nelem, dtype) < 0)
			goto fail_errno;
	}
	what = "cannot flush to disk (fsync)";
	if (fsync(fd) < 0)
		goto fail_errno;
	what = "cannot close";
	rc = close(fd);
	fd = -1;
	if (rc < 0)
		goto fail_errno;
	what = "cannot rename the temporary file over it";
	if (rename(tmp, path) < 0)
		goto fail_errno;
	tmp_exists = false;
	what = "cannot flush its directory (fsync)";
	if (fsync_parent(path) < 0)
		goto fail_errno;
	rc = 0;
	goto out;
fail_errno:
	e = errno;
fail:
	rc = msg_fail(err, errlen, -1, "%s: %s: %s", path, what, strerror(e));
out:
	if (fd >= 0)
		close(fd);
	if (tmp_exists)
		unlink(tmp);
	free(s);
	free(header);
	free(tmp);
	return rc;
}
