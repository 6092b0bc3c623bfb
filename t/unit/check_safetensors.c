/*
 * t/unit/check_safetensors.c - the promises of lib/safetensors (issue 25):
 * what is written reads back (F32 bit for bit, BF16 rounded to nearest
 * even), a rank reads rows or a block of a tensor and nothing else, a
 * sharded set opens as one through its index, and every way a file can be
 * broken or hostile is refused with a message naming the file, the tensor
 * and what is wrong.
 *
 * Independent references: the conversions are checked against arithmetic
 * written here (and against the compiler's _Float16 where it has one);
 * t/tools/safetensors_ref.py, a stdlib-only Python implementation of the
 * format, writes files this reader must read value for value and checks
 * the files this writer writes.
 *
 * Broken files are made byte by byte by raw_file(); each test works in a
 * fresh directory under /tmp.
 */
#include "config.h"
#include "lib/io/atomic_file.h"
#include "lib/io/io.h"
#include "lib/formats/safetensors.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define REF_PY STORK_TEST_TOOLS "/safetensors_ref.py"

static char dir[PATH_MAX];
static char err[2048];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_safetensors.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	remove_tree(dir);
}

static const char *in_dir(const char *name)
{
	static char path[4][PATH_MAX + 64];
	static int k;

	k = (k + 1) % 4;
	snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
	return path[k];
}

static uint32_t bits_of(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof b);
	return b;
}

static float float_of(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof f);
	return f;
}

/* A file of the 8-byte length of header, header, then len bytes of data. */
static const char *raw_file(const char *name, const char *header, const void *data, size_t len)
{
	const char *path = in_dir(name);
	uint64_t n = strlen(header);
	unsigned char len8[8];
	FILE *f = fopen(path, "wb");

	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)(n >> 8 * i);
	ck_assert_ptr_nonnull(f);
	fwrite(len8, 1, 8, f);
	fwrite(header, 1, n, f);
	if (len)
		fwrite(data, 1, len, f);
	fclose(f);
	return path;
}

/* st_open(path) must fail with a message holding each of the NULL-ended
 * fragments. */
static void assert_refused(const char *path, ...)
{
	struct safetensors *st = st_open(path, err, sizeof err);
	va_list ap;

	ck_assert_msg(!st, "%s was accepted", path);
	va_start(ap, path);
	for (const char *s; (s = va_arg(ap, const char *));)
		ck_assert_msg(strstr(err, s), "\"%s\" not in: %s", s, err);
	va_end(ap);
}

static int run_ref(const char *cmd, const char *a, const char *b)
{
	char *argv[] = { "/usr/bin/python3", REF_PY, (char *)cmd, (char *)a, (char *)b, NULL };

	return spawn_wait(argv, NULL);
}

/* --------------------------------------------------------------- conversions */

/* binary16 by its definition: (-1)^s 2^(e-15) (1 + m/1024), or 2^-14 m/1024. */
static double f16_reference(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0x1f)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m / 1024.0, -14);
	else
		v = ldexp(1 + m / 1024.0, e - 15);
	return s ? -v : v;
}

START_TEST(f16_converts_every_value_exactly)
{
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float got = st_f16_to_f32((uint16_t)h);
		double want = f16_reference((uint16_t)h);

		if (isnan(want)) {
			ck_assert_msg(isnan(got), "%04x", h);
			/* sign and payload kept */
			ck_assert_uint_eq(bits_of(got) >> 31, h >> 15);
			ck_assert_uint_eq((bits_of(got) >> 13) & 0x3ff, h & 0x3ff);
		} else {
			ck_assert_msg((double)got == want && !signbit(got) == !signbit(want),
				      "%04x: %a, not %a", h, got, want);
		}
#ifdef __FLT16_MAX__
		{
			_Float16 x;
			uint16_t hh = (uint16_t)h;

			memcpy(&x, &hh, sizeof x);
			if (!isnan(want))
				ck_assert_msg(bits_of((float)x) == bits_of(got), "%04x", h);
		}
#endif
	}
	/* the ones the issue names */
	ck_assert(st_f16_to_f32(0x0001) == 0x1p-24f);
	ck_assert(st_f16_to_f32(0x03ff) == 0x3ffp-24f);
	ck_assert(st_f16_to_f32(0x7c00) == INFINITY);
	ck_assert(st_f16_to_f32(0xfc00) == -INFINITY);
	ck_assert(isnan(st_f16_to_f32(0x7e00)));
	ck_assert(st_f16_to_f32(0x7bff) == 65504.0f);
}
END_TEST

START_TEST(bf16_widens_by_appending_zero_bits)
{
	for (uint32_t h = 0; h <= 0xffff; h++)
		ck_assert_uint_eq(bits_of(st_bf16_to_f32((uint16_t)h)), h << 16);
}
END_TEST

