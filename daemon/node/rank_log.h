/*
 * daemon/node/rank_log.h - a rank's log and metrics files in the run directory.
 *
 *   logs/rank-NNN.log            lines prefixed "[rank/local host time] "
 *   logs/rank-NNN.metrics.jsonl  {"ts","job_id","rank","host","step","metric","value","unit"}
 *
 * Both are opened for appending, so a requeued run continues the same files;
 * the metrics file at the first metric (a program that logs none, and whose
 * daemon has none to log, leaves none). One rank_log belongs to one rank
 * thread; nothing here is shared.
 */
#ifndef STORK_DAEMON_RANK_LOG_H
#define STORK_DAEMON_RANK_LOG_H

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>


struct rank_log {
	FILE *log;
	FILE *metrics;
	int rank, local;
	char host[64];
	char job_id[32];
	int requeue, attempt; /* which run of the job each metric line comes from */
	int echo;          /* also write log lines to stderr */
	char log_path[4096], metrics_path[4096];
	int lost;          /* a write failed (full disk...): said once on stderr */
	int metrics_failed; /* the metrics file could not be opened: said once */
};

/* Open (append) the rank's files under run_dir/logs. Returns 0, or -1 with a
 * message naming the file. */
int rank_log_open(struct rank_log *rl, const char *run_dir, int rank, int local,
		  const char *host, const char *job_id, char *err, size_t errlen);

/* One prefixed line in the rank's log (and on stderr when echo is set). */
void rank_logf(struct rank_log *rl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One metrics line; unit may be "". */
void rank_metric(struct rank_log *rl, int64_t step, const char *metric, double value,
		 const char *unit);

/*
 * The same with the members of the object more after the usual fields (an
 * event's details: a loss spike's action, loss and z-scores); more may be
 * NULL, and its reference is taken either way.
 */
void rank_metric_with(struct rank_log *rl, int64_t step, const char *metric, double value,
		      const char *unit, json_t *more);

/* Close both files; -1 when any line was lost on the way (said on stderr). */
int rank_log_close(struct rank_log *rl);

#endif
