/*
 * daemon/program/program_error.h - what a failed rank of the user's program said
 * before it died, for exit_info.json: the error's message and the last
 * frame of its traceback.
 *
 * Two sources, the first that has it wins: TORCHELASTIC_ERROR_FILE, the
 * JSON PyTorch's @record (torch.distributed.elastic) writes for an
 * uncaught exception, and the tail of the rank's stderr, where Python
 * prints "Traceback (most recent call last):", the frames ('  File
 * "train.py", line 40, in main') and the exception's line last.
 */
#ifndef STORK_DAEMON_PROGRAM_ERROR_H
#define STORK_DAEMON_PROGRAM_ERROR_H

#include <stddef.h>

struct program_error {
	char message[512];  /* "RuntimeError: boom", "" when unknown */
	char frame[512];    /* 'File "train.py", line 40, in main', "" when unknown */
	const char *source; /* "error_file", "stderr" or NULL */
};

/* The last lines a rank wrote on stderr, kept for program_error_from_tail. */
struct stderr_tail {
	char text[16384];   /* whole lines, oldest dropped first */
	size_t used;
};

void stderr_tail_add(struct stderr_tail *t, const char *line);

/* From the error file at path (an absent or foreign file leaves e empty). */
void program_error_from_file(const char *path, struct program_error *e);

/* From the last Python traceback in the tail, else Open MPI's report of a
 * signal (a segfault's), if any. */
void program_error_from_tail(const struct stderr_tail *t, struct program_error *e);

/*
 * Whether what it said is a collective's complaint that another rank went
 * away (gloo's "Connection closed by peer", NCCL's "remote process
 * exited"): a consequence of another rank's failure, most often.
 */
int program_error_lost_peer(const struct program_error *e);

/* From the traceback text itself (the error file's py_callstack, or a tail). */
void program_error_from_traceback(const char *text, struct program_error *e);

#endif
