/*
 * t/unit/check_data.c - the data loader (daemon/engine/data/data.h) on hand-made llm.c
 * shards whose token i is a known function of i, so every expected batch is
 * computed from the layout data.h describes; and `stork prep` round trips.
 */
#include "config.h"
#include "daemon/engine/data/data.h"
#include "launcher/prep/prep.h"
#include "lib/exit_codes.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char err[512];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_data.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, "..")))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Token i of shard `id` (distinct across shards, below 65536). */
static int tok(int id, long i)
{
	return id * 4096 + (int)i;
}

/*
 * Write shard `id` with ntok tokens tok(id, i) to dir/name; the header says
 * hcount tokens and has the given magic and version; `cut` bytes are dropped
 * from the end of the file.
 */
static char *write_shard_raw(const char *name, int id, long ntok, int magic,
			     int version, long hcount, long cut)
{
	static char path[8][512];
	static int next;
	char *p = path[next++ % 8];
	int32_t h[256] = { magic, version, (int32_t)hcount };
	uint16_t *t = malloc((size_t)ntok * 2 + 2);
	FILE *f;

	for (long i = 0; i < ntok; i++)
		t[i] = (uint16_t)tok(id, i);
	snprintf(p, 512, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(p, "wb"));
	fwrite(h, sizeof h, 1, f);
	fwrite(t, 2, (size_t)ntok, f);
	fclose(f);
	if (cut)
		ck_assert_int_eq(truncate(p, 1024 + 2 * ntok - cut), 0);
	free(t);
	return p;
}

static char *write_shard(const char *name, int id, long ntok)
{
	return write_shard_raw(name, id, ntok, DATA_MAGIC, DATA_VERSION, ntok, 0);
}

static struct data_config config(const char *const *globs, int nglobs, int B, int T)
{
	struct data_config c = {
		.key = "data.train", .globs = globs, .nglobs = nglobs,
		.batch_size = B, .seq_len = T, .rank = 0, .nranks = 1,
		.shuffle = 0, .seed = 1337, .vocab_size = 0,
	};
	return c;
}

static struct data_loader *open_ok(const struct data_config *c)
{
	struct data_loader *dl;
	int rc = data_open(&dl, c, err, sizeof err);

	ck_assert_msg(rc == 0, "data_open: %s", err);
	return dl;
}

static void next_ok(struct data_loader *dl, int *in, int *tg)
{
	int rc = data_next(dl, in, tg, err, sizeof err);

	ck_assert_msg(rc == 0, "data_next: %s", err);
}

/* Sample j of shard id starts at token j*T: inputs tok(j*T+t), targets +1. */
static void assert_sample(const int *in, const int *tg, int T, int id, long j)
{
	for (int t = 0; t < T; t++) {
		ck_assert_int_eq(in[t], tok(id, j * T + t));
		ck_assert_int_eq(tg[t], tok(id, j * T + t + 1));
	}
}

START_TEST(batches_are_consecutive_windows_of_the_shard)
{
	char glob[600];
	const char *globs[] = { glob };
	int B = 2, T = 4, in[8], tg[8];
	struct data_config c = config(globs, 1, B, T);
	struct data_loader *dl;

	write_shard("a.bin", 1, 25);      /* 6 samples: 3 batches per epoch */
	snprintf(glob, sizeof glob, "%s/*.bin", dir);
	dl = open_ok(&c);
	ck_assert_int_eq(data_num_shards(dl), 1);
	ck_assert_int_eq(data_num_tokens(dl), 25);
	for (int k = 0; k < 7; k++) {
		next_ok(dl, in, tg);
		for (int b = 0; b < B; b++)
			assert_sample(in + b * T, tg + b * T, T, 1, (2 * k + b) % 6);
	}
	data_close(dl);
}
END_TEST

