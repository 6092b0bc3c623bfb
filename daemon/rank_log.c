/*
 * daemon/rank_log.c - see rank_log.h. Every line is formatted whole and
 * written with one fputs + fflush, so a crash loses at most the line being
 * written and concurrent readers (tail -f) see whole lines.
 */
#include "config.h"
#include "daemon/rank_log.h"

#include <errno.h>
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
	json_init(&rl->line, JSON_COMPACT);
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

	if (!rl->metrics)
		return;
	gettimeofday(&tv, NULL);
	json_reset(&rl->line);
	json_begin_object(&rl->line);
	json_key_double(&rl->line, "ts", (double)tv.tv_sec + tv.tv_usec / 1e6);
	json_key_string(&rl->line, "job_id", rl->job_id);
	json_key_int(&rl->line, "rank", rl->rank);
	json_key_string(&rl->line, "host", rl->host);
	json_key_int(&rl->line, "step", step);
	json_key_string(&rl->line, "metric", metric);
	json_key_double(&rl->line, "value", value);
	json_key_string(&rl->line, "unit", unit);
	json_end_object(&rl->line);
	if (json_error(&rl->line))
		return;
	fputs(json_str(&rl->line), rl->metrics);
	fputc('\n', rl->metrics);
	fflush(rl->metrics);
}

void rank_log_close(struct rank_log *rl)
{
	if (rl->log)
		fclose(rl->log);
	if (rl->metrics)
		fclose(rl->metrics);
	rl->log = rl->metrics = NULL;
	json_free(&rl->line);
}