/* Round to nearest, ties to even, by comparing distances: the two
 * neighbours in bfloat16 of f, the upper one taken as 2^128 when it is
 * infinity (IEEE rounds as if the exponent went on). */
static uint16_t bf16_reference(uint32_t bits)
{
	uint16_t lo = (uint16_t)(bits >> 16), hi = lo + 1;
	double f = float_of(bits), vlo = float_of((uint32_t)lo << 16), vhi, dlo, dhi;

	if ((bits & 0xffff) == 0)
		return lo;
	vhi = (hi & 0x7fff) == 0x7f80 ? copysign(0x1p128, f) : float_of((uint32_t)hi << 16);
	dlo = fabs(f - vlo);
	dhi = fabs(vhi - f);
	if (dlo != dhi)
		return dlo < dhi ? lo : hi;
	return (lo & 1) ? hi : lo;
}

START_TEST(bf16_rounds_to_nearest_even)
{
	static const uint16_t lows[] = { 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0xc000 };

	for (uint32_t hi = 0; hi <= 0xffff; hi++) {
		if ((hi & 0x7f80) == 0x7f80) /* infinities and NaN below */
			continue;
		for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
			uint32_t b = hi << 16 | lows[k];

			ck_assert_msg(st_f32_to_bf16(float_of(b)) == bf16_reference(b),
				      "%08x: %04x, not %04x", b, st_f32_to_bf16(float_of(b)),
				      bf16_reference(b));
		}
	}
	ck_assert_uint_eq(st_f32_to_bf16(1.0f), 0x3f80);
	ck_assert_uint_eq(st_f32_to_bf16(float_of(0x3f808000)), 0x3f80); /* tie, even below */
	ck_assert_uint_eq(st_f32_to_bf16(float_of(0x3f818000)), 0x3f82); /* tie, even above */
	ck_assert_uint_eq(st_f32_to_bf16(FLT_MAX), 0x7f80);               /* overflows */
	ck_assert_uint_eq(st_f32_to_bf16(INFINITY), 0x7f80);
	ck_assert_uint_eq(st_f32_to_bf16(-INFINITY), 0xff80);
	ck_assert_uint_eq(st_f32_to_bf16(-0.0f), 0x8000);
	/* NaN stays NaN, even one whose payload is in the dropped bits only */
	ck_assert(isnan(st_bf16_to_f32(st_f32_to_bf16(float_of(0x7f800001)))));
	ck_assert(isnan(st_bf16_to_f32(st_f32_to_bf16(float_of(0xffc00000)))));
	ck_assert(signbit(st_bf16_to_f32(st_f32_to_bf16(float_of(0xffc00000)))));
}
END_TEST

/* --------------------------------------------------------------- round trips */

/* Fifteen fp32 values: ties, near-ties, overflow, subnormals, NaN (the
 * list safetensors_ref.py's C_BITS holds). */
static const uint32_t values_bits[] = {
	0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF,
	0xBF817FFF, 0x7F7FFFFF, 0x7F7F7FFF, 0x00008000, 0x00018000,
	0x80000000, 0xFF800000, 0x7FC00001, 0x00000001, 0x0000C000,
};
#define NVALUES (sizeof values_bits / sizeof values_bits[0])

/* The tensors safetensors_ref.py check-st expects: values, matrix, scalar, empty. */
static void write_four(const char *path, enum st_dtype dtype)
{
	static float values[NVALUES], matrix[12], scalar = 42.5f;
	struct st_out t[] = {
		{ "values", 1, { NVALUES }, values },
		{ "matrix", 2, { 3, 4 }, matrix },
		{ "scalar", 0, { 0 }, &scalar },
		{ "empty", 2, { 0, 3 }, NULL },
	};

	for (size_t i = 0; i < NVALUES; i++)
		values[i] = float_of(values_bits[i]);
	for (int i = 0; i < 12; i++)
		matrix[i] = i / 4.0f - 1;
	ck_assert_msg(st_write(path, t, 4, dtype, NULL, err, sizeof err) == 0, "%s", err);
}

START_TEST(f32_round_trips_bit_for_bit)
{
	const char *path = in_dir("f32.safetensors");
	const struct st_tensor *t;
	struct safetensors *st;
	float got[NVALUES];

	write_four(path, ST_F32);
	st = st_open(path, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_uint_eq(st_count(st), 4);
	ck_assert_str_eq(st_tensor_at(st, 0)->name, "empty"); /* by name */
	ck_assert_str_eq(st_tensor_at(st, 3)->name, "values");
	ck_assert_str_eq(st_metadata(st, "format"), "pt");
	t = st_find(st, "values");
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->dtype, ST_F32);
	ck_assert_int_eq(t->ndim, 1);
	ck_assert_int_eq(t->shape[0], NVALUES);
	ck_assert_int_eq(st_read(st, t, got, err, sizeof err), 0);
	for (size_t i = 0; i < NVALUES; i++)
		ck_assert_uint_eq(bits_of(got[i]), values_bits[i]);
	t = st_find(st, "scalar");
	ck_assert_int_eq(t->ndim, 0);
	ck_assert_int_eq(t->nelem, 1);
	ck_assert_int_eq(st_read(st, t, got, err, sizeof err), 0);
	ck_assert(got[0] == 42.5f);
	t = st_find(st, "empty");
	ck_assert_int_eq(t->nelem, 0);
	ck_assert_int_eq(st_read(st, t, got, err, sizeof err), 0);
	ck_assert_ptr_null(st_find(st, "nothing"));
	st_close(st);
}
END_TEST

