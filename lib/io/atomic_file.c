/*
 * lib/io/atomic_file.c - see atomic_file.h.
 *
 * The order of operations is the whole point: write the temporary file,
 * fsync it (its data is on disk), rename it over the target (the name now
 * points at complete data), fsync the directory (the rename is on disk).
 */
#include "config.h"
#include "lib/io/atomic_file.h"
#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *path, const char *what, int e)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s: %s", path, what, strerror(e));
	errno = e;
	return -1;
}

/* "PATH.tmp.R" into tmp, R 64 random bits: a name another user cannot guess. 0, or -1 with errno set. */
static int tmp_path(const char *path, char *tmp, size_t len)
{
	uint64_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		return -1;
	if (snprintf(tmp, len, "%s.tmp.%016llx", path, (unsigned long long)r) >= (int)len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int atomic_tmp_open(const char *path, char *tmp, size_t len, mode_t mode)
{
	for (int tries = 0; tries < 8; tries++) {
		int fd;

		if (tmp_path(path, tmp, len) < 0)
			return -1;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

int atomic_post_once(const char *path, const void *data, size_t len)
{
	char tmp[4200];
	int fd = atomic_tmp_open(path, tmp, sizeof tmp, 0600), linked, saved;
	ssize_t w;

	if (fd < 0)
		return -1;
	do
		w = write(fd, data, len);
	while (w < 0 && errno == EINTR);
	saved = errno;
	close(fd);
	if (w != (ssize_t)len) {
		unlink(tmp);
		errno = w < 0 ? saved : EIO;
		return -1;
	}
	linked = link(tmp, path);
	saved = errno;
	unlink(tmp);
	if (linked == 0)
		return 1;
	errno = saved;
	return saved == EEXIST ? 0 : -1;
}

int atomic_post_read(const char *path, char *buf, size_t len)
{
	int fd = len ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	size_t got = 0;
	ssize_t n = 0;

	if (fd < 0)
		return 0;
	while (got < len - 1) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return n >= 0 && got > 0;
}

int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc, e;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	e = errno;
	close(fd);
	/* Some file systems cannot fsync a directory; nothing more to do there. */
	if (rc < 0 && (e == EINVAL || e == ENOTSUP))
		rc = 0;
	errno = e;
	return rc;
}

int fsync_parent(const char *path)
{
	char *copy = strdup(path), *slash;
	int rc, e;

	if (!copy)
		return -1;
	slash = strrchr(copy, '/');
	if (!slash)
		rc = fsync_dir(".");
	else if (slash == copy)
		rc = fsync_dir("/");
	else {
		*slash = '\0';
		rc = fsync_dir(copy);
	}
	e = errno;
	free(copy);
	errno = e;
	return rc;
}

int atomic_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
	return atomic_write_file_mode(path, data, len, 0666, err, errlen);
}

int atomic_write_file_mode(const char *path, const void *data, size_t len, mode_t mode, char *err,
			   size_t errlen)
{
	size_t tlen = strlen(path) + 32;
	char *tmp = malloc(tlen);
	int fd = -1, e;
	const char *what;

	if (!tmp)
		return fail(err, errlen, path, "cannot write", ENOMEM);
	fd = atomic_tmp_open(path, tmp, tlen, mode);
	if (fd < 0) {
		what = "cannot create a temporary file beside it";
		goto fail_open;
	}
	what = "cannot write";
	if (write_all(fd, data, len) < 0)
		goto fail;
	what = "cannot flush to disk (fsync)";
	if (fsync(fd) < 0)
		goto fail;
	what = "cannot close";
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	what = "cannot rename the temporary file over it";
	if (rename(tmp, path) < 0)
		goto fail;
	free(tmp);
	if (fsync_parent(path) < 0)
		return fail(err, errlen, path, "cannot flush its directory (fsync)", errno);
	return 0;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = e;
fail_open:
	e = errno;
	free(tmp);
	return fail(err, errlen, path, what, e);
}

int atomic_symlink_replace(const char *target, const char *linkpath)
{
	size_t len = strlen(linkpath) + 32;
	char *tmp = malloc(len);
	int e;

	if (!tmp) {
		errno = ENOMEM;
		return -1;
	}
	/* symlink(2) never replaces: a name taken already fails, as O_EXCL would */
	if (tmp_path(linkpath, tmp, len) < 0 || symlink(target, tmp) < 0)
		goto fail;
	if (rename(tmp, linkpath) < 0) {
		e = errno;
		unlink(tmp);
		errno = e;
		goto fail;
	}
	free(tmp);
	return fsync_parent(linkpath);
fail:
	e = errno;
	free(tmp);
	errno = e;
	return -1;
}

int mkdir_p(const char *path, mode_t mode)
{
	char *copy, *p;
	struct stat st;
	int e = 0;

	if (!*path) {
		errno = ENOENT;
		return -1;
	}
	if (!(copy = strdup(path))) {
		errno = ENOMEM;
		return -1;
	}
	/* Create each prefix that ends before a '/', then the whole path. */
	for (p = copy + 1;; p++) {
		char saved = *p;

		if (saved != '/' && saved != '\0')
			continue;
		*p = '\0';
		if (mkdir(copy, mode) < 0) {
			int mkdir_errno = errno;

			if (stat(copy, &st) < 0) {
				e = mkdir_errno;
				break;
			}
			if (!S_ISDIR(st.st_mode)) {
				e = ENOTDIR;
				break;
			}
		}
		*p = saved;
		if (!saved)
			break;
	}
	free(copy);
	errno = e;
	return e ? -1 : 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int remove_tree(const char *path)
{
	/* depth first, never through a symbolic link (FTW_PHYS): a link is
	 * removed, not what it points to */
	return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT ? -1 : 0;
}
