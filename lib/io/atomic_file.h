/*
 * lib/io/atomic_file.h - replace files so that a crash leaves old or new, never half.
 *
 * The run directory is read after kills, preemptions and node failures, so
 * every file that matters (exit_info.json, manifests, checkpoints/latest)
 * is written under a temporary name in the same directory, flushed to disk
 * with fsync, renamed over the final name (rename is atomic within one file
 * system), and the directory itself is then fsync'ed so that the rename
 * survives a power cut. Readers see the old content or the new, complete
 * content; a failed write leaves the old file untouched and no temporary
 * file behind.
 */
#ifndef STORK_ATOMIC_FILE_H
#define STORK_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Replace path with len bytes of data (mode 0666 & ~umask), through a
 * temporary file of atomic_tmp_open's. Returns 0, or -1 with "PATH: what:
 * strerror" in err and errno set. */
int atomic_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* The same with the file's mode (& ~umask), e.g. 0600 for a file of this user's alone. */
int atomic_write_file_mode(const char *path, const void *data, size_t len, mode_t mode, char *err,
			   size_t errlen);

/*
 * Post len bytes at path unless something is there already: the first of
 * several writers (processes on any node of a shared file system) wins, and
 * a reader never sees part of a post (it is written whole under a name of
 * its own, mode 0600, and linked into place; link() fails on an existing
 * name). Returns 1 when this post is the one at path, 0 when another came
 * first, -1 with errno set.
 */
int atomic_post_once(const char *path, const void *data, size_t len);

/*
 * Read a post at path (never through a symbolic link) into buf, at most
 * len - 1 bytes, NUL-terminated: 1, or 0 when there is none (or it cannot
 * be read, or is empty).
 */
int atomic_post_read(const char *path, char *buf, size_t len);

/* A new temporary file beside path, for writing: "PATH.tmp.R" with R 64
 * random bits (another user cannot guess it to plant a link there first),
 * created with O_EXCL and O_NOFOLLOW (a file or link already there is never
 * written through), mode & ~umask; its name in tmp (len bytes). Returns the
 * descriptor, or -1 with errno set. */
int atomic_tmp_open(const char *path, char *tmp, size_t len, mode_t mode);

/* fsync a directory so that entries created, renamed or removed in it are
 * on disk. Returns 0, or -1 with errno set. */
int fsync_dir(const char *dir);

/* fsync the directory that contains path ("." for a bare name). */
int fsync_parent(const char *path);

/* Make linkpath a symbolic link to target, replacing any existing link or
 * file at linkpath atomically (a new link under a temporary name, renamed
 * over linkpath, parent fsync'ed). Returns 0, or -1 with errno set. */
int atomic_symlink_replace(const char *target, const char *linkpath);

/* Create path and its missing parents with mode (like mkdir -p); an
 * existing directory is success. Returns 0, or -1 with errno set (ENOTDIR
 * when a component is a file). */
int mkdir_p(const char *path, mode_t mode);

/* Remove path and, for a directory, everything under it, as rm -rf does
 * but without a shell (a path may hold any character) and never through a
 * symbolic link. A path that is gone already is success. 0, or -1 with
 * errno set. */
int remove_tree(const char *path);

#endif
