/*
 * daemon/rank_log.c - see rank_log.h. Every line is formatted whole and
 * written with one fputs + fflush, so a crash loses at most the line being
 * written and concurrent readers (tail -f) see whole lines.
 */
#include "config.h"
#include "daemon/rank_log.h"

#include "lib/stork_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static FILE *open_append(const char *run_dir, int rank, const char *suffix, char *err,
			 size_t errlen)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/logs/rank-%03d.%s", run_dir, rank, suffix);
	f = fopen(path, "a");
	if (!f)
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
	return f;
}

int rank_log_open(struct rank_log *rl, const char *run_dir, int rank, int local,
		  const char *host, const char *job_id, char *err, size_t errlen)
{
	memset(rl, 0, sizeof *rl);
	rl->rank = rank;
	rl->local = local;
	snprintf(rl->host, sizeof rl->host, "%s", host);
	snprintf(rl->job_id, sizeof rl->job_id, "%s", job_id);
	rl->log = open_append(run_dir, rank, "log", err, errlen);
	if (!rl->log)
		goto fail;
	rl->metrics = open_append(run_dir, rank, "metrics.jsonl", err, errlen);
	if (!rl->metrics)
		goto fail;
	return 0;
fail:
	rank_log_close(rl);
	return -1;
}

static void utc_now(char *buf, size_t len)
{
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + strlen(buf), len - strlen(buf), ".%03dZ", (int)(tv.tv_usec / 1000));
}

void rank_logf(struct rank_log *rl, const char *fmt, ...)
{
	char line[2048], ts[40];
	va_list ap;
	int n;

	utc_now(ts, sizeof ts);
	n = snprintf(line, sizeof line, "[%d/%d %s %s] ", rl->rank, rl->local, rl->host, ts);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	if (rl->log) {
		fputs(line, rl->log);
		fflush(rl->log);
	}
	if (rl->echo)
		fputs(line, stderr);
}

void rank_metric(struct rank_log *rl, int64_t step, const char *metric, double value,
		 const char *unit)
{
	struct timeval tv;
	json_t *v;
	char *text;

	if (!rl->metrics)
		return;
	gettimeofday(&tv, NULL);
	v = json_pack("{s:o, s:o, s:i, s:o, s:I, s:o, s:o, s:o}",
		      "ts", sj_number((double)tv.tv_sec + tv.tv_usec / 1e6),
		      "job_id", sj_text(rl->job_id), "rank", rl->rank, "host", sj_text(rl->host),
		      "step", (json_int_t)step, "metric", sj_text(metric), "value", sj_number(value),
		      "unit", sj_text(unit));
	text = v ? sj_compact(v) : NULL;
	json_decref(v);
	if (!text)
		return;
	fputs(text, rl->metrics);
	fputc('\n', rl->metrics);
	fflush(rl->metrics);
	free(text);
}

void rank_log_close(struct rank_log *rl)
{
	if (rl->log)
		fclose(rl->log);
	if (rl->metrics)
		fclose(rl->metrics);
	rl->log = rl->metrics = NULL;
}
