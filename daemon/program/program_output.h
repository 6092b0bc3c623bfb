/*
 * daemon/program/program_output.h - a rank process's stdout and stderr, line by
 * line, into its log (logs/rank-NNN.log, each line with the rank log's
 * "[rank/local host time] " prefix) and, when program.tee says so, onto
 * storkd's own output (the launcher's, hence the job's).
 *
 * Teed stderr lines wait hold_s seconds before they are written (a failure's
 * traceback is then judged before it shows: the first failure's line comes
 * before the tracebacks of the ranks that only lost it as a peer); stdout
 * is written at once.
 *
 * A line longer than the buffer is cut into pieces of the buffer's size;
 * the last piece of a stream without a final newline is written at its end.
 */
#ifndef STORK_DAEMON_PROGRAM_OUTPUT_H
#define STORK_DAEMON_PROGRAM_OUTPUT_H

#include "daemon/program/program_error.h"
#include "daemon/node/rank_log.h"

#include <stddef.h>

#define OUTPUT_LINE_MAX 8192

struct output_stream {
	int fd;                 /* the pipe's read end; -1 once closed */
	int is_stderr;
	size_t used;
	char buf[OUTPUT_LINE_MAX + 1];
};

struct held_line {
	double at;              /* wall clock: when it was read */
	int is_stderr;
	struct held_line *next;
	char text[];
};

struct rank_output {
	struct output_stream out, err;
	struct rank_log *log;
	struct stderr_tail *tail; /* stderr's last lines (a failure's traceback) */
	int tee;                  /* also on storkd's stdout/stderr */
	int tee_prefix;           /* ... with "[rank N] " before each line */
	double hold_s;            /* how long teed stderr lines wait; 0: not at all */
	struct held_line *held, **held_end; /* oldest first */
	int nheld;
};

/* Read what fd has now (it is readable); 0, or -1 once the stream ended
 * (it is then closed, its last piece written). */
int output_stream_read(struct rank_output *o, struct output_stream *s);

/* Write the held lines read before the wall-clock time `before` (all: INFINITY). */
void output_release(struct rank_output *o, double before);

/* Write what is left (held lines too) and close both streams. */
void rank_output_close(struct rank_output *o);

#endif
