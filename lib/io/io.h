/*
 * lib/io/io.h - whole reads and writes on file descriptors.
 *
 * read(2) and write(2) may move fewer bytes than asked: a signal arrives
 * (EINTR), the disk fills up part way, or a transfer is larger than the
 * kernel does in one call (2 GiB - 4 KiB on Linux). These loops go on
 * until everything is moved or a real error stops them, so a caller sees
 * one outcome. For sockets with deadlines see lib/rendezvous/rendezvous_tcp.c.
 */
#ifndef STORK_IO_H
#define STORK_IO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Write len bytes of buf at the file offset. 0, or -1 with errno set. */
int write_all(int fd, const void *buf, size_t len);

/* Write len bytes of buf at offset off; the file offset does not move. 0, or -1 with errno set. */
int pwrite_all(int fd, const void *buf, size_t len, off_t off);

/*
 * Read len bytes at offset off into buf. Returns the bytes read, fewer
 * than len only when the file ends first, or -1 with errno set.
 */
ssize_t pread_all(int fd, void *buf, size_t len, off_t off);

/*
 * fopen(path, "r") of a regular file only: a log or metrics file that is a
 * device (/dev/full, /dev/zero stand in for a full disk in tests, and would
 * be read forever) or a directory gives NULL with errno EINVAL.
 */
FILE *fopen_regular(const char *path);

/*
 * Everything the shell command cmd prints on stdout (malloc'd,
 * NUL-terminated), with its pclose() status in *status; NULL when it cannot
 * be started or memory runs out.
 */
char *command_output(const char *cmd, int *status);

/*
 * Run argv (argv[0] looked up in PATH) without a shell, its standard
 * output to stdout_path when not NULL, and wait: its exit status, 128 +
 * the signal that killed it, or -1 with errno set when it cannot start.
 */
int spawn_wait(char *const argv[], const char *stdout_path);

/*
 * Where execvp would find the program name: name itself when it holds a
 * slash, else the first executable regular file of that name in PATH
 * (the default search path when PATH is unset). 0 with the path in buf,
 * or -1 when there is none.
 */
int path_search(const char *name, char *buf, size_t len);

/*
 * The first max bytes (at most) of the regular file at path, NUL-terminated
 * (malloc'd); NULL when it cannot be opened (errno set) or memory runs out.
 */
char *file_text(const char *path, size_t max);

#endif
