/*
 * lib/log.h - one logging path for the launcher, the daemon and the plugin.
 *
 * Every line carries a prefix chosen once per process (or per rank thread),
 * e.g. "stork" or "[3/1 n2 2026-11-22T10:00:00Z]", and goes to stderr and,
 * when set, to a log file. Messages say what failed and what to do next.
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

/* Also append every line to this file (NULL: stop). The caller owns the FILE. */
void stork_log_set_file(FILE *f);

void stork_log(enum stork_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void stork_vlog(enum stork_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#define stork_error(...) stork_log(STORK_LOG_ERROR, __VA_ARGS__)
#define stork_warn(...) stork_log(STORK_LOG_WARN, __VA_ARGS__)
#define stork_info(...) stork_log(STORK_LOG_INFO, __VA_ARGS__)
#define stork_debug(...) stork_log(STORK_LOG_DEBUG, __VA_ARGS__)

#endif
