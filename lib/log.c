/*
 * lib/log.c - see log.h. Lines are formatted whole into a buffer and written
 * with one call, so concurrent rank threads never interleave inside a line.
 */
#include "config.h"
#include "lib/log.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static char log_progname[64] = "stork";
static enum stork_log_level log_level = STORK_LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "error", "warning", "", "debug" };

void stork_log_init(const char *progname, enum stork_log_level level)
{
	snprintf(log_progname, sizeof log_progname, "%s", progname);
	log_level = level;
}

static void __attribute__((format(printf, 2, 0)))
stork_vlog(enum stork_log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	int n;

	if (level > log_level)
		return;
	if (level == STORK_LOG_INFO)
		n = snprintf(line, sizeof line, "%s: ", log_progname);
	else
		n = snprintf(line, sizeof line, "%s: %s: ", log_progname, level_names[level]);
	n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	if (n >= (int)sizeof line - 1)
		n = (int)sizeof line - 2;
	if (line[n - 1] != '\n')
		line[n++] = '\n';
	line[n] = '\0';

	pthread_mutex_lock(&log_lock);
	fputs(line, stderr);
	pthread_mutex_unlock(&log_lock);
}

void stork_log(enum stork_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	stork_vlog(level, fmt, ap);
	va_end(ap);
}
