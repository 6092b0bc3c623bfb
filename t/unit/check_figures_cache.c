/*
 * t/unit/check_figures_cache.c - the user's cache of a node's measured
 * figures (lib/run/figures_cache.c): where it lives, that what is saved reads
 * back, that its directory is the user's own (0700) and that a directory
 * open to others, a planted link or a name with a slash is refused.
 */
#include "config.h"
#include "lib/io/atomic_file.h"
#include "lib/run/figures_cache.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[PATH_MAX], err[1024];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_figures.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	setenv("XDG_CACHE_HOME", dir, 1);
}

static void teardown(void)
{
	remove_tree(dir);
}

START_TEST(test_the_directory_is_xdg_cache_home_or_home)
{
	char buf[PATH_MAX + 64], want[PATH_MAX + 64];

	ck_assert_int_eq(figures_dir("n1", buf, sizeof buf, err, sizeof err), 0);
	snprintf(want, sizeof want, "%s/stork/n1", dir);
	ck_assert_str_eq(buf, want);
	setenv("XDG_CACHE_HOME", "relative/dir", 1); /* XDG: ignored unless absolute */
	setenv("HOME", "/home/someone", 1);
	ck_assert_int_eq(figures_dir("n1", buf, sizeof buf, err, sizeof err), 0);
	ck_assert_str_eq(buf, "/home/someone/.cache/stork/n1");
	ck_assert_int_eq(figures_dir("../n1", buf, sizeof buf, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a host name"));
}
END_TEST

START_TEST(test_a_saved_figure_reads_back_from_a_private_directory)
{
	json_t *v = json_pack("{s:f, s:s}", "bytes_per_s", 5e9, "source", "test"), *back;
	char path[PATH_MAX + 64], sub[PATH_MAX + 64];
	struct stat st;

	ck_assert_int_eq(figures_save("n1", "shm-4r", v, path, sizeof path, err, sizeof err), 0);
	snprintf(sub, sizeof sub, "%s/stork/n1/shm-4r.json", dir);
	ck_assert_str_eq(path, sub);
	snprintf(sub, sizeof sub, "%s/stork/n1", dir);
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	back = figures_load("n1", "shm-4r", NULL, 0, err, sizeof err);
	ck_assert_ptr_nonnull(back);
	ck_assert_double_eq(json_real_value(json_object_get(back, "bytes_per_s")), 5e9);
	json_decref(back);
	/* none yet: NULL and no message */
	ck_assert_ptr_null(figures_load("n2", "shm-4r", NULL, 0, err, sizeof err));
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(figures_save("n1", "a/b", v, NULL, 0, err, sizeof err), -1);
	json_decref(v);
}
END_TEST

START_TEST(test_a_directory_open_to_others_or_a_link_is_refused)
{
	json_t *v = json_pack("{s:i}", "x", 1);
	char sub[PATH_MAX + 64], target[PATH_MAX + 64];

	snprintf(sub, sizeof sub, "%s/stork", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	snprintf(sub, sizeof sub, "%s/stork/n1", dir);
	ck_assert_int_eq(mkdir(sub, 0777), 0);
	ck_assert_int_eq(chmod(sub, 0777), 0);
	ck_assert_int_eq(figures_save("n1", "x", v, NULL, 0, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "open to group or others"));
	snprintf(target, sizeof target, "%s/elsewhere", dir);
	ck_assert_int_eq(mkdir(target, 0700), 0);
	snprintf(sub, sizeof sub, "%s/stork/n2", dir);
	ck_assert_int_eq(symlink(target, sub), 0);
	ck_assert_int_eq(figures_save("n2", "x", v, NULL, 0, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a directory"));
	json_decref(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("figures_cache");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_the_directory_is_xdg_cache_home_or_home);
	tcase_add_test(tc, test_a_saved_figure_reads_back_from_a_private_directory);
	tcase_add_test(tc, test_a_directory_open_to_others_or_a_link_is_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
