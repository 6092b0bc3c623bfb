/*
 * daemon/node/rank_log.c - see rank_log.h. Every line is formatted whole and
 * written with one fputs + fflush, so a crash loses at most the line being
 * written and concurrent readers (tail -f) see whole lines.
 */
#include "config.h"
#include "daemon/node/rank_log.h"

#include "lib/formats/stork_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static FILE *open_append(const char *run_dir, int rank, const char *suffix, char *path,
			 size_t pathlen, char *err, size_t errlen)
{
	FILE *f = NULL;
	int fd;

	snprintf(path, pathlen, "%s/logs/rank-%03d.%s", run_dir, rank, suffix);
	/* never through a link planted in its place */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 && !(f = fdopen(fd, "a")))
		close(fd);
	if (!f)
		snprintf(err, errlen, "cannot open %s: %s", path,
			 errno == ELOOP ? "a symbolic link: refused" : strerror(errno));
	return f;
}

int rank_log_open(struct rank_log *rl, const char *run_dir, int rank, int local,
		  const char *host, const char *job_id, char *err, size_t errlen)
{
	struct stat st;

	memset(rl, 0, sizeof *rl);
	rl->rank = rank;
	rl->local = local;
	snprintf(rl->host, sizeof rl->host, "%s", host);
	snprintf(rl->job_id, sizeof rl->job_id, "%s", job_id);
	rl->log = open_append(run_dir, rank, "log", rl->log_path, sizeof rl->log_path, err, errlen);
	if (!rl->log)
		return -1;
	/* made at the first metric (open_metrics); one already there (a requeue's,
	 * or something planted in its place) is judged now */
	snprintf(rl->metrics_path, sizeof rl->metrics_path, "%s/logs/rank-%03d.metrics.jsonl",
		 run_dir, rank);
	if (lstat(rl->metrics_path, &st) == 0 &&
	    !(rl->metrics = open_append(run_dir, rank, "metrics.jsonl", rl->metrics_path,
					sizeof rl->metrics_path, err, errlen))) {
		rank_log_close(rl);
		return -1;
	}
	return 0;
}

/*
 * Write one whole line to f and flush it. A failure (a full disk, a quota)
 * loses the line: the first one is said on stderr, where Slurm's output
 * file still takes it, naming the file; the run goes on.
 */
static void put_line(struct rank_log *rl, FILE *f, const char *path, const char *line,
		     const char *end)
{
	int failed = fputs(line, f) == EOF || fputs(end, f) == EOF || fflush(f) == EOF;

	if (failed && !rl->lost++)
		fprintf(stderr, "storkd: rank %d: cannot write %s: %s; its lines are being lost\n",
			rl->rank, path, strerror(errno));
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
	if (rl->log)
		put_line(rl, rl->log, rl->log_path, line, "\n");
	if (rl->echo)
		fprintf(stderr, "%s\n", line);
}

void rank_metric(struct rank_log *rl, int64_t step, const char *metric, double value,
		 const char *unit)
{
	rank_metric_with(rl, step, metric, value, unit, NULL);
}

/* The metrics file, at the first metric; a failure is said once (stderr and
 * the rank's log), and the metrics are then lost, not the run. */
static int open_metrics(struct rank_log *rl)
{
	char err[4300];
	int fd;

	if (rl->metrics_failed)
		return -1;
	/* never through a link planted in its place */
	fd = open(rl->metrics_path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 && !(rl->metrics = fdopen(fd, "a")))
		close(fd);
	if (rl->metrics)
		return 0;
	rl->metrics_failed = 1;
	snprintf(err, sizeof err, "cannot open %s: %s; this rank's metrics are lost",
		 rl->metrics_path, errno == ELOOP ? "a symbolic link: refused" : strerror(errno));
	fprintf(stderr, "storkd: rank %d: %s\n", rl->rank, err);
	if (rl->log)
		put_line(rl, rl->log, rl->log_path, err, "\n");
	return -1;
}

void rank_metric_with(struct rank_log *rl, int64_t step, const char *metric, double value,
		      const char *unit, json_t *more)
{
	struct timeval tv;
	json_t *v = NULL;
	char *text;

	if (!rl->metrics && open_metrics(rl) < 0)
		goto out;
	gettimeofday(&tv, NULL);
	v = json_pack("{s:o, s:o, s:i, s:o, s:I, s:o, s:o, s:o, s:i, s:i}",
		      "ts", sj_number((double)tv.tv_sec + tv.tv_usec / 1e6),
		      "job_id", sj_text(rl->job_id), "rank", rl->rank, "host", sj_text(rl->host),
		      "step", (json_int_t)step, "metric", sj_text(metric), "value", sj_number(value),
		      "unit", sj_text(unit), "requeue", rl->requeue, "attempt", rl->attempt);
	if (v && more && json_object_update(v, more) < 0)
		goto out;
	text = v ? sj_compact(v) : NULL;
	if (text)
		put_line(rl, rl->metrics, rl->metrics_path, text, "\n");
	free(text);
out:
	json_decref(v);
	json_decref(more);
}

int rank_log_close(struct rank_log *rl)
{
	if (rl->log && fclose(rl->log) == EOF && !rl->lost++)
		fprintf(stderr, "storkd: rank %d: cannot write %s: %s\n", rl->rank, rl->log_path,
			strerror(errno));
	if (rl->metrics && fclose(rl->metrics) == EOF && !rl->lost++)
		fprintf(stderr, "storkd: rank %d: cannot write %s: %s\n", rl->rank,
			rl->metrics_path, strerror(errno));
	rl->log = rl->metrics = NULL;
	return rl->lost ? -1 : 0;
}