START_TEST(a_batch_continues_into_the_next_shard_and_epoch)
{
	char glob[600];
	const char *globs[] = { glob };
	int B = 2, T = 4, in[8], tg[8];
	struct data_config c = config(globs, 1, B, T);
	struct data_loader *dl;
	/* expected (shard id, sample) per batch row: a has 2 samples, b has 3 */
	static const int want[4][2][2] = {
		{ { 1, 0 }, { 1, 1 } }, { { 2, 0 }, { 2, 1 } },
		{ { 2, 2 }, { 1, 0 } }, { { 1, 1 }, { 2, 0 } },
	};

	write_shard("a.bin", 1, 9);       /* exactly B*T+1 tokens */
	write_shard("b.bin", 2, 13);
	snprintf(glob, sizeof glob, "%s/*.bin", dir);
	dl = open_ok(&c);
	for (int k = 0; k < 4; k++) {
		struct data_position p;

		next_ok(dl, in, tg);
		for (int b = 0; b < B; b++)
			assert_sample(in + b * T, tg + b * T, T, want[k][b][0], want[k][b][1]);
		data_get_position(dl, &p);
		if (k == 2)
			ck_assert_int_eq(p.epoch, 1);
	}
	data_close(dl);
}
END_TEST

/* Several globs: each glob's matches sorted, globs in the order given. */
START_TEST(globs_are_sorted_within_and_kept_in_order_across)
{
	char g1[600], g2[600];
	const char *globs[] = { g1, g2 };
	struct data_config c = config(globs, 2, 1, 4);
	struct data_loader *dl;

	write_shard("z_1.bin", 1, 5);
	write_shard("z_0.bin", 2, 5);
	write_shard("a_0.bin", 3, 5);
	snprintf(g1, sizeof g1, "%s/z_*.bin", dir);
	snprintf(g2, sizeof g2, "%s/a_*.bin", dir);
	dl = open_ok(&c);
	ck_assert_int_eq(data_num_shards(dl), 3);
	ck_assert(strstr(data_shard_path(dl, 0), "z_0.bin"));
	ck_assert(strstr(data_shard_path(dl, 1), "z_1.bin"));
	ck_assert(strstr(data_shard_path(dl, 2), "a_0.bin"));
	data_close(dl);
}
END_TEST

/* Shuffled data: 3 shards of 7, 9, 11 samples (T = 3). */
static void make_three(char *glob, size_t len)
{
	write_shard("s0.bin", 1, 7 * 3 + 1);
	write_shard("s1.bin", 2, 9 * 3 + 1);
	write_shard("s2.bin", 3, 11 * 3 + 1);
	snprintf(glob, len, "%s/s*.bin", dir);
}

/* Record `n` batches' first input tokens (one per sample). */
static void record(struct data_loader *dl, int B, int T, int n, int *firsts)
{
	int *in = malloc(sizeof(int) * (size_t)(B * T)), *tg = malloc(sizeof(int) * (size_t)(B * T));

	for (int k = 0; k < n; k++) {
		next_ok(dl, in, tg);
		for (int b = 0; b < B; b++) {
			firsts[k * B + b] = in[b * T];
			for (int t = 1; t < T; t++) /* a sample stays contiguous */
				ck_assert_int_eq(in[b * T + t], in[b * T] + t);
			ck_assert_int_eq(tg[b * T + T - 1], in[b * T] + T);
		}
	}
	free(in);
	free(tg);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

START_TEST(shuffle_is_a_seeded_permutation_of_each_epoch)
{
	char glob[600];
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 3, 3);
	int a[54], b[54], d[54], sorted[27], plain[27];
	struct data_loader *dl;

	make_three(glob, sizeof glob);
	c.shuffle = 1;
	record(dl = open_ok(&c), 3, 3, 18, a), data_close(dl);   /* 2 epochs of 27 */
	record(dl = open_ok(&c), 3, 3, 18, b), data_close(dl);
	ck_assert(!memcmp(a, b, sizeof a));
	c.seed = 1338;
	record(dl = open_ok(&c), 3, 3, 18, d), data_close(dl);
	ck_assert(memcmp(a, d, sizeof a));
	c.shuffle = 0;
	record(dl = open_ok(&c), 3, 3, 9, plain), data_close(dl);
	ck_assert(memcmp(a, plain, sizeof plain));      /* shuffled differs from plain */
	ck_assert(memcmp(a, a + 27, sizeof plain));     /* epochs differ */
	for (int e = 0; e < 2; e++) {                   /* each epoch: every sample once */
		memcpy(sorted, a + 27 * e, sizeof sorted);
		qsort(sorted, 27, sizeof(int), cmp_int);
		ck_assert(!memcmp(sorted, plain, sizeof sorted));
	}
}
END_TEST

