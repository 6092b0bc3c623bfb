/*
 * lib/log.h - one logging path for the launcher and the daemon.
 *
 * Every line carries a prefix chosen once per process ("stork", "storkd")
 * and goes to stderr. Messages say what failed and what to do next. (Rank
 * threads write their own files, daemon/node/rank_log.h; the plugin logs with
 * Slurm's slurm_error.)
 */
#ifndef STORK_LOG_H
#define STORK_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum stork_log_level {
	STORK_LOG_ERROR = 0,
	STORK_LOG_WARN = 1,
	STORK_LOG_INFO = 2,
	STORK_LOG_DEBUG = 3,
};

/* Name used in the prefix ("stork", "storkd") and the most verbose level shown. */
void stork_log_init(const char *progname, enum stork_log_level level);

void stork_log(enum stork_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define stork_error(...) stork_log(STORK_LOG_ERROR, __VA_ARGS__)
#define stork_warn(...) stork_log(STORK_LOG_WARN, __VA_ARGS__)
#define stork_info(...) stork_log(STORK_LOG_INFO, __VA_ARGS__)
#define stork_debug(...) stork_log(STORK_LOG_DEBUG, __VA_ARGS__)

#endif
