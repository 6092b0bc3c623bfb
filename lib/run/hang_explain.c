/*
 * lib/run/hang_explain.c - a hang, explained from where each rank was (see
 * lib/run/hang_explain.h).
 */
#include "config.h"
#include "lib/run/hang_explain.h"

#include "lib/formats/stork_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLLECTIVES 6       /* explained; the rest are counted */
#define MAX_LISTED 8            /* members named in a list */

struct text {
	char *p;
	size_t len, used;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->used + 1 >= t->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->p + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->used = t->used + (size_t)n < t->len ? t->used + (size_t)n : t->len - 1;
}

static const char *str(const json_t *r, const char *key)
{
	const char *s = json_string_value(json_object_get(r, key));

	return s ? s : "";
}

static long long num(const json_t *r, const char *key)
{
	return sj_int(r, key, -1);
}

static int member(const json_t *r, int i)
{
	long long block = num(r, "block") > 0 ? num(r, "block") : 1;

	return (int)(num(r, "first") + (i / block) * num(r, "stride") + i % block);
}

/* The record of rank, or NULL. */
static const json_t *record_of(const json_t *records, int rank)
{
	size_t i;
	const json_t *r;

	json_array_foreach(records, i, r)
		if (num(r, "rank") == rank)
			return r;
	return NULL;
}

/* Two records wait in the same collective: the same group instance and call. */
static int same_collective(const json_t *a, const json_t *b)
{
	return str(a, "op")[0] && !strcmp(str(a, "op"), str(b, "op")) &&
	       !strcmp(str(a, "group"), str(b, "group")) && num(a, "first") == num(b, "first") &&
	       num(a, "call") == num(b, "call");
}

/* "ranks 2-3" or "ranks 1, 3, 5 and 7" of the group of r. */
static void put_members(struct text *t, const json_t *r)
{
	int count = (int)num(r, "count"), contiguous = 1;

	for (int i = 1; i < count; i++)
		contiguous &= member(r, i) == member(r, 0) + i;
	if (count > 1 && contiguous) {
		put(t, "ranks %d-%d", member(r, 0), member(r, count - 1));
		return;
	}
	put(t, "rank%s ", count == 1 ? "" : "s");
	for (int i = 0; i < count && i < MAX_LISTED; i++)
		put(t, "%s%d", i == 0 ? "" : i == count - 1 ? " and " : ", ", member(r, i));
	if (count > MAX_LISTED)
		put(t, " and %d more", count - MAX_LISTED);
}

/* The ranks of r's collective that never entered it. */
static void put_missing(struct text *t, const json_t *records, const json_t *r)
{
	int count = (int)num(r, "count"), said = 0, unknown = 0;

	for (int i = 0; i < count; i++) {
		int m = member(r, i);
		const json_t *o = record_of(records, m);

		if (o && same_collective(o, r))
			continue;
		unknown += !o;
		if (said++ < MAX_LISTED)
			put(t, "%s%d%s", said == 1 ? "; rank " : ", ", m, o ? "" : " (no record)");
	}
	if (said > MAX_LISTED)
		put(t, " and %d more", said - MAX_LISTED);
	if (said)
		put(t, " never entered it%s", unknown ? " (no record: its node did not report)" : "");
	else
		put(t, "; every member is in it");
}

/* One collective: who waits in it, since when, and who never came. */
static void put_collective(struct text *t, const json_t *records, const json_t *r, int *seen,
			   size_t at)
{
	size_t i, n = 0;
	const json_t *o;
	double longest = 0;

	put(t, "%s", t->used ? "; " : "");
	json_array_foreach(records, i, o) {
		if (i < at || !same_collective(o, r))
			continue;
		seen[i] = 1;
		put(t, "%srank %d (%s%s)", n++ ? ", " : "", (int)num(o, "rank"), str(o, "host"),
		    str(o, "thread")[0] ? ", its communication thread" : "");
		if (json_number_value(json_object_get(o, "waiting_s")) > longest)
			longest = json_number_value(json_object_get(o, "waiting_s"));
	}
	put(t, " wait%s in %s #%lld of the %s group (", n == 1 ? "s" : "", str(r, "op"),
	    num(r, "call"), str(r, "group")[0] ? str(r, "group") : "unnamed");
	put_members(t, r);
	put(t, ", %lld bytes)", num(r, "bytes"));
	if (num(r, "peer") >= 0)
		put(t, " %s rank %lld", !strcmp(str(r, "op"), "send") ? "to" : "from", num(r, "peer"));
	put(t, " since step %lld (%.0f s)", num(r, "step"), longest);
	if (json_is_true(json_object_get(r, "failed")))
		put(t, ", and it failed");
	if (num(r, "peer") >= 0) {
		const json_t *p = record_of(records, (int)num(r, "peer"));

		if (!p)
			put(t, "; rank %lld has no record (its node did not report)", num(r, "peer"));
		return;
	}
	put_missing(t, records, r);
}

/* A rank in no collective: where it was last seen. */
static void put_last_seen(struct text *t, const json_t *r)
{
	put(t, "%srank %d (%s) was last seen %s", t->used ? "; " : "", (int)num(r, "rank"),
	    str(r, "host"), str(r, "phase")[0] ? str(r, "phase") : "running");
	if (num(r, "layer") >= 0)
		put(t, ", layer %lld", num(r, "layer"));
	put(t, " of step %lld, in no collective", num(r, "step"));
}

size_t hang_explain(const json_t *records, char *out, size_t len)
{
	size_t n = json_array_size(records), i;
	int *seen = calloc(n ? n : 1, sizeof *seen), explained = 0, more = 0;
	struct text t = { out, len, 0 };
	const json_t *r;

	if (!len)
		return 0;
	out[0] = '\0';
	if (!seen)
		return 0;
	json_array_foreach(records, i, r) {
		if (seen[i] || !str(r, "op")[0])
			continue;
		if (explained++ >= MAX_COLLECTIVES) {
			more++;
			continue;
		}
		put_collective(&t, records, r, seen, i);
	}
	if (more)
		put(&t, "; and %d more collective(s)", more);
	/* the ranks the others wait for, most likely */
	json_array_foreach(records, i, r)
		if (!str(r, "op")[0])
			put_last_seen(&t, r);
	free(seen);
	return t.used;
}

void hang_records_path(char *out, size_t len, const char *run_dir, int node, int requeue,
		       int attempt)
{
	snprintf(out, len, "%s/logs/where.node-%03d.requeue-%d.restart-%d.json", run_dir, node,
		 requeue, attempt);
}