START_TEST(rank_slices_partition_the_global_batch)
{
	char glob[600];
	const char *globs[] = { glob };
	int R = 3, B = 2, T = 3, steps = 9;
	int global[9 * 6], part[9 * 2];
	struct data_config c = config(globs, 1, R * B, T);
	struct data_loader *dl;

	make_three(glob, sizeof glob);
	c.shuffle = 1;
	record(dl = open_ok(&c), R * B, T, steps, global), data_close(dl);
	for (int r = 0; r < R; r++) {
		c.batch_size = B, c.rank = r, c.nranks = R;
		record(dl = open_ok(&c), B, T, steps, part), data_close(dl);
		for (int k = 0; k < steps; k++)
			for (int b = 0; b < B; b++)
				ck_assert_int_eq(part[k * B + b], global[k * R * B + r * B + b]);
	}
}
END_TEST

START_TEST(restored_position_gives_the_same_next_batches)
{
	char glob[600];
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 2, 3);
	int skip[40], want[40], got[40];
	struct data_position p;
	struct data_loader *dl;

	make_three(glob, sizeof glob);
	c.shuffle = 1;
	for (int k = 1; k < 20; k += 3) {
		dl = open_ok(&c);
		record(dl, 2, 3, k, skip);
		data_get_position(dl, &p);
		record(dl, 2, 3, 20, want);
		data_close(dl);

		c.seed = 1337 + (uint64_t)k;  /* the position carries the state */
		dl = open_ok(&c);
		c.seed = 1337;
		ck_assert_msg(data_set_position(dl, &p, err, sizeof err) == 0, "%s", err);
		record(dl, 2, 3, 20, got);
		data_close(dl);
		ck_assert_msg(!memcmp(want, got, sizeof want), "after %d batches", k);
	}
}
END_TEST

/*
 * Prefetch: the helper thread's batches are the synchronous reader's, bit
 * for bit, across shards and epochs, and so are the positions it reports
 * (a batch read ahead is not consumed) and what follows a move of the
 * position or a rewind while a batch is being read ahead.
 */
START_TEST(prefetch_gives_the_same_batches_and_positions)
{
	char glob[600];
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 2, 3);
	int want[2 * 40], got[2 * 40], wmid[2 * 10], gmid[2 * 10];
	struct data_position wp, gp;
	struct data_loader *a, *b;

	make_three(glob, sizeof glob);
	c.shuffle = 1;
	a = open_ok(&c);
	c.prefetch = 1;
	b = open_ok(&c);
	for (int round = 0; round < 3; round++) {
		record(a, 2, 3, 40, want);  /* several epochs of 19 samples */
		record(b, 2, 3, 40, got);
		ck_assert(!memcmp(want, got, sizeof want));
		data_get_position(a, &wp);
		data_get_position(b, &gp);
		ck_assert(!memcmp(&wp, &gp, sizeof wp));
		/* move both back to a position taken mid-stream */
		record(a, 2, 3, 10, wmid);
		record(b, 2, 3, 10, gmid);
		ck_assert(!memcmp(wmid, gmid, sizeof wmid));
		ck_assert_msg(data_set_position(a, &wp, err, sizeof err) == 0, "%s", err);
		ck_assert_msg(data_set_position(b, &gp, err, sizeof err) == 0, "%s", err);
		record(a, 2, 3, 10, wmid);
		record(b, 2, 3, 10, gmid);
		ck_assert(!memcmp(wmid, gmid, sizeof wmid));
		if (round == 1) {
			data_rewind(a);
			data_rewind(b);
		}
	}
	data_close(a);
	data_close(b);
}
END_TEST

START_TEST(rewind_restarts_validation_from_the_first_batch)
{
	char glob[600];
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 2, 3);
	int a[6], b[6];
	struct data_loader *dl;

	make_three(glob, sizeof glob);
	c.key = "data.val";
	dl = open_ok(&c);
	record(dl, 2, 3, 3, a);
	data_rewind(dl);
	record(dl, 2, 3, 3, b);
	ck_assert(!memcmp(a, b, sizeof a));
	ck_assert_int_eq(a[0], tok(1, 0));
	data_close(dl);
}
END_TEST

