/*
 * lib/run/metrics_file.c - see metrics_file.h.
 */
#include "config.h"
#include "lib/run/metrics_file.h"
#include "lib/io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
