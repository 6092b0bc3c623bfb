/*
 * t/unit/check_tfevents.c - TensorBoard's event files (lib/formats/tfevents.h):
 * CRC32C against the standard's check values, a file's first record
 * framed as TFRecord frames it, records kept until a flush writes them
 * whole, a failed write reported, and a new file for every writer.
 * t/integration/tensorboard/check.py reads whole runs' files through
 * TensorBoard's schema with other implementations.
 */
#include "config.h"
#include "lib/formats/tfevents.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], err[4600];

static void make_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_tfevents.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* RFC 3720's (iSCSI) check values of CRC32C */
START_TEST(crc32c_matches_the_check_values)
{
	uint8_t zeros[32] = { 0 }, ones[32];

	memset(ones, 0xff, sizeof ones);
	ck_assert_uint_eq(tfevents_crc32c("123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(tfevents_crc32c(zeros, sizeof zeros), 0x8a9136aau);
	ck_assert_uint_eq(tfevents_crc32c(ones, sizeof ones), 0x62a8ab43u);
}
END_TEST

static uint32_t masked(const void *data, size_t len)
{
	uint32_t c = tfevents_crc32c(data, len);

	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t little(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The version record, then a scalar: lengths, CRCs and the version string in place. */
START_TEST(records_are_framed_with_masked_crcs)
{
	struct tfevents t;
	uint8_t buf[512];
	uint64_t len;
	ssize_t n;
	int fd;

	make_dir();
	ck_assert_msg(tfevents_open(&t, dir, "h1", 1e9, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(tfevents_scalar(&t, 1e9 + 1, 7, "train_loss", 2.5f), 0);
	ck_assert_ptr_nonnull(strstr(t.path, "/events.out.tfevents.1000000000.h1."));
	tfevents_close(&t);
	fd = open(t.path, O_RDONLY);
	n = read(fd, buf, sizeof buf);
	close(fd);
	len = little(buf, 8);
	ck_assert_uint_eq(little(buf + 8, 4), masked(buf, 8));
	ck_assert_uint_eq(little(buf + 12 + len, 4), masked(buf + 12, len));
	/* Event: wall_time (field 1, fixed64), file_version (field 3, length) */
	ck_assert_uint_eq(buf[12], 1 << 3 | 1);
	ck_assert_uint_eq(buf[12 + 9], 3 << 3 | 2);
	ck_assert_int_eq(memcmp(buf + 12 + 11, "brain.Event:2", 13), 0);
	/* the second record fills the rest of the file */
	ck_assert_int_eq(n, (ssize_t)(16 + len + 16 + little(buf + 16 + len, 8)));
	remove_dir();
}
END_TEST

static int count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += !strncmp(e->d_name, "events.out.tfevents.", 20);
	closedir(d);
	return n;
}

/* two writers of one second, host and process (a daemon, then the launcher) */
START_TEST(every_writer_gets_a_new_file)
{
	struct tfevents a, b;

	make_dir();
	ck_assert_int_eq(tfevents_open(&a, dir, "h1", 5, err, sizeof err), 0);
	ck_assert_int_eq(tfevents_open(&b, dir, "h1", 5, err, sizeof err), 0);
	ck_assert_str_ne(a.path, b.path);
	ck_assert_int_eq(tfevents_text(&b, 5, 0, "exit", "completed (exit 0)"), 0);
	tfevents_close(&a);
	tfevents_close(&b);
	ck_assert_int_eq(count_files(), 2);
	remove_dir();
}
END_TEST

static off_t size_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

/* The version record at once; scalars at the flush, all of them; a full disk said by the flush and by nothing else. */
START_TEST(records_wait_for_a_flush_and_a_failed_write_is_said)
{
	struct tfevents t;
	off_t version;
	int full = open("/dev/full", O_WRONLY);

	make_dir();
	ck_assert_int_eq(tfevents_open(&t, dir, "h1", 5, err, sizeof err), 0);
	version = size_of(t.path);
	ck_assert_int_gt(version, 16);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(tfevents_scalar(&t, 5, i, "train_loss", 1.0f), 0);
	ck_assert_int_eq(size_of(t.path), version);
	ck_assert_int_eq(tfevents_flush(&t), 0);
	/* 100 records of 16 bytes of framing and one event each, all there */
	ck_assert_int_gt(size_of(t.path), version + 100 * 16);
	ck_assert_int_eq(tfevents_flush(&t), 0); /* nothing kept: nothing written */
	ck_assert_int_ge(full, 0);
	ck_assert_int_ge(dup2(full, t.fd), 0);
	ck_assert_int_eq(tfevents_scalar(&t, 5, 100, "train_loss", 1.0f), 0);
	errno = 0;
	ck_assert_int_eq(tfevents_flush(&t), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_int_eq(tfevents_scalar(&t, 5, 101, "train_loss", 1.0f), 0);
	ck_assert_int_eq(tfevents_close(&t), -1); /* the close's flush fails too */
	ck_assert_int_eq(t.fd, -1);
	close(full);
	remove_dir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tfevents");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, crc32c_matches_the_check_values);
	tcase_add_test(tc, records_are_framed_with_masked_crcs);
	tcase_add_test(tc, records_wait_for_a_flush_and_a_failed_write_is_said);
	tcase_add_test(tc, every_writer_gets_a_new_file);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
