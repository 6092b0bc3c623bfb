/*
 * lib/run/metrics_file.h - reading logs/rank-NNN.metrics.jsonl back: the
 * launcher (a dead node's last step), the rollup into metrics/summary.csv,
 * stork report and stork bench launch all go through here.
 *
 * Each line is one compact JSON object written by storkd (stork(1) FILES).
 * A long run has millions, most of them metrics a reader does not want:
 * metrics_line_is() picks lines by metric name without parsing them.
 */
#ifndef STORK_METRICS_FILE_H
#define STORK_METRICS_FILE_H

#include <stddef.h>

/*
 * Call each(line, arg) for every line of the metrics file at path (a
 * regular file only: lib/io/io.h's fopen_regular), newline included. Stops
 * at the first non-zero return of each and returns it; 0 when every line
 * was seen; -1 (errno set) when the file cannot be opened.
 */
int metrics_file_lines(const char *path, int (*each)(const char *line, void *arg), void *arg);

/*
 * Follow a metrics file another process is writing: call each(line, len,
 * arg) for every whole line between *read_to and the file's size now
 * (line without its newline, NUL-terminated, writable), and move *read_to
 * past them. A line still being written waits for the next call; one
 * longer than 64 KiB is no metric and is skipped. Only a regular file is
 * read, and only to its size at the look (a device in its place would
 * read forever). Stops at the first non-zero return of each and returns
 * it (*read_to past that line); 0; -1 when the file cannot be opened or
 * is not a regular file.
 */
int metrics_file_follow(const char *path, long long *read_to,
			int (*each)(char *line, size_t len, void *arg), void *arg);

/* The "step" of the file's last line that has one; -1 when none (or no file). */
long long metrics_file_last_step(const char *path);

/* The "value" of the file's last line of metric; none when there is none (or no file). */
double metrics_file_last_value(const char *path, const char *metric, double none);

/* Whether line is a metric named name ("metric":"NAME", blanks allowed around the colon), unparsed. */
int metrics_line_is(const char *line, const char *name);

#endif