START_TEST(a_position_that_does_not_fit_is_refused)
{
	char glob[600];
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 2, 3);
	struct data_position p = { 0, 5, 0, 1 };
	struct data_loader *dl;

	make_three(glob, sizeof glob);
	dl = open_ok(&c);
	ck_assert_int_eq(data_set_position(dl, &p, err, sizeof err), STORK_EXIT_DATA);
	ck_assert(strstr(err, "data.train"));
	p.shard = 0, p.sample = 7;    /* s0 has 7 samples: 0..6 */
	ck_assert_int_eq(data_set_position(dl, &p, err, sizeof err), STORK_EXIT_DATA);
	ck_assert(strstr(err, "s0.bin"));
	data_close(dl);
}
END_TEST

/* --------------------------------------------------------------- errors */

static void assert_open_fails(const char *path, int B, int T, const char *what)
{
	const char *globs[] = { path };
	struct data_config c = config(globs, 1, B, T);
	struct data_loader *dl;

	err[0] = 0;
	ck_assert_int_eq(data_open(&dl, &c, err, sizeof err), STORK_EXIT_DATA);
	ck_assert_ptr_null(dl);
	ck_assert_msg(strstr(err, path), "message does not name %s: %s", path, err);
	ck_assert_msg(strstr(err, what), "message does not say '%s': %s", what, err);
}

START_TEST(wrong_magic_is_reported_with_the_file)
{
	assert_open_fails(write_shard_raw("m.bin", 1, 9, 12345, 1, 9, 0), 2, 4, "magic");
	assert_open_fails(write_shard_raw("g.bin", 1, 9, 20240326, 1, 9, 0), 2, 4,
			  "model file");
}
END_TEST

START_TEST(wrong_version_is_reported_with_the_file)
{
	assert_open_fails(write_shard_raw("v.bin", 1, 9, DATA_MAGIC, 2, 9, 0), 2, 4,
			  "version 2");
}
END_TEST

START_TEST(truncated_shard_is_reported_with_both_sizes)
{
	/* header says 100 tokens (1224 bytes); the file has 1024 + 2*100 - 7 */
	char *p = write_shard_raw("t.bin", 1, 100, DATA_MAGIC, 1, 100, 7);

	assert_open_fails(p, 2, 4, "truncated");
	assert_open_fails(p, 2, 4, "1224 bytes");
	assert_open_fails(p, 2, 4, "1217 bytes");
	assert_open_fails(write_shard_raw("h.bin", 1, 0, DATA_MAGIC, 1, 0, 1000), 1, 1,
			  "header");
}
END_TEST

START_TEST(shard_smaller_than_one_batch_is_reported)
{
	char *p = write_shard("s.bin", 1, 8);   /* B*T+1 = 9 */

	assert_open_fails(p, 2, 4, "fewer than the 9");
}
END_TEST

START_TEST(glob_matching_nothing_is_reported)
{
	char pat[600];

	snprintf(pat, sizeof pat, "%s/nothing_*.bin", dir);
	assert_open_fails(pat, 2, 4, "matches no file");
}
END_TEST

START_TEST(token_outside_the_vocabulary_is_reported)
{
	char *p = write_shard("o.bin", 1, 9);
	const char *globs[] = { p };
	struct data_config c = config(globs, 1, 2, 4);
	struct data_loader *dl;
	int in[8], tg[8];

	c.vocab_size = tok(1, 5);       /* tokens tok(1,0..4) fit, tok(1,5) does not */
	dl = open_ok(&c);
	ck_assert_int_eq(data_next(dl, in, tg, err, sizeof err), STORK_EXIT_DATA);
	ck_assert(strstr(err, p));
	ck_assert(strstr(err, "vocabulary"));
	data_close(dl);
}
END_TEST

/*
 * llm.c's shards of 32-bit tokens (magic DATA_MAGIC_U32): ids above 65535
 * (Llama 3's vocabulary) read as they were written, beside a 16-bit shard
 * in the same stream.
 */
