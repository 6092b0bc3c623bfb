/*
 * t/unit/check_atomic.c - the promises of lib/atomic_file: a write replaces
 * the whole content and leaves no temporary file; a failed write leaves the
 * old file as it was and no temporary file; links are replaced in one step;
 * mkdir_p makes missing parents and reports a file in the way. And those
 * of lib/io, which it writes with: whole writes at the offset or at a
 * position, whole reads that come back short only at the end of the file;
 * and lib/direct_write's: every byte, with O_DIRECT or without; and
 * lib/io/private_dir's: another user's directory in a sticky
 * world-writable one is refused, reached through a link too; two makers
 * of one tree at once both succeed.
 *
 * Each test works in its own fresh directory under /tmp.
 */
#include "config.h"
#include "lib/io/private_dir.h"
#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/direct_write.h"
#include "lib/io/io.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[PATH_MAX];
static char err[1024];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_atomic.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	chmod(dir, 0700);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *in_dir(const char *name)
{
	static char path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	return path;
}

/* The whole content of a file, NUL-terminated, in a static buffer. */
static const char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "rb");
	size_t n;

	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Entries of dir other than . and .. */
static int count_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

START_TEST(write_creates_then_replaces_content)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s", in_dir("exit_info.json"));
	ck_assert_int_eq(atomic_write_file(path, "a fairly long old content\n", 26, err, sizeof err), 0);
	ck_assert_str_eq(slurp(path), "a fairly long old content\n");
	ck_assert_int_eq(atomic_write_file(path, "new\n", 4, err, sizeof err), 0);
	ck_assert_str_eq(slurp(path), "new\n");
	ck_assert_int_eq(atomic_write_file(path, "", 0, err, sizeof err), 0);
	ck_assert_str_eq(slurp(path), "");
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(failed_write_keeps_old_file_when_size_limit_hit)
{
	char path[PATH_MAX + 64], big[4096];
	struct rlimit old, lim;
	int rc, e;

	/* Writes beyond RLIMIT_FSIZE fail with EFBIG (even for root). */
	snprintf(path, sizeof path, "%s", in_dir("manifest.json"));
	ck_assert_int_eq(atomic_write_file(path, "old\n", 4, err, sizeof err), 0);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 100;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	memset(big, 'x', sizeof big);
	rc = atomic_write_file(path, big, sizeof big, err, sizeof err);
	e = errno;
	/* Restore the limit first: the test framework writes files too. */
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, EFBIG);
	ck_assert_msg(strstr(err, path) && strstr(err, strerror(EFBIG)), "%s", err);
	ck_assert_str_eq(slurp(path), "old\n");
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* Try to replace path with "step_2\n" in a child that cannot write the
 * directory (as root: a child that became nobody). Returns the child's
 * errno, or 0 if the write succeeded. */
