/*
 * lib/run/metrics_file.c - see metrics_file.h.
 */
#include "config.h"
#include "lib/run/metrics_file.h"
#include "lib/io/io.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int metrics_file_lines(const char *path, int (*each)(const char *line, void *arg), void *arg)
{
	FILE *f = fopen_regular(path);
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	if (!f)
		return -1;
	/* getline: a line of any length is one line (fgets would cut it in two) */
	while (rc == 0 && getline(&line, &cap, f) >= 0)
		rc = each(line, arg);
	free(line);
	fclose(f);
	return rc;
}

int metrics_file_follow(const char *path, long long *read_to,
			int (*each)(char *line, size_t len, void *arg), void *arg)
{
	char buf[65536];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0, skipping = 0;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	while (rc == 0 && *read_to < st.st_size &&
	       (n = pread(fd, buf, st.st_size - *read_to < (long long)sizeof buf ?
					   (size_t)(st.st_size - *read_to) : sizeof buf,
			  (off_t)*read_to)) > 0) {
		char *p = buf, *end = buf + n, *nl;

		if (skipping) { /* the rest of a line longer than the buffer */
			if (!(nl = memchr(p, '\n', (size_t)n))) {
				*read_to += n;
				continue;
			}
			p = nl + 1;
			skipping = 0;
		}
		while (rc == 0 && (nl = memchr(p, '\n', (size_t)(end - p)))) {
			*nl = '\0';
			rc = each(p, (size_t)(nl - p), arg);
			p = nl + 1;
		}
		if (rc == 0 && p == buf && n == (ssize_t)sizeof buf) {
			p = end; /* a line longer than the buffer: skipped to its newline */
			skipping = 1;
		}
		*read_to += p - buf;
		if (p < end && *read_to + (end - p) >= st.st_size)
			break; /* the rest of a line still being written: next time */
	}
	close(fd);
	return rc;
}

/*
 * The value of "key" in line: what follows its colon, blanks skipped
 * (a program's own writer may put a space there, as Python's json.dumps
 * does), or NULL.
 */
static const char *value_of(const char *line, const char *key)
{
	size_t len = strlen(key);

	for (const char *p = strchr(line, '"'); p; p = strchr(p + 1, '"')) {
		const char *v;

		if (strncmp(p + 1, key, len) || p[1 + len] != '"')
			continue;
		v = p + len + 2;
		v += strspn(v, " \t");
		if (*v == ':')
			return v + 1 + strspn(v + 1, " \t");
		/* No colon: search on from the key's closing quote, not from
		 * v, which is the terminating NUL when the key ends a line
		 * cut short (the last line of a file without its newline). */
		p += len + 1;
	}
	return NULL;
}

int metrics_line_is(const char *line, const char *name)
{
	const char *p = value_of(line, "metric");
	size_t len = strlen(name);

	return p && *p == '"' && !strncmp(p + 1, name, len) && p[1 + len] == '"';
}

static int note_step(const char *line, void *arg)
{
	const char *p = value_of(line, "step");

	if (p)
		*(long long *)arg = strtoll(p, NULL, 10);
	return 0;
}

long long metrics_file_last_step(const char *path)
{
	long long step = -1;

	metrics_file_lines(path, note_step, &step);
	return step;
}

struct last_value {
	const char *metric;
	double value;
};

static int note_value(const char *line, void *arg)
{
	struct last_value *lv = arg;
	const char *p;

	if (metrics_line_is(line, lv->metric) && (p = value_of(line, "value")))
		lv->value = strtod(p, NULL);
	return 0;
}

double metrics_file_last_value(const char *path, const char *metric, double none)
{
	struct last_value lv = { metric, none };

	metrics_file_lines(path, note_value, &lv);
	return lv.value;
}