START_TEST(shards_of_32_bit_tokens_give_ids_above_65535)
{
	char path[512], glob[600];
	const char *globs[] = { glob };
	int32_t h[256] = { DATA_MAGIC_U32, DATA_VERSION_U32, 9 };
	uint32_t t[9];
	int in[4], tg[4];
	struct data_config c = config(globs, 1, 1, 4);
	struct data_loader *dl;
	struct token_shard sh;
	FILE *f;

	for (int i = 0; i < 9; i++)
		t[i] = 128000u + (uint32_t)i * 30u;
	snprintf(path, sizeof path, "%s/a32.bin", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	fwrite(h, sizeof h, 1, f);
	fwrite(t, sizeof t[0], 9, f);
	fclose(f);
	write_shard("b16.bin", 1, 9);
	ck_assert_int_eq(token_shard_check(path, &sh, err, sizeof err), 0);
	ck_assert_int_eq(sh.token_bytes, 4);
	ck_assert_uint_eq(sh.ntok, 9);
	snprintf(glob, sizeof glob, "%s/*.bin", dir);
	c.vocab_size = 128256;
	dl = open_ok(&c);
	for (int k = 0; k < 2; k++) { /* the two samples of a32.bin: tokens 4k .. 4k + 4 */
		next_ok(dl, in, tg);
		for (int i = 0; i < 4; i++) {
			ck_assert_int_eq(in[i], (int)t[4 * k + i]);
			ck_assert_int_eq(tg[i], (int)t[4 * k + i + 1]);
		}
	}
	next_ok(dl, in, tg); /* then b16.bin's 16-bit tokens */
	assert_sample(in, tg, 4, 1, 0);
	data_close(dl);
	/* the file must hold 4 bytes a token: a 16-bit body under a 32-bit header is short */
	h[2] = 18;
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	fwrite(h, sizeof h, 1, f);
	fwrite(t, sizeof t[0], 9, f);
	fclose(f);
	ck_assert_int_eq(token_shard_check(path, &sh, err, sizeof err), STORK_EXIT_DATA);
	ck_assert_msg(strstr(err, "truncated shard") && strstr(err, "18 tokens (1096 bytes)"), "%s",
		      err);
}
END_TEST

/* ----------------------------------------------------------------- prep */

static void write_text(const char *name, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	fputs(text, f);
	fclose(f);
}

/* Read a shard written by prep; returns its tokens and sets *n. */
static uint16_t *read_shard(const char *path, long *n)
{
	FILE *f = fopen(path, "rb");
	int32_t h[256];
	uint16_t *t;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fread(h, sizeof h, 1, f), 1);
	ck_assert_int_eq(h[0], DATA_MAGIC);
	ck_assert_int_eq(h[1], DATA_VERSION);
	ck_assert_int_eq(h[DATA_HEADER_VOCAB], PREP_VOCAB_SIZE);
	*n = h[2];
	t = malloc((size_t)*n * 2 + 2);
	ck_assert_int_eq(fread(t, 2, (size_t)*n, f), (size_t)*n);
	ck_assert_int_eq(fgetc(f), EOF);
	fclose(f);
	return t;
}

