/* daemon/program/program_output.c - see program_output.h. */
#include "config.h"
#include "daemon/program/program_output.h"

#include "lib/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The most lines held: a program that floods stderr is written late, not held. */
#define HELD_MAX 4096

static void tee_line(const struct rank_output *o, int is_stderr, const char *line)
{
	FILE *f = is_stderr ? stderr : stdout;

	if (o->tee_prefix)
		fprintf(f, "[rank %d] %s\n", o->log->rank, line);
	else
		fprintf(f, "%s\n", line);
	fflush(f);
}

static int hold(struct rank_output *o, int is_stderr, const char *line)
{
	size_t len = strlen(line) + 1;
	struct held_line *h;

	if (o->nheld >= HELD_MAX)
		output_release(o, o->held->at + 1e-9);
	if (!(h = malloc(sizeof *h + len)))
		return -1;
	*h = (struct held_line){ .at = clock_wall(), .is_stderr = is_stderr };
	memcpy(h->text, line, len);
	if (!o->held_end)
		o->held_end = &o->held;
	*o->held_end = h;
	o->held_end = &h->next;
	o->nheld++;
	return 0;
}

void output_release(struct rank_output *o, double before)
{
	while (o->held && o->held->at < before) {
		struct held_line *h = o->held;

		tee_line(o, h->is_stderr, h->text);
		o->held = h->next;
		o->nheld--;
		free(h);
	}
	if (!o->held)
		o->held_end = &o->held;
}

static void emit(struct rank_output *o, const struct output_stream *s, const char *line)
{
	rank_logf(o->log, "%s", line);
	if (s->is_stderr)
		stderr_tail_add(o->tail, line);
	if (!o->tee)
		return;
	if (!(s->is_stderr && o->hold_s > 0 && hold(o, 1, line) == 0))
		tee_line(o, s->is_stderr, line);
}

/* Every whole line in the buffer, and a full buffer as one piece. */
static void emit_lines(struct rank_output *o, struct output_stream *s, int all)
{
	char *start = s->buf, *nl;

	s->buf[s->used] = '\0';
	while ((nl = memchr(start, '\n', s->used - (size_t)(start - s->buf)))) {
		*nl = '\0';
		emit(o, s, start);
		start = nl + 1;
	}
	s->used -= (size_t)(start - s->buf);
	memmove(s->buf, start, s->used);
	if (s->used && (all || s->used == OUTPUT_LINE_MAX)) {
		s->buf[s->used] = '\0';
		emit(o, s, s->buf);
		s->used = 0;
	}
}

static void stream_close(struct rank_output *o, struct output_stream *s)
{
	if (s->fd < 0)
		return;
	emit_lines(o, s, 1);
	close(s->fd);
	s->fd = -1;
}

int output_stream_read(struct rank_output *o, struct output_stream *s)
{
	ssize_t n;

	do
		n = read(s->fd, s->buf + s->used, OUTPUT_LINE_MAX - s->used);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0) {
		stream_close(o, s);
		return -1;
	}
	s->used += (size_t)n;
	emit_lines(o, s, 0);
	return 0;
}

void rank_output_close(struct rank_output *o)
{
	stream_close(o, &o->out);
	stream_close(o, &o->err);
	output_release(o, INFINITY);
}