static int write_without_permission(const char *path)
{
	pid_t pid;
	int status;

	ck_assert_int_eq(chmod(dir, geteuid() == 0 ? 0755 : 0500), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(255);
		if (atomic_write_file(path, "step_2\n", 7, err, sizeof err) == 0)
			_exit(0);
		/* The message must name the path and the reason. */
		_exit(strstr(err, path) && strstr(err, strerror(errno)) ? errno : 254);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(failed_write_keeps_old_file_in_unwritable_dir)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s", in_dir("latest"));
	ck_assert_int_eq(atomic_write_file(path, "step_1\n", 7, err, sizeof err), 0);
	ck_assert_int_eq(write_without_permission(path), EACCES);
	ck_assert_str_eq(slurp(path), "step_1\n");
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(temporary_files_cannot_be_planted)
{
	char path[PATH_MAX + 64], link[PATH_MAX + 128], victim[PATH_MAX + 64];
	char a[PATH_MAX + 128], b[PATH_MAX + 128];
	int fa, fb;

	/* a link another user planted at each name the former scheme used
	 * (PATH.tmp.PID.N) is never written through */
	snprintf(path, sizeof path, "%s", in_dir("state.json"));
	snprintf(victim, sizeof victim, "%s", in_dir("victim"));
	for (int n = 0; n < 4; n++) {
		snprintf(link, sizeof link, "%s.tmp.%ld.%d", path, (long)getpid(), n);
		ck_assert_int_eq(symlink(victim, link), 0);
	}
	ck_assert_int_eq(atomic_write_file(path, "ours\n", 5, err, sizeof err), 0);
	ck_assert_str_eq(slurp(path), "ours\n");
	ck_assert_int_eq(access(victim, F_OK), -1);
	/* the names are unguessable: 64 random bits, not the pid and a count */
	fa = atomic_tmp_open(path, a, sizeof a, 0600);
	fb = atomic_tmp_open(path, b, sizeof b, 0600);
	ck_assert_int_ge(fa, 0);
	ck_assert_int_ge(fb, 0);
	ck_assert_str_ne(a, b);
	ck_assert_uint_eq(strlen(a), strlen(path) + 5 + 16);
	close(fa), close(fb), unlink(a), unlink(b);
}
END_TEST

START_TEST(remove_tree_removes_all_but_what_links_point_to)
{
	char top[PATH_MAX + 64], sub[PATH_MAX + 96], f[PATH_MAX + 128], outside[PATH_MAX + 64];
	char link[PATH_MAX + 128];
	FILE *o;

	/* a name a shell would trip on, a file, a subdirectory, and a link out */
	snprintf(top, sizeof top, "%s", in_dir("it's a dir"));
	snprintf(sub, sizeof sub, "%s/sub", top);
	snprintf(f, sizeof f, "%s/f.bin", sub);
	snprintf(outside, sizeof outside, "%s", in_dir("outside"));
	snprintf(link, sizeof link, "%s/to-outside", top);
	ck_assert_int_eq(mkdir_p(sub, 0700), 0);
	ck_assert_ptr_nonnull(o = fopen(f, "w"));
	fclose(o);
	ck_assert_ptr_nonnull(o = fopen(outside, "w"));
	fputs("keep", o);
	fclose(o);
	ck_assert_int_eq(symlink(outside, link), 0);
	ck_assert_int_eq(remove_tree(top), 0);
	ck_assert_int_eq(access(top, F_OK), -1);
	ck_assert_str_eq(slurp(outside), "keep");
	ck_assert_int_eq(remove_tree(top), 0); /* gone already: success */
}
END_TEST

START_TEST(failed_rename_removes_the_temporary_file)
{
	char path[PATH_MAX + 64];

	/* A directory cannot be replaced by a file: rename fails (EISDIR). */
	snprintf(path, sizeof path, "%s", in_dir("step_00000001"));
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(atomic_write_file(path, "x", 1, err, sizeof err), -1);
	ck_assert_int_eq(errno, EISDIR);
	ck_assert_msg(strstr(err, path) && strstr(err, "rename"), "%s", err);
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

struct writer_arg {
	const char *path;
	char fill;
};

static void *writer(void *p)
{
	const struct writer_arg *a = p;
	char buf[1000], e[256];

	memset(buf, a->fill, sizeof buf);
	for (int i = 0; i < 20; i++)
		if (atomic_write_file(a->path, buf, sizeof buf, e, sizeof e) < 0)
			return (void *)1;
	return NULL;
}

START_TEST(concurrent_writers_leave_one_complete_version)
{
	char path[PATH_MAX + 64];
	struct writer_arg a[2];
	pthread_t t[2];
	void *rc;
	const char *content;

	snprintf(path, sizeof path, "%s", in_dir("shared"));
	for (int i = 0; i < 2; i++) {
		a[i].path = path;
		a[i].fill = (char)('a' + i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, writer, &a[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &rc);
		ck_assert_ptr_null(rc);
	}
	content = slurp(path);
	ck_assert_uint_eq(strlen(content), 1000);
	for (int i = 1; i < 1000; i++)
		ck_assert_int_eq(content[i], content[0]);
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(symlink_replace_points_to_the_new_target)
{
	char link[PATH_MAX + 64], target[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof link, "%s", in_dir("latest"));
	ck_assert_int_eq(atomic_symlink_replace("step_00000100", link), 0);
	n = readlink(link, target, sizeof target - 1);
	ck_assert_int_eq(n, 13);
	target[n] = '\0';
	ck_assert_str_eq(target, "step_00000100");
	ck_assert_int_eq(atomic_symlink_replace("step_00000200", link), 0);
	n = readlink(link, target, sizeof target - 1);
	target[n > 0 ? n : 0] = '\0';
	ck_assert_str_eq(target, "step_00000200");
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(symlink_replace_replaces_a_pointer_file)
{
	char link[PATH_MAX + 64];
	struct stat st;

	snprintf(link, sizeof link, "%s", in_dir("latest"));
	ck_assert_int_eq(atomic_write_file(link, "step_1\n", 7, err, sizeof err), 0);
	ck_assert_int_eq(atomic_symlink_replace("step_2", link), 0);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(symlink_replace_failure_sets_errno)
{
	char link[PATH_MAX + 64];

	snprintf(link, sizeof link, "%s", in_dir("missing/latest"));
	ck_assert_int_eq(atomic_symlink_replace("x", link), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(count_entries(), 0);
}
END_TEST

START_TEST(mkdir_p_creates_missing_parents)
{
	char path[PATH_MAX + 64];
	struct stat st;

	snprintf(path, sizeof path, "%s", in_dir("a/b//c/d/"));
	ck_assert_int_eq(mkdir_p(path, 0755), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* Existing directories are success, relative paths work too. */
	ck_assert_int_eq(mkdir_p(path, 0755), 0);
	ck_assert_int_eq(mkdir_p(dir, 0755), 0);
	ck_assert_int_eq(mkdir_p("/", 0755), 0);
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(mkdir_p("rel/x", 0755), 0);
	ck_assert_int_eq(stat(in_dir("rel/x"), &st), 0);
}
END_TEST

START_TEST(mkdir_p_reports_a_file_in_the_way)
{
	char path[PATH_MAX + 64];

	ck_assert_int_eq(atomic_write_file(in_dir("f"), "", 0, err, sizeof err), 0);
	snprintf(path, sizeof path, "%s", in_dir("f/sub"));
	ck_assert_int_eq(mkdir_p(path, 0755), -1);
	ck_assert_int_eq(errno, ENOTDIR);
	ck_assert_int_eq(mkdir_p(in_dir("f"), 0755), -1);
	ck_assert_int_eq(errno, ENOTDIR);
	ck_assert_int_eq(mkdir_p("", 0755), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(fsync_dir_reports_errors)
{
	ck_assert_int_eq(fsync_dir(dir), 0);
	ck_assert_int_eq(fsync_parent(in_dir("anything")), 0);
	ck_assert_int_eq(fsync_dir(in_dir("absent")), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(atomic_write_file(in_dir("f"), "", 0, err, sizeof err), 0);
	ck_assert_int_eq(fsync_dir(in_dir("f")), -1);
	ck_assert_int_eq(errno, ENOTDIR);
}
END_TEST

START_TEST(path_join_refuses_what_does_not_fit)
{
	char dst[16];

	ck_assert_int_eq(path_join(dst, sizeof dst, "/run/x", "latest"), 0);
	ck_assert_str_eq(dst, "/run/x/latest");
	/* 15 characters fit, 16 do not: never a shorter path. */
	ck_assert_int_eq(path_join(dst, sizeof dst, "/run/xy", "latest1"), 0);
	errno = 0;
	ck_assert_int_eq(path_join(dst, sizeof dst, "/run/xyz", "latest1"), -1);
	ck_assert_int_eq(errno, ENAMETOOLONG);
}
END_TEST

START_TEST(msg_format_says_it_was_cut)
{
	char dst[12];

	msg_format(dst, sizeof dst, "%s", "short");
	ck_assert_str_eq(dst, "short");
	msg_format(dst, sizeof dst, "cannot write %s", "/a/long/path");
	ck_assert_str_eq(dst, "cannot w...");
}
END_TEST

START_TEST(whole_writes_and_reads)
{
	char buf[16] = "";
	int fd = open(in_dir("io"), O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write_all(fd, "0123456789", 10), 0);
	ck_assert_int_eq(pwrite_all(fd, "ab", 2, 3), 0);
	ck_assert_int_eq(write_all(fd, "XY", 2), 0); /* pwrite_all left the offset at 10 */
	ck_assert_int_eq(pread_all(fd, buf, 12, 0), 12);
	ck_assert_int_eq(memcmp(buf, "012ab56789XY", 12), 0);
	ck_assert_int_eq(pread_all(fd, buf, sizeof buf, 8), 4); /* short only at the end */
	ck_assert_int_eq(pread_all(fd, buf, 4, 12), 0);
	ck_assert_int_eq(pwrite_all(fd, "z", 1, -1), -1);
	ck_assert_int_eq(errno, EINVAL);
	close(fd);
	ck_assert_int_eq(write_all(fd, "z", 1), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_int_eq(pread_all(fd, buf, 1, 0), -1);
	ck_assert_int_eq(errno, EBADF);
}
END_TEST

/* The bytes of the n parts, one after the other, equal the file's. */
static void assert_file_is(const char *path, const struct iovec *iov, int n)
{
	int fd = open(path, O_RDONLY);
	size_t total = 0, at = 0;
	char *got;
	struct stat st;

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq((size_t)st.st_size, total);
	got = malloc(total + 1);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(pread_all(fd, got, total, 0), (ssize_t)total);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(!memcmp(got + at, iov[i].iov_base, iov[i].iov_len), "part %d differs", i);
		at += iov[i].iov_len;
	}
	free(got);
	close(fd);
}

/*
 * Parts of odd sizes (none a multiple of a block, one across two 4 MiB
 * chunks) come back byte for byte: on this disk through O_DIRECT, on
 * /dev/shm (tmpfs refuses O_DIRECT) through the page cache; an exclusive
 * create of an existing file fails with EEXIST and leaves it alone.
 */
START_TEST(direct_write_keeps_every_byte)
{
	size_t sizes[] = { 1, (4u << 20) + 3, 5000, 0, 4093 };
	struct iovec iov[5];
	char shm[] = "/dev/shm/check_atomic.XXXXXX", shm_file[64];
	unsigned x = 12345;

	for (int i = 0; i < 5; i++) {
		char *p = malloc(sizes[i] + 1);

		ck_assert_ptr_nonnull(p);
		for (size_t k = 0; k < sizes[i]; k++)
			p[k] = (char)((x = x * 1103515245u + 12345u) >> 16);
		iov[i] = (struct iovec){ p, sizes[i] };
	}
	ck_assert_int_eq(write_file_synced(in_dir("big.bin"), 0, 0644, iov, 5), 0);
	assert_file_is(in_dir("big.bin"), iov, 5);
	/* again over it (O_TRUNC), fewer parts: the old tail is gone */
	ck_assert_int_eq(write_file_synced(in_dir("big.bin"), 0, 0644, iov + 2, 1), 0);
	assert_file_is(in_dir("big.bin"), iov + 2, 1);
	errno = 0;
	ck_assert_int_eq(write_file_synced(in_dir("big.bin"), 1, 0644, iov, 5), -1);
	ck_assert_int_eq(errno, EEXIST);
	assert_file_is(in_dir("big.bin"), iov + 2, 1);
	if (mkdtemp(shm)) {
		snprintf(shm_file, sizeof shm_file, "%s/f", shm);
		ck_assert_int_eq(write_file_synced(shm_file, 0, 0600, iov, 5), 0);
		assert_file_is(shm_file, iov, 5);
		unlink(shm_file);
		rmdir(shm);
	}
	ck_assert_int_eq(write_file_synced(in_dir("no/such/dir"), 0, 0644, iov, 1), -1);
	ck_assert_int_eq(errno, ENOENT);
	for (int i = 0; i < 5; i++)
		free(iov[i].iov_base);
}
END_TEST

/*
 * base/sticky is world-writable and sticky (as /tmp), base/sticky/other
 * another user's; base/link points to base/sticky. A private directory
 * under base/link/other must be refused as under base/sticky/other: the
 * link is not the directory its next component lives in. Root only (it
 * gives a directory to another user).
 */
START_TEST(private_dir_refuses_another_users_dir_behind_a_link)
{
	char sticky[PATH_MAX + 64], other[PATH_MAX + 64], link[PATH_MAX + 64], want[PATH_MAX + 64];

	if (geteuid() != 0)
		return;
	snprintf(sticky, sizeof sticky, "%s", in_dir("sticky"));
	snprintf(other, sizeof other, "%s", in_dir("sticky/other"));
	snprintf(link, sizeof link, "%s", in_dir("link"));
	ck_assert_int_eq(mkdir(sticky, 0777), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	ck_assert_int_eq(mkdir(other, 0777), 0);
	ck_assert_int_eq(chown(other, 65534, 65534), 0);
	ck_assert_int_eq(symlink(sticky, link), 0);
	snprintf(want, sizeof want, "%s", in_dir("sticky/other/mine"));
	ck_assert_int_eq(private_dir_make(want, "stage directory", "data.stage_dir", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "another user's"), "%s", err);
	snprintf(want, sizeof want, "%s", in_dir("link/other/mine"));
	err[0] = '\0';
	ck_assert_int_eq(private_dir_make(want, "stage directory", "data.stage_dir", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "another user's"), "%s", err);
	snprintf(want, sizeof want, "%s", in_dir("link/mine")); /* our own, through the link: fine */
	ck_assert_int_eq(private_dir_make(want, "stage directory", "data.stage_dir", err, sizeof err), 0);
}
END_TEST

/* Two makers of the same new tree, started together (two nodes on one file system). */
struct race {
	char base[PATH_MAX + 64];
	pthread_barrier_t start;
	int failures;
	char failure[512];
};

static void *make_race_dirs(void *arg)
{
	struct race *r = arg;
	char want[PATH_MAX + 128], why[512];

	for (int i = 0; i < 200; i++) {
		snprintf(want, sizeof want, "%s/%d/a/b", r->base, i);
		pthread_barrier_wait(&r->start);
		if (private_dir_make(want, "node-local checkpoint directory", "checkpoint.local_dir", why,
				     sizeof why) < 0) {
			__atomic_add_fetch(&r->failures, 1, __ATOMIC_RELAXED);
			snprintf(r->failure, sizeof r->failure, "%s", why);
		}
	}
	return NULL;
}

/* The other maker made a component between this one's look and its mkdir: still made, not an error. */
START_TEST(private_dir_made_by_two_at_once)
{
	struct race r = { .failures = 0 };
	pthread_t t[2];

	snprintf(r.base, sizeof r.base, "%s", in_dir("race"));
	pthread_barrier_init(&r.start, NULL, 2);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&t[k], NULL, make_race_dirs, &r), 0);
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&r.start);
	ck_assert_msg(r.failures == 0, "%d of 400 failed, last: %s", r.failures, r.failure);
}
END_TEST

static Suite *atomic_suite(void)
{
	Suite *s = suite_create("atomic_file");
	TCase *tc = tcase_create("atomic_file");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, write_creates_then_replaces_content);
	tcase_add_test(tc, temporary_files_cannot_be_planted);
	tcase_add_test(tc, remove_tree_removes_all_but_what_links_point_to);
	tcase_add_test(tc, path_join_refuses_what_does_not_fit);
	tcase_add_test(tc, msg_format_says_it_was_cut);
	tcase_add_test(tc, failed_write_keeps_old_file_when_size_limit_hit);
	tcase_add_test(tc, failed_write_keeps_old_file_in_unwritable_dir);
	tcase_add_test(tc, failed_rename_removes_the_temporary_file);
	tcase_add_test(tc, concurrent_writers_leave_one_complete_version);
	tcase_add_test(tc, symlink_replace_points_to_the_new_target);
	tcase_add_test(tc, symlink_replace_replaces_a_pointer_file);
	tcase_add_test(tc, symlink_replace_failure_sets_errno);
	tcase_add_test(tc, mkdir_p_creates_missing_parents);
	tcase_add_test(tc, mkdir_p_reports_a_file_in_the_way);
	tcase_add_test(tc, fsync_dir_reports_errors);
	tcase_add_test(tc, private_dir_refuses_another_users_dir_behind_a_link);
	tcase_add_test(tc, private_dir_made_by_two_at_once);
	tcase_add_test(tc, whole_writes_and_reads);
	tcase_add_test(tc, direct_write_keeps_every_byte);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(atomic_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