START_TEST(prep_round_trips_the_text)
{
	static const char t1[] = "First line.\nSecond line\xc3\xa9.\n", t2[] =
		"Another document\nwith\nshort\nlines and\nbytes \x01\xff.\n";
	char p1[600], p2[600], out[700];
	char *argv[] = { "prep", "--val-share", "0.3", "--out", dir, "--name", "txt", p1, p2, NULL };
	uint16_t *tr, *va;
	long ntr, nva, k = 0;
	char joined[256];
	size_t len1 = strlen(t1), len2 = strlen(t2);

	write_text("one.txt", t1, p1, sizeof p1);
	write_text("two.txt", t2, p2, sizeof p2);
	ck_assert_int_eq(cmd_prep(9, argv), 0);
	snprintf(out, sizeof out, "%s/txt_train.bin", dir);
	tr = read_shard(out, &ntr);
	snprintf(out, sizeof out, "%s/txt_val.bin", dir);
	va = read_shard(out, &nva);
	ck_assert_int_eq(ntr + nva, (long)(len1 + len2 + 2));
	/* decode: EOT t1 EOT t2 */
	for (long i = 0; i < ntr + nva; i++) {
		int t = i < ntr ? tr[i] : va[i - ntr];

		if (t == PREP_EOT)
			joined[k++] = '|';
		else
			joined[k++] = (char)t;
		ck_assert_int_le(t, PREP_EOT);
	}
	joined[k] = 0;
	ck_assert_str_eq(joined, "|First line.\nSecond line\xc3\xa9.\n|Another document\n"
			 "with\nshort\nlines and\nbytes \x01\xff.\n");
	/* the validation part is about 30% and starts on a line */
	ck_assert_int_ge(nva, (long)((len1 + len2 + 2) * 3 / 20));
	ck_assert_int_le(nva, (long)((len1 + len2 + 2) * 3 / 10) + 1);
	ck_assert(va[0] == PREP_EOT || tr[ntr - 1] == '\n');
	free(tr);
	free(va);
}
END_TEST

START_TEST(prep_output_is_readable_by_the_loader)
{
	char p1[600], glob[700];
	char text[4000];
	char *argv[] = { "prep", "--out", dir, p1, NULL };
	const char *globs[] = { glob };
	struct data_config c = config(globs, 1, 4, 8);
	struct data_loader *dl;
	int in[32], tg[32];

	for (int i = 0; i < 3999; i++)
		text[i] = (i % 50 == 49) ? '\n' : (char)('a' + i % 26);
	text[3999] = 0;
	write_text("story.txt", text, p1, sizeof p1);
	ck_assert_int_eq(cmd_prep(4, argv), 0);
	snprintf(glob, sizeof glob, "%s/story_train.bin", dir);
	c.vocab_size = PREP_VOCAB_SIZE;
	dl = open_ok(&c);
	next_ok(dl, in, tg);
	ck_assert_int_eq(in[0], PREP_EOT);
	ck_assert_int_eq(in[1], 'a');
	ck_assert_int_eq(tg[0], 'a');
	data_close(dl);
	snprintf(glob, sizeof glob, "%s/story_val.bin", dir);
	dl = open_ok(&c);
	data_close(dl);
}
END_TEST

START_TEST(prep_refuses_bad_arguments)
{
	char p1[600], missing[700];
	char *bad_share[] = { "prep", "--val-share", "1.5", p1, NULL };
	char *no_file[] = { "prep", "--out", dir, missing, NULL };
	char *no_args[] = { "prep", NULL };

	write_text("x.txt", "some text\n", p1, sizeof p1);
	snprintf(missing, sizeof missing, "%s/missing.txt", dir);
	ck_assert_int_eq(cmd_prep(4, bad_share), STORK_EXIT_USAGE);
	ck_assert_int_eq(cmd_prep(4, no_file), STORK_EXIT_DATA);
	ck_assert_int_eq(cmd_prep(1, no_args), STORK_EXIT_USAGE);
	ck_assert_int_eq(access(missing, F_OK), -1);
}
END_TEST