START_TEST(bf16_round_trips_rounded_to_nearest_even)
{
	const char *path = in_dir("bf16.safetensors");
	const struct st_tensor *t;
	struct safetensors *st;
	float got[NVALUES];

	write_four(path, ST_BF16);
	st = st_open(path, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	t = st_find(st, "values");
	ck_assert_int_eq(t->dtype, ST_BF16);
	ck_assert_int_eq(st_read(st, t, got, err, sizeof err), 0);
	for (size_t i = 0; i < NVALUES; i++) {
		if ((values_bits[i] & 0x7fffffff) > 0x7f800000)
			ck_assert(isnan(got[i]));
		else
			ck_assert_msg(bits_of(got[i]) == (uint32_t)bf16_reference(values_bits[i]) << 16,
				      "%08x read back as %08x", values_bits[i], bits_of(got[i]));
	}
	st_close(st);
}
END_TEST

/* The header as written: length, sorted keys, spaces to a multiple of 8,
 * tensors back to back in name order. */
START_TEST(written_header_is_sorted_and_data_aligned)
{
	const char *path = in_dir("layout.safetensors");
	float a[3] = { 1, 2, 3 }, b[1] = { 4 };
	struct st_out t[] = { { "zeta", 1, { 3 }, a }, { "alpha", 1, { 1 }, b } };
	const char *meta[] = { "stork_step", "1200", NULL };
	char buf[4096];
	uint64_t n = 0;
	int fd;
	ssize_t len;

	ck_assert_int_eq(st_write(path, t, 2, ST_BF16, meta, err, sizeof err), 0);
	fd = open(path, O_RDONLY);
	len = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[len] = '\0';
	for (int i = 7; i >= 0; i--)
		n = n << 8 | (unsigned char)buf[i];
	ck_assert_int_eq((8 + n) % 8, 0);
	ck_assert_int_eq(len, 8 + n + 2 * 4);
	buf[8 + n] = '\0';
	ck_assert_str_eq(buf + 8, "{\"__metadata__\":{\"format\":\"pt\",\"stork_step\":\"1200\"},"
			 "\"alpha\":{\"data_offsets\":[0,2],\"dtype\":\"BF16\",\"shape\":[1]},"
			 "\"zeta\":{\"data_offsets\":[2,8],\"dtype\":\"BF16\",\"shape\":[3]}} ");
}
END_TEST

/* A 5 x 7 tensor of value 16 r + c (exact in BF16), in each dtype (F16 by hand). */
static struct safetensors *grid_file(enum st_dtype dtype)
{
	float v[35];
	const struct st_out t = { "grid", 2, { 5, 7 }, v };
	const char *path = in_dir(st_dtype_name(dtype));
	struct safetensors *st;

	for (int i = 0; i < 35; i++)
		v[i] = (float)(16 * (i / 7) + i % 7);
	if (dtype != ST_F16) {
		ck_assert_int_eq(st_write(path, &t, 1, dtype, NULL, err, sizeof err), 0);
	} else {
		unsigned char raw[70];

		for (int i = 0; i < 35; i++) {
			/* 16 r + c < 2048: exact in binary16; encode by hand */
			int x = (int)v[i], e = 0;
			uint16_t h;

			if (x == 0) {
				h = 0;
			} else {
				while ((x >> e) > 1)
					e++;
				h = (uint16_t)((e + 15) << 10 | ((x << (10 - e)) & 0x3ff));
			}
			raw[2 * i] = h & 0xff;
			raw[2 * i + 1] = h >> 8;
		}
		raw_file("F16", "{\"grid\":{\"dtype\":\"F16\",\"shape\":[5,7],\"data_offsets\":[0,70]}}",
			 raw, sizeof raw);
	}
	st = st_open(path, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	return st;
}

START_TEST(a_rank_reads_its_rows_and_its_block)
{
	for (enum st_dtype dtype = ST_F32; dtype <= ST_F16; dtype++) {
		struct safetensors *st = grid_file(dtype);
		const struct st_tensor *t = st_find(st, "grid");
		float out[35];

		/* rows 1..3 */
		memset(out, 0xff, sizeof out);
		ck_assert_msg(st_read_rows(st, t, 1, 3, out, err, sizeof err) == 0, "%s", err);
		for (int i = 0; i < 21; i++)
			ck_assert_msg(out[i] == 16 * (1 + i / 7) + i % 7, "%s [%d] = %g",
				      st_dtype_name(dtype), i, out[i]);
		ck_assert_uint_eq(bits_of(out[21]), 0xffffffff); /* nothing written past */
		/* columns 2..4 of rows 3..4 */
		memset(out, 0xff, sizeof out);
		ck_assert_int_eq(st_read_block(st, t, 3, 2, 2, 3, out, err, sizeof err), 0);
		for (int i = 0; i < 6; i++)
			ck_assert_msg(out[i] == 16 * (3 + i / 3) + 2 + i % 3, "%s [%d] = %g",
				      st_dtype_name(dtype), i, out[i]);
		ck_assert_uint_eq(bits_of(out[6]), 0xffffffff);
		/* whole rows as a block; elements 9..12 as a range */
		ck_assert_int_eq(st_read_block(st, t, 4, 1, 0, 7, out, err, sizeof err), 0);
		ck_assert(out[0] == 64 && out[6] == 70);
		ck_assert_int_eq(st_read_range(st, t, 9, 4, out, err, sizeof err), 0);
		ck_assert(out[0] == 18 && out[3] == 21);
		/* out of bounds, named */
		ck_assert_int_eq(st_read_rows(st, t, 4, 2, out, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "grid: rows [4, 6) asked of a tensor of 5 rows"), "%s", err);
		ck_assert_int_eq(st_read_block(st, t, 0, 1, 5, 3, out, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "columns [5, 8) asked of a [5, 7] tensor"), "%s", err);
		ck_assert_int_eq(st_read_range(st, t, -1, 2, out, err, sizeof err), -1);
		ck_assert_int_eq(st_read_range(st, t, 30, 6, out, err, sizeof err), -1);
		ck_assert_msg(strstr(err, st_file_of(st, t)), "%s", err);
		st_close(st);
	}
}
END_TEST

/* The bytes a partial read asks for, and no more: the file is cut right
 * after the rows a rank reads, which still read. */
START_TEST(partial_reads_touch_only_their_bytes)
{
	struct safetensors *st = grid_file(ST_F32);
	const struct st_tensor *t = st_find(st, "grid");
	float out[35];

	ck_assert_int_eq(truncate(st_file_of(st, t), t->offset + 2 * 7 * 4), 0);
	ck_assert_msg(st_read_rows(st, t, 0, 2, out, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(st_read_block(st, t, 0, 2, 3, 4, out, err, sizeof err), 0);
	ck_assert_int_eq(st_read_rows(st, t, 1, 2, out, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "grid: cannot read 56 bytes") &&
		      strstr(err, "shorter than when it was opened"), "%s", err);
	st_close(st);
}
END_TEST

/* ---------------------------------------------------------------- shards */

static void write_index(const char *text)
{
	FILE *f = fopen(in_dir("model.safetensors.index.json"), "w");

	fputs(text, f);
	fclose(f);
}

static void write_two_shards(void)
{
	float a[4] = { 1, 2, 3, 4 }, b[2] = { 5, 6 }, c[3] = { 7, 8, 9 };
	struct st_out one[] = { { "model.a", 2, { 2, 2 }, a }, { "model.b", 1, { 2 }, b } };
	struct st_out two[] = { { "model.c", 1, { 3 }, c } };

	ck_assert_int_eq(st_write(in_dir("model-00001-of-00002.safetensors"), one, 2, ST_F32, NULL,
				  err, sizeof err), 0);
	ck_assert_int_eq(st_write(in_dir("model-00002-of-00002.safetensors"), two, 1, ST_BF16,
				  NULL, err, sizeof err), 0);
}

START_TEST(a_sharded_set_opens_as_one)
{
	struct safetensors *st;
	const struct st_tensor *t;
	float out[4];

	write_two_shards();
	write_index("{\"metadata\": {\"total_size\": 30}, \"weight_map\": {"
		    "\"model.a\": \"model-00001-of-00002.safetensors\","
		    "\"model.c\": \"model-00002-of-00002.safetensors\","
		    "\"model.b\": \"model-00001-of-00002.safetensors\"}}");
	st = st_open_dir(dir, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_str_eq(st_name(st), in_dir("model.safetensors.index.json"));
	ck_assert_uint_eq(st_count(st), 3);
	t = st_find(st, "model.c");
	ck_assert_str_eq(st_file_of(st, t), in_dir("model-00002-of-00002.safetensors"));
	ck_assert_int_eq(st_read(st, t, out, err, sizeof err), 0);
	ck_assert(out[0] == 7 && out[1] == 8 && out[2] == 9);
	t = st_find(st, "model.a");
	ck_assert_int_eq(st_read_rows(st, t, 1, 1, out, err, sizeof err), 0);
	ck_assert(out[0] == 3 && out[1] == 4);
	/* a missing tensor names the set */
	ck_assert_ptr_null(st_expect(st, "model.d", 1, (int64_t[]){ 3 }, "config.json", err,
				     sizeof err));
	ck_assert_msg(strstr(err, "model.d: not in any file of ") &&
		      strstr(err, "model.safetensors.index.json"), "%s", err);
	st_close(st);
}
END_TEST

START_TEST(a_broken_index_is_refused_by_name)
{
	static const struct {
		const char *index, *want;
	} cases[] = {
		{ "{\"weight_map\": {\"model.a\": \"model-00003-of-00002.safetensors\"}}",
		  "model-00003-of-00002.safetensors: cannot open: No such file" },
		{ "{\"weight_map\": {\"model.a\": \"model-00002-of-00002.safetensors\"}}",
		  "weight_map says tensor model.a is in model-00002-of-00002.safetensors, which does "
		  "not hold it" },
		{ "{\"weight_map\": {\"model.a\": \"model-00001-of-00002.safetensors\", "
		  "\"model.c\": \"model-00001-of-00002.safetensors\", "
		  "\"model.x\": \"model-00002-of-00002.safetensors\"}}",
		  "weight_map says tensor model.c is in model-00001-of-00002.safetensors, but " },
		{ "{\"weight_map\": {\"model.a\": \"../model-00001-of-00002.safetensors\"}}",
		  "weight_map entry model.a: not a plain file name beside the index" },
		{ "{\"weight_map\": {\"model.a\": 1}}", "weight_map entry model.a: not a string" },
		{ "{\"weights\": {}}", "no \"weight_map\" object" },
		{ "{\"weight_map\": {\"model.a\": \"x\", \"model.a\": \"y\"}}", "duplicate" },
	};

	write_two_shards();
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		write_index(cases[i].index);
		ck_assert_ptr_null(st_open_dir(dir, err, sizeof err));
		ck_assert_msg(strstr(err, cases[i].want), "case %zu: %s", i, err);
	}
}
END_TEST

START_TEST(a_tensor_in_two_shards_is_refused)
{
	float a[1] = { 1 };
	struct st_out t[] = { { "model.b", 1, { 1 }, a } };

	write_two_shards();
	ck_assert_int_eq(st_write(in_dir("model-00002-of-00002.safetensors"), t, 1, ST_F32, NULL,
				  err, sizeof err), 0);
	write_index("{\"weight_map\": {\"model.a\": \"model-00001-of-00002.safetensors\", "
		    "\"model.b\": \"model-00002-of-00002.safetensors\"}}");
	ck_assert_ptr_null(st_open_dir(dir, err, sizeof err));
	ck_assert_msg(strstr(err, "tensor model.b is in both ") &&
		      strstr(err, "model-00001-of-00002.safetensors and ") &&
		      strstr(err, "model-00002-of-00002.safetensors"), "%s", err);
}
END_TEST

START_TEST(a_directory_without_weights_says_what_it_looked_for)
{
	ck_assert_ptr_null(st_open_dir(dir, err, sizeof err));
	ck_assert_msg(strstr(err, dir) && strstr(err, "neither model.safetensors nor "
						 "model.safetensors.index.json"), "%s", err);
}
END_TEST

/* ------------------------------------------------------------- st_expect */

START_TEST(expect_names_the_tensor_the_file_and_both_shapes)
{
	float v[32] = { 0 };
	struct st_out t = { "model.layers.3.mlp.up_proj.weight", 2, { 8, 4 }, v };
	const char *path = in_dir("model.safetensors");
	struct safetensors *st;
	char want[PATH_MAX + 256];

	ck_assert_int_eq(st_write(path, &t, 1, ST_BF16, NULL, err, sizeof err), 0);
	st = st_open_dir(dir, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_ptr_nonnull(st_expect(st, t.name, 2, (int64_t[]){ 8, 4 }, "DIR/config.json", err,
					sizeof err));
	ck_assert_ptr_null(st_expect(st, t.name, 2, (int64_t[]){ 4, 8 }, "DIR/config.json", err,
				     sizeof err));
	snprintf(want, sizeof want, "model.layers.3.mlp.up_proj.weight in %s is [8, 4], "
		 "DIR/config.json says [4, 8]", path);
	ck_assert_str_eq(err, want);
	ck_assert_ptr_null(st_expect(st, t.name, 1, (int64_t[]){ 32 }, "DIR/config.json", err,
				     sizeof err));
	ck_assert_msg(strstr(err, "is [8, 4], DIR/config.json says [32]"), "%s", err);
	ck_assert_ptr_null(st_expect(st, "lm_head.weight", 2, (int64_t[]){ 8, 4 }, "c", err,
				     sizeof err));
	snprintf(want, sizeof want, "lm_head.weight: not in %s", path);
	ck_assert_str_eq(err, want);
	st_close(st);
}
END_TEST

/* ------------------------------------------------------------- refusals */

#define T(body) "{\"w\":" body "}"
#define OK_ENTRY "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

START_TEST(broken_headers_are_refused_with_what_is_wrong)
{
	static const unsigned char eight[8];
	static const struct {
		const char *header;
		size_t data;
		const char *want;
	} cases[] = {
		{ "[1, 2]", 0, "the header does not start with '{'" },
		{ "{\"w\": {\"dtype\": \"F32\"", 0, "header, line 1 column" },
		{ "{\"w\":" OK_ENTRY ",\"w\":" OK_ENTRY "}", 8, "duplicate" },
		{ T("{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}"), 8,
		  "tensor w: dtype I64 is not one Stork reads (F32, BF16, F16)" },
		{ T("{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]}"), 8,
		  "dtype F8_E4M3 is not one" },
		{ T("{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}"), 8,
		  "tensor w: \"dtype\" is missing or not a string" },
		{ T("{\"shape\":[2],\"data_offsets\":[0,8]}"), 8, "\"dtype\" is missing" },
		{ T("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), 8,
		  "tensor w: \"shape\" holds something other than a size >= 0 at index 0" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}"), 8,
		  "\"shape\" holds something other" },
		{ T("{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}"), 8,
		  "\"shape\" is not a list of at most 8 sizes" },
		{ T("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}"), 8,
		  "\"shape\" is not a list of at most 8 sizes" },
		{ T("{\"dtype\":\"F32\",\"shape\":[4611686018427387904,2],\"data_offsets\":[0,8]}"), 8,
		  "tensor w: shape [4611686018427387904, 2] is too large" },
		{ T("{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[0,0]}"), 0,
		  "is too large" },
		{ T("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"), 8,
		  "tensor w: data_offsets [0, 8] span 8 bytes, its dtype F32 and shape [3] make 12" },
		{ T("{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8,
		  "span 8 bytes, its dtype BF16 and shape [2] make 4" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}"), 8,
		  "\"data_offsets\" is not [BEGIN, END] with 0 <= BEGIN <= END" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}"), 8,
		  "\"data_offsets\" is not [BEGIN, END]" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}"), 8,
		  "\"data_offsets\" is not [BEGIN, END]" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"), 8,
		  "tensor w: data_offsets [4, 12] run past the end of the data section (8 bytes)" },
		{ T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 6,
		  "run past the end of the data section (6 bytes)" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
		  "tensors a and b overlap (bytes [0, 8] and [4, 8] of the data section)" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
		  "bytes [0, 4] of the data section belong to no tensor (before a)" },
		{ T("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), 8,
		  "the last 4 bytes of the data section belong to no tensor" },
		{ T("[1]"), 8, "tensor w: its header entry is not an object" },
		{ "{\"__metadata__\":{\"format\":1},\"w\":" OK_ENTRY "}", 8,
		  "\"__metadata__\" key format is not a string" },
		{ "{\"__metadata__\":[],\"w\":" OK_ENTRY "}", 8, "\"__metadata__\" is not an object" },
		{ "{\"\":" OK_ENTRY "}", 8, "a tensor has an empty name" },
		{ "{\"w\\u001b[31m\":" OK_ENTRY "}", 8, "a tensor name holds control character 0x1b (byte 1)" },
		{ "{\"w\":" OK_ENTRY "}x", 8, "header, line 1 column" },
	};
	char name[32];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *path;

		snprintf(name, sizeof name, "case%zu.safetensors", i);
		path = raw_file(name, cases[i].header, eight, cases[i].data);
		ck_assert_msg(!st_open(path, err, sizeof err), "case %zu accepted", i);
		ck_assert_msg(strstr(err, cases[i].want) && !strncmp(err, path, strlen(path)),
			      "case %zu: \"%s\" not in: %s", i, cases[i].want, err);
	}
}
END_TEST

START_TEST(a_header_of_spaces_after_the_object_is_fine)
{
	static const float two[2] = { 1.5f, -2 };
	struct safetensors *st;
	float out[2];

	st = st_open(raw_file("padded", "{\"w\":" OK_ENTRY "}       ", two, 8), err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_int_eq(st_read(st, st_find(st, "w"), out, err, sizeof err), 0);
	ck_assert(out[0] == 1.5f && out[1] == -2);
	st_close(st);
	/* no tensors at all: an empty set */
	st = st_open(raw_file("none", "{}", NULL, 0), err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_uint_eq(st_count(st), 0);
	st_close(st);
}
END_TEST

START_TEST(a_file_that_is_not_safetensors_is_refused_before_any_allocation)
{
	const char *path = in_dir("short");
	char big[16];
	FILE *f = fopen(path, "wb");

	fwrite("\x10\0\0", 1, 3, f);
	fclose(f);
	assert_refused(path, path, "3 bytes, too short for a safetensors file", NULL);
	/* a length beyond the file */
	memcpy(big, "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
	f = fopen(path, "wb");
	fwrite(big, 1, 10, f);
	fclose(f);
	assert_refused(path, "the header length 9223372036854775807 is beyond the end of the file",
		       NULL);
	/* a length within a (sparse) file but above 100 MB */
	f = fopen(path, "wb");
	fwrite("\x01\xe1\xf5\x05\0\0\0\0{", 1, 9, f); /* 100000001 */
	fclose(f);
	ck_assert_int_eq(truncate(path, 200000000), 0);
	assert_refused(path, "the header length 100000001 is above the 100 MB limit", NULL);
	/* a directory, a missing file */
	assert_refused(dir, dir, "not a regular file", NULL);
	assert_refused(in_dir("nowhere"), "nowhere: cannot open: No such file", NULL);
}
END_TEST

/* ---------------------------------------------------------------- writer */

START_TEST(the_writer_refuses_what_it_cannot_write)
{
	float v[2] = { 1, 2 };
	struct st_out dup[] = { { "a", 1, { 2 }, v }, { "a", 1, { 2 }, v } };
	struct st_out nodata[] = { { "a", 1, { 2 }, NULL } };
	struct st_out neg[] = { { "a", 2, { 2, -1 }, v } };
	struct st_out meta[] = { { "__metadata__", 1, { 2 }, v } };
	struct st_out noname[] = { { "", 1, { 2 }, v } };
	struct st_out latin1[] = { { "caf\xe9", 1, { 2 }, v } };
	const char *path = in_dir("w.safetensors");

	ck_assert_int_eq(st_write(path, dup, 2, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "tensor a is given twice"), "%s", err);
	ck_assert_int_eq(st_write(path, nodata, 1, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "tensor a: no data"), "%s", err);
	ck_assert_int_eq(st_write(path, neg, 1, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "tensor a: the shape is not a list"), "%s", err);
	ck_assert_int_eq(st_write(path, meta, 1, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "__metadata__ is not a tensor name"), "%s", err);
	ck_assert_int_eq(st_write(path, noname, 1, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "tensor 0: no name"), "%s", err);
	ck_assert_int_eq(st_write(path, latin1, 1, ST_F32, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "a name or metadata that is not UTF-8"), "%s", err);
	ck_assert_int_eq(st_write(path, noname, 1, ST_F16, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "Stork writes F32 or BF16, not F16"), "%s", err);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(st_write(in_dir("no/such/dir/w.safetensors"), dup, 1, ST_F32, NULL, err,
				  sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot create a temporary file beside it: No such file"), "%s",
		      err);
}
END_TEST

/* Entries of dir other than . and .. */
static int count_entries(void)
{
	int n = 0;
	DIR *d = opendir(dir);

	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

START_TEST(a_failed_write_leaves_the_old_file_and_no_temporary)
{
	const char *path = in_dir("model.safetensors");
	static float big[1 << 16];
	struct st_out t = { "big", 1, { 1 << 16 }, big };
	struct st_out small = { "small", 1, { 1 }, big };
	struct rlimit old, lim;
	struct safetensors *st;
	int rc;

	ck_assert_int_eq(st_write(path, &small, 1, ST_F32, NULL, err, sizeof err), 0);
	/* writes beyond RLIMIT_FSIZE fail with EFBIG */
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 4096;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rc = st_write(path, &t, 1, ST_BF16, NULL, err, sizeof err);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(strstr(err, path) && strstr(err, "cannot write: File too large"), "%s", err);
	ck_assert_int_eq(count_entries(), 1);
	st = st_open(path, err, sizeof err);
	ck_assert_msg(st && st_find(st, "small"), "%s", err);
	st_close(st);
}
END_TEST

/* ------------------------------------------------- the Python reference */

START_TEST(files_of_the_python_reference_read_value_for_value)
{
	static const float f32_want[] = { 1, -2.5f, FLT_MAX, 0x1p-149f, -0.0f, INFINITY,
					  -INFINITY, NAN, 0.1f, FLT_MIN };
	static const float bf16_want[] = { 1, -1.5f, 0.0078125f, 0x1.fep127f, 0x1p-133f,
					   INFINITY, -INFINITY, NAN, -0.0f };
	static const float f16_want[] = { 1, -2, 65504, 0x1p-24f, 0x3ffp-24f, 0x1p-14f,
					  INFINITY, -INFINITY, NAN, -0.0f, 0.333251953125f,
					  0.0999755859375f, -0x3p-24f };
	static const struct {
		const char *name;
		const float *want;
		size_t n;
	} cases[] = {
		{ "f32", f32_want, 10 }, { "bf16", bf16_want, 9 }, { "f16", f16_want, 13 },
	};
	struct safetensors *st;
	const struct st_tensor *t;
	float out[32];

	ck_assert_int_eq(run_ref("write-st", dir, NULL), 0);
	st = st_open(in_dir("ref.safetensors"), err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_uint_eq(st_count(st), 5);
	ck_assert_str_eq(st_metadata(st, "writer"), "safetensors_ref.py");
	for (size_t k = 0; k < 3; k++) {
		t = st_find(st, cases[k].name);
		ck_assert_ptr_nonnull(t);
		ck_assert_int_eq(t->nelem, cases[k].n);
		ck_assert_msg(st_read(st, t, out, err, sizeof err) == 0, "%s", err);
		for (size_t i = 0; i < cases[k].n; i++) {
			if (isnan(cases[k].want[i]))
				ck_assert_msg(isnan(out[i]), "%s[%zu]", cases[k].name, i);
			else
				ck_assert_msg(bits_of(out[i]) == bits_of(cases[k].want[i]),
					      "%s[%zu] = %a, not %a", cases[k].name, i, out[i],
					      cases[k].want[i]);
		}
	}
	/* rows and blocks of the Python file */
	t = st_find(st, "grid");
	ck_assert_int_eq(st_read_block(st, t, 2, 2, 1, 4, out, err, sizeof err), 0);
	for (int i = 0; i < 8; i++)
		ck_assert(out[i] == (2 + i / 4) * 16 + 1 + i % 4);
	t = st_find(st, "grid16");
	ck_assert_int_eq(st_read_rows(st, t, 3, 1, out, err, sizeof err), 0);
	ck_assert(out[0] == -9 / 4.0f && out[1] == -10 / 4.0f && out[2] == -11 / 4.0f);
	st_close(st);
	/* its sharded set */
	st = st_open_dir(in_dir("sharded"), err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_uint_eq(st_count(st), 3);
	ck_assert_int_eq(st_read(st, st_find(st, "a"), out, err, sizeof err), 0);
	ck_assert(out[0] == 1 && out[3] == 4);
	ck_assert_int_eq(st_read(st, st_find(st, "b"), out, err, sizeof err), 0);
	ck_assert(out[0] == 0.5f && out[1] == -0.25f && out[2] == 8);
	ck_assert_int_eq(st_read(st, st_find(st, "c"), out, err, sizeof err), 0);
	ck_assert(out[0] == 0x1p-24f && out[1] == -65504);
	st_close(st);
}
END_TEST

START_TEST(files_of_this_writer_pass_the_python_reference)
{
	write_four(in_dir("c-f32.safetensors"), ST_F32);
	write_four(in_dir("c-bf16.safetensors"), ST_BF16);
	ck_assert_int_eq(run_ref("check-st", in_dir("c-f32.safetensors"),
				 in_dir("c-bf16.safetensors")), 0);
}
END_TEST

static Suite *safetensors_suite(void)
{
	Suite *s = suite_create("safetensors");
	TCase *tc = tcase_create("core");

	/* the conversions try every bf16 and f16 value: over Check's 4 s
	 * under AddressSanitizer on a busy 2-core machine */
	tcase_set_timeout(tc, 60);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, f16_converts_every_value_exactly);
	tcase_add_test(tc, bf16_widens_by_appending_zero_bits);
	tcase_add_test(tc, bf16_rounds_to_nearest_even);
	tcase_add_test(tc, f32_round_trips_bit_for_bit);
	tcase_add_test(tc, bf16_round_trips_rounded_to_nearest_even);
	tcase_add_test(tc, written_header_is_sorted_and_data_aligned);
	tcase_add_test(tc, a_rank_reads_its_rows_and_its_block);
	tcase_add_test(tc, partial_reads_touch_only_their_bytes);
	tcase_add_test(tc, a_sharded_set_opens_as_one);
	tcase_add_test(tc, a_broken_index_is_refused_by_name);
	tcase_add_test(tc, a_tensor_in_two_shards_is_refused);
	tcase_add_test(tc, a_directory_without_weights_says_what_it_looked_for);
	tcase_add_test(tc, expect_names_the_tensor_the_file_and_both_shapes);
	tcase_add_test(tc, broken_headers_are_refused_with_what_is_wrong);
	tcase_add_test(tc, a_header_of_spaces_after_the_object_is_fine);
	tcase_add_test(tc, a_file_that_is_not_safetensors_is_refused_before_any_allocation);
	tcase_add_test(tc, the_writer_refuses_what_it_cannot_write);
	tcase_add_test(tc, a_failed_write_leaves_the_old_file_and_no_temporary);
	tcase_add_test(tc, files_of_the_python_reference_read_value_for_value);
	tcase_add_test(tc, files_of_this_writer_pass_the_python_reference);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(safetensors_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
