/* lib/run/end_notice.c - see end_notice.h. */
#include "config.h"
#include "lib/run/end_notice.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIX ".end."

int end_notice_path(char *path, size_t len, const char *run_dir, const char *job_id,
		    int restart_count, int attempt)
{
	int n = snprintf(path, len, "%s/logs/" PREFIX "%s.%d.%d", run_dir, job_id, restart_count,
			 attempt);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* "failed 0.000\nMESSAGE\n" */
static int write_whole(int fd, const struct end_notice *n)
{
	char text[sizeof n->message + 64];
	int len = snprintf(text, sizeof text, "%s %.3f\n%s\n",
			   n->kind == END_NOTICE_HANG ? "hang" : "failed", n->at, n->message);
	ssize_t w;

	if (len < 0)
		return -1;
	if ((size_t)len >= sizeof text)
		len = (int)sizeof text - 1;
	do
		w = write(fd, text, (size_t)len);
	while (w < 0 && errno == EINTR);
	return w == len ? 0 : -1;
}

int end_notice_post(const char *path, const struct end_notice *n, struct end_notice *first)
{
	char tmp[4200];
	int fd, linked, saved;

	if (snprintf(tmp, sizeof tmp, "%s.%ld.XXXXXX", path, (long)getpid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* mkstemp: O_EXCL, 0600, a name no other process chose */
	if ((fd = mkstemp(tmp)) < 0)
		return -1;
	if (write_whole(fd, n) < 0) {
		saved = errno;
		close(fd);
		unlink(tmp);
		errno = saved;
		return -1;
	}
	close(fd);
	/* link() fails on an existing name, whoever made it: the first wins */
	linked = link(tmp, path);
	saved = errno;
	unlink(tmp);
	if (linked == 0)
		return 1;
	if (saved != EEXIST) {
		errno = saved;
		return -1;
	}
	if (!end_notice_read(path, first)) {
		errno = EEXIST;
		return -1;
	}
	return 0;
}

int end_notice_read(const char *path, struct end_notice *n)
{
	char text[sizeof n->message + 64], kind[16];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
	char *nl;

	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return 0;
	text[got] = '\0';
	if (sscanf(text, "%15s %lf", kind, &n->at) != 2 || !(nl = strchr(text, '\n')))
		return 0;
	n->kind = strcmp(kind, "hang") == 0 ? END_NOTICE_HANG : END_NOTICE_FAILED;
	snprintf(n->message, sizeof n->message, "%.*s", (int)strcspn(nl + 1, "\n"), nl + 1);
	return 1;
}

void end_notice_remove_all(const char *run_dir)
{
	char logs[4200], path[4500];
	struct dirent *e;
	DIR *d;

	snprintf(logs, sizeof logs, "%s/logs", run_dir);
	if (!(d = opendir(logs)))
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, PREFIX, strlen(PREFIX))) {
			snprintf(path, sizeof path, "%s/%s", logs, e->d_name);
			unlink(path);
		}
	closedir(d);
}