START_TEST(prep_makes_its_output_directory)
{
	char p1[600], out[700], shard[800];
	char *argv[] = { "prep", "--out", out, p1, NULL };
	struct stat st;

	write_text("made.txt", "a line of text\nand another one\n", p1, sizeof p1);
	snprintf(out, sizeof out, "%s/new/deeper", dir);
	ck_assert_int_eq(cmd_prep(4, argv), 0);
	ck_assert_int_eq(stat(out, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	snprintf(shard, sizeof shard, "%s/made_train.bin", out);
	ck_assert_int_eq(access(shard, R_OK), 0);
}
END_TEST

/* A file of n bytes starting with head (hn bytes), the rest letters. */
static void write_bytes(const char *name, const char *head, size_t hn, size_t n, char *path,
			size_t len)
{
	char *b = malloc(n);
	FILE *f;

	for (size_t i = 0; i < n; i++)
		b[i] = i < hn ? head[i] : (char)('a' + i % 26);
	snprintf(path, len, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	fwrite(b, 1, n, f);
	fclose(f);
	free(b);
}

START_TEST(prep_refuses_what_is_not_text_unless_told)
{
	char gz[600], nul[600], out[700];
	char *gz_argv[] = { "prep", "--out", out, gz, NULL };
	char *nul_argv[] = { "prep", "--out", out, nul, NULL };
	char *forced[] = { "prep", "--binary", "--out", out, "--name", "forced", nul, NULL };

	snprintf(out, sizeof out, "%s/binary", dir);
	write_bytes("notes.txt.gz", "\x1f\x8b\x08", 3, 500, gz, sizeof gz);
	write_bytes("blob.txt", "abc\0def", 7, 500, nul, sizeof nul);
	ck_assert_int_eq(cmd_prep(4, gz_argv), STORK_EXIT_DATA);
	ck_assert_int_eq(cmd_prep(4, nul_argv), STORK_EXIT_DATA);
	ck_assert_int_eq(access(out, F_OK), -1); /* refused before anything was written */
	ck_assert_int_eq(cmd_prep(7, forced), 0);
	snprintf(out, sizeof out, "%s/binary/forced_train.bin", dir);
	ck_assert_int_eq(access(out, R_OK), 0);
}
END_TEST

START_TEST(a_shard_made_for_a_larger_vocabulary_is_refused)
{
	char *p = write_shard("big.bin", 1, 100);
	const char *globs[] = { p };
	struct data_config c = config(globs, 1, 2, 4);
	struct data_loader *dl;
	int32_t vocab = 50257;
	FILE *f = fopen(p, "r+b");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, DATA_HEADER_VOCAB * 4, SEEK_SET), 0);
	ck_assert_int_eq(fwrite(&vocab, sizeof vocab, 1, f), 1);
	fclose(f);
	c.vocab_size = 257;
	ck_assert_int_eq(data_open(&dl, &c, err, sizeof err), STORK_EXIT_DATA);
	ck_assert_msg(strstr(err, p) && strstr(err, "50257") && strstr(err, "model.vocab_size"),
		      "%s", err);
	c.vocab_size = 50257;
	dl = open_ok(&c);
	data_close(dl);
}
END_TEST

static Suite *data_suite(void)
{
	Suite *s = suite_create("data");
	TCase *tc = tcase_create("loader");
	TCase *te = tcase_create("errors");
	TCase *tp = tcase_create("prep");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(te, setup, teardown);
	tcase_add_checked_fixture(tp, setup, teardown);
	tcase_add_test(tc, batches_are_consecutive_windows_of_the_shard);
	tcase_add_test(tc, a_batch_continues_into_the_next_shard_and_epoch);
	tcase_add_test(tc, globs_are_sorted_within_and_kept_in_order_across);
	tcase_add_test(tc, shuffle_is_a_seeded_permutation_of_each_epoch);
	tcase_add_test(tc, rank_slices_partition_the_global_batch);
	tcase_add_test(tc, restored_position_gives_the_same_next_batches);
	tcase_add_test(tc, rewind_restarts_validation_from_the_first_batch);
	tcase_add_test(tc, prefetch_gives_the_same_batches_and_positions);
	tcase_add_test(tc, a_position_that_does_not_fit_is_refused);
	tcase_add_test(te, wrong_magic_is_reported_with_the_file);
	tcase_add_test(te, wrong_version_is_reported_with_the_file);
	tcase_add_test(te, truncated_shard_is_reported_with_both_sizes);
	tcase_add_test(te, shard_smaller_than_one_batch_is_reported);
	tcase_add_test(te, glob_matching_nothing_is_reported);
	tcase_add_test(te, token_outside_the_vocabulary_is_reported);
	tcase_add_test(te, shards_of_32_bit_tokens_give_ids_above_65535);
	tcase_add_test(tp, prep_round_trips_the_text);
	tcase_add_test(tp, prep_output_is_readable_by_the_loader);
	tcase_add_test(tp, prep_refuses_bad_arguments);
	tcase_add_test(tp, prep_makes_its_output_directory);
	tcase_add_test(tp, prep_refuses_what_is_not_text_unless_told);
	tcase_add_test(te, a_shard_made_for_a_larger_vocabulary_is_refused);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, te);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(data_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
