/* lib/io/io.c - see io.h. */
#include "config.h"
#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* One call moves at most this much: well under what Linux does per call. */
#define IO_CHUNK ((size_t)1 << 30)

static size_t chunk(size_t n)
{
	return n < IO_CHUNK ? n : IO_CHUNK;
}

/* Both writes: at the file offset when off < 0, else at off. */
static int write_whole(int fd, const char *p, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = off < 0 ? write(fd, p, chunk(len)) : pwrite(fd, p, chunk(len), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0) /* no progress and no reason: do not spin */
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	return write_whole(fd, buf, len, -1);
}

int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return write_whole(fd, buf, len, off);
}

ssize_t pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, p + got, chunk(len - got), off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

FILE *fopen_regular(const char *path)
{
	FILE *f = fopen(path, "r");
	struct stat st;

	if (f && (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))) {
		fclose(f);
		errno = EINVAL;
		return NULL;
	}
	return f;
}

/* Up to max bytes of f, NUL-terminated (malloc'd); NULL when out of memory. */
static char *read_stream(FILE *f, size_t max)
{
	size_t len = 0, cap = 4096, got;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	while (len < max) {
		size_t room = cap - len - 1;

		if ((got = fread(out + len, 1, room < max - len ? room : max - len, f)) == 0)
			break;
		len += got;
		if (cap - len < 2) {
			char *o = realloc(out, cap *= 2);

			if (!o)
				break;
			out = o;
		}
	}
	out[len] = '\0';
	return out;
}

char *command_output(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	char *out;

	if (!p)
		return NULL;
	out = read_stream(p, SIZE_MAX);
	*status = pclose(p);
	return out;
}

char *file_text(const char *path, size_t max)
{
	FILE *f = fopen_regular(path);
	char *text;

	if (!f)
		return NULL;
	text = read_stream(f, max);
	fclose(f);
	return text;
}

extern char **environ;

int spawn_wait(char *const argv[], const char *stdout_path)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, rc;

	if (posix_spawn_file_actions_init(&fa))
		return -1;
	if (stdout_path && posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, stdout_path,
							     O_WRONLY | O_CREAT | O_TRUNC, 0644)) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		errno = rc;
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int path_search(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH") ? getenv("PATH") : "/usr/local/bin:/usr/bin:/bin";
	struct stat st;

	if (!*name)
		return -1;
	if (strchr(name, '/'))
		return (size_t)snprintf(buf, len, "%s", name) < len && access(name, F_OK) == 0 ? 0 : -1;
	while (*path) {
		size_t n = strcspn(path, ":");

		/* an empty entry is the current directory, as for execvp */
		if ((size_t)snprintf(buf, len, "%.*s%s%s", (int)n, n ? path : ".", "/", name) < len &&
		    stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	return -1;
}
