/*
 * lib/run/metrics_rollup.c - see metrics_rollup.h.
 *
 * Every usable line becomes one sample (metric, minute, value); sorting
 * them by (metric, minute, value) puts each row's values together and in
 * order, so the percentiles are read off directly.
 */
#include "config.h"
#include "lib/run/metrics_rollup.h"
#include "lib/run/metrics_file.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/io.h"
#include "lib/formats/stork_json.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sample {
	int metric;          /* index into the names seen */
	long long minute;    /* floor(ts / 60) */
	double value;
};

struct rollup {
	struct sample *s;
	size_t n, cap;
	char **names;
	int nnames, capnames;
	long skipped;
};

static int name_index(struct rollup *r, const char *name)
{
	for (int i = 0; i < r->nnames; i++)
		if (!strcmp(r->names[i], name))
			return i;
	if (r->nnames == r->capnames) {
		int cap = r->capnames ? 2 * r->capnames : 16;
		char **v = realloc(r->names, (size_t)cap * sizeof *v);

		if (!v)
			return -1;
		r->names = v;
		r->capnames = cap;
	}
	if (!(r->names[r->nnames] = strdup(name)))
		return -1;
	return r->nnames++;
}

/* One metrics line into the rollup; 1 when out of memory. */
static int add_line(const char *line, void *arg)
{
	struct rollup *r = arg;
	char err[256];
	json_t *v = sj_parse(line, strlen(line), "metrics line", err, sizeof err);
	const char *metric = json_string_value(json_object_get(v, "metric"));
	const json_t *value = json_object_get(v, "value"), *ts = json_object_get(v, "ts");
	int id;

	if (!metric || !json_is_number(value) || !json_is_number(ts)) {
		r->skipped++;
		json_decref(v);
		return 0;
	}
	if ((id = name_index(r, metric)) < 0)
		goto oom;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 4096;
		struct sample *s = realloc(r->s, cap * sizeof *s);

		if (!s)
			goto oom;
		r->s = s;
		r->cap = cap;
	}
	r->s[r->n++] = (struct sample){ .metric = id,
					 .minute = (long long)floor(json_number_value(ts) / 60.0),
					 .value = json_number_value(value) };
	json_decref(v);
	return 0;
oom:
	json_decref(v);
	return 1;
}

static const struct rollup *sort_names; /* qsort has no context argument */

static int by_row_then_value(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	int c = strcmp(sort_names->names[x->metric], sort_names->names[y->metric]);

	if (c)
		return c;
	if (x->minute != y->minute)
		return x->minute < y->minute ? -1 : 1;
	return x->value < y->value ? -1 : x->value > y->value;
}

/* Nearest rank: the ceil(q n)-th smallest of n sorted values. */
static double percentile(const struct sample *s, size_t n, double q)
{
	size_t k = (size_t)ceil(q * (double)n);

	return s[k > 0 ? k - 1 : 0].value;
}

#define ROW_FORMAT "%s,%s,%zu,%.17g,%.17g,%.17g\n"

/*
 * One row appended whole, the buffer grown to hold it: a metric's name is
 * whatever a program wrote (a line of any length), so no row size is
 * assumed. 0, or -1 when out of memory (the buffer is then still the
 * caller's).
 */
static int append_row(char **text, size_t *cap, size_t *len, const char *name, const char *minute,
		      size_t count, double p50, double p95, double mean)
{
	int n = snprintf(NULL, 0, ROW_FORMAT, name, minute, count, p50, p95, mean);
	size_t want;

	if (n < 0 || __builtin_add_overflow(*len, (size_t)n + 1, &want))
		return -1;
	if (want > *cap) {
		size_t grown = *cap;
		char *t;

		while (grown < want)
			if (__builtin_mul_overflow(grown, 2, &grown))
				return -1;
		if (!(t = realloc(*text, grown)))
			return -1;
		*text = t;
		*cap = grown;
	}
	*len += (size_t)snprintf(*text + *len, *cap - *len, ROW_FORMAT, name, minute, count, p50, p95,
				 mean);
	return 0;
}

/* The rows, as CSV text (malloc'd), or NULL when out of memory. */
static char *format_rows(struct rollup *r, long *rows)
{
	size_t cap = 256 + r->n * 16, len = 0;
	char *text = malloc(cap);

	if (!text)
		return NULL;
	len = (size_t)snprintf(text, cap, "metric,minute,count,p50,p95,mean\n");
	*rows = 0;
	for (size_t i = 0; i < r->n;) {
		size_t j = i;
		double sum = 0;
		char minute[32];
		time_t t = (time_t)(r->s[i].minute * 60);
		struct tm tm;

		while (j < r->n && r->s[j].metric == r->s[i].metric && r->s[j].minute == r->s[i].minute)
			sum += r->s[j++].value;
		gmtime_r(&t, &tm);
		strftime(minute, sizeof minute, "%Y-%m-%dT%H:%MZ", &tm);
		if (append_row(&text, &cap, &len, r->names[r->s[i].metric], minute, j - i,
			       percentile(r->s + i, j - i, 0.50), percentile(r->s + i, j - i, 0.95),
			       sum / (double)(j - i))) {
			free(text);
			return NULL;
		}
		(*rows)++;
		i = j;
	}
	return text;
}

long metrics_rollup(const char *run_dir, long *skipped, char *err, size_t errlen)
{
	struct rollup r = { 0 };
	char pattern[4200], path[4200];
	glob_t g = { 0 };
	char *text = NULL;
	long rows = -1;

	if (path_join(pattern, sizeof pattern, run_dir, "logs/rank-*.metrics.jsonl") < 0 ||
	    path_join(path, sizeof path, run_dir, "metrics/summary.csv") < 0) {
		snprintf(err, errlen, "%s: path too long", run_dir);
		return -1;
	}
	glob(pattern, 0, NULL, &g);
	for (size_t i = 0; i < g.gl_pathc; i++)
		if (metrics_file_lines(g.gl_pathv[i], add_line, &r) > 0) {
			snprintf(err, errlen, "out of memory rolling up %s", g.gl_pathv[i]);
			goto out;
		}
	sort_names = &r;
	if (r.n) /* a run that logged nothing has no array: qsort(NULL, 0) is undefined */
		qsort(r.s, r.n, sizeof *r.s, by_row_then_value);
	if (!(text = format_rows(&r, &rows))) {
		snprintf(err, errlen, "out of memory writing %s", path);
		rows = -1;
		goto out;
	}
	if (atomic_write_file(path, text, strlen(text), err, errlen) < 0)
		rows = -1;
	if (skipped)
		*skipped = r.skipped;
out:
	globfree(&g);
	free(text);
	free(r.s);
	for (int i = 0; i < r.nnames; i++)
		free(r.names[i]);
	free(r.names);
	return rows;
}
