/* daemon/program/program_error.c - see program_error.h. */
#include "config.h"
#include "daemon/program/program_error.h"

#include "lib/io/io.h"
#include "lib/formats/stork_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stderr_tail_add(struct stderr_tail *t, const char *line)
{
	size_t len = strlen(line) + 1, cap = sizeof t->text - 1;

	if (len > cap) {
		line += len - cap;
		len = cap;
	}
	if (t->used + len > cap) {
		/* drop whole lines from the front until the new one fits */
		size_t drop = t->used + len - cap;
		char *nl = memchr(t->text + drop, '\n', t->used - drop);

		drop = nl ? (size_t)(nl - t->text) + 1 : t->used;
		memmove(t->text, t->text + drop, t->used - drop);
		t->used -= drop;
	}
	memcpy(t->text + t->used, line, len - 1);
	t->used += len - 1;
	t->text[t->used++] = '\n';
	t->text[t->used] = '\0';
}

/* Copy the line at p (up to its newline) into buf, without leading blanks. */
static void copy_line(const char *p, char *buf, size_t len)
{
	size_t n;

	p += strspn(p, " \t");
	n = strcspn(p, "\n");
	snprintf(buf, len, "%.*s", (int)n, p);
}

void program_error_from_traceback(const char *text, struct program_error *e)
{
	static const char start[] = "Traceback (most recent call last):";
	const char *tb = NULL, *p, *frame = NULL, *last = NULL;

	for (p = strstr(text, start); p; p = strstr(p + 1, start))
		tb = p;
	if (!tb)
		return;
	/* after the frames: the exception's line, the first that is not
	 * indented; a chained exception starts another traceback, which the
	 * search above already chose */
	for (p = strchr(tb, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
		const char *line = p + 1;

		if (!strncmp(line, "  File \"", 8) && !last)
			frame = line;
		else if (*line != ' ' && *line != '\t' && *line != '\n' && !last)
			last = line;
	}
	if (frame)
		copy_line(frame, e->frame, sizeof e->frame);
	if (last)
		copy_line(last, e->message, sizeof e->message);
	if (frame || last)
		e->source = "stderr";
}

int program_error_lost_peer(const struct program_error *e)
{
	static const char *const said[] = {
		"Connection closed by peer",           /* gloo */
		"Connection reset by peer",
		"Broken pipe",
		"remote process exited",               /* NCCL */
		"NCCL communicator was aborted",
		"DistNetworkError",                    /* torch.distributed's store */
	};

	for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
		if (strstr(e->message, said[i]))
			return 1;
	return 0;
}

/* The rest of the line after the last "[host:pid] KEY" in text, into buf. */
static int mpi_line(const char *text, const char *key, char *buf, size_t len)
{
	const char *p, *last = NULL;

	for (p = strstr(text, key); p; p = strstr(p + 1, key))
		last = p;
	if (!last)
		return 0;
	last += strlen(key);
	snprintf(buf, len, "%.*s", (int)strcspn(last, "\n"), last);
	return 1;
}

/*
 * Open MPI's report of a signal (its handler prints "*** Process received
 * signal ***", then "Signal: Segmentation fault (11)", "Signal code: ...",
 * "Failing at address: ..." and a backtrace): the signal and where, and
 * the backtrace's frame below the handler's as the frame.
 */
static void mpi_signal_report(const char *text, struct program_error *e)
{
	char sig[128], code[128] = "", addr[64] = "", frame[256] = "";

	if (!strstr(text, "*** Process received signal ***") ||
	    !mpi_line(text, "] Signal: ", sig, sizeof sig))
		return;
	mpi_line(text, "] Signal code: ", code, sizeof code);
	mpi_line(text, "] Failing at address: ", addr, sizeof addr);
	mpi_line(text, "] [ 1] ", frame, sizeof frame);
	snprintf(e->message, sizeof e->message, "%s%s%s%s%s", sig, code[0] ? ", " : "", code,
		 addr[0] ? " at " : "", addr);
	snprintf(e->frame, sizeof e->frame, "%s", frame);
	e->source = "stderr";
}

void program_error_from_tail(const struct stderr_tail *t, struct program_error *e)
{
	program_error_from_traceback(t->text, e);
	if (!e->source)
		mpi_signal_report(t->text, e);
}

/*
 * torch.distributed.elastic's error file: {"message": {"message": "Type:
 * text", "extraInfo": {"py_callstack": "Traceback ...", "timestamp": ...}}},
 * or a plain {"message": "..."} from a program that writes its own.
 */
void program_error_from_file(const char *path, struct program_error *e)
{
	char *text = file_text(path, 1 << 20), err[256];
	json_t *v = text ? sj_parse(text, strlen(text), path, err, sizeof err) : NULL;
	json_t *m = json_object_get(v, "message");
	const char *msg = json_string_value(json_is_object(m) ? json_object_get(m, "message") : m);
	const char *stack = json_string_value(
		json_object_get(json_object_get(m, "extraInfo"), "py_callstack"));

	if (msg) {
		struct program_error from_stack = { 0 };

		/* its first line: a C++ error's adds its own frames ("At: ...") */
		snprintf(e->message, sizeof e->message, "%.*s", (int)strcspn(msg, "\n"), msg);
		if (stack)
			program_error_from_traceback(stack, &from_stack);
		snprintf(e->frame, sizeof e->frame, "%s", from_stack.frame);
		e->source = "error_file";
	}
	json_decref(v);
	free(text);
}
