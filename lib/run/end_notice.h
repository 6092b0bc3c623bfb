/*
 * lib/run/end_notice.h - how one node tells the others, through the run
 * directory every node shares, that the program's ranks must end and why:
 * the first failure of a rank ("rank 3 on n2 exited with 1: RuntimeError:
 * ...") or a hang (with the wall-clock time at which every node asks its
 * ranks for their stacks).
 *
 * The first notice of an attempt wins: it is written whole under a name of
 * its own and linked into place, so a reader never sees half of it and a
 * second node learns that it came second (its failure is then a
 * consequence of the first, and its hang the same hang). Launcher 0
 * removes the attempt's notice once every node has written its record.
 */
#ifndef STORK_END_NOTICE_H
#define STORK_END_NOTICE_H

#include <stddef.h>

enum end_notice_kind {
	END_NOTICE_FAILED = 1, /* a rank of the program failed first */
	END_NOTICE_HANG,       /* a rank stopped beating */
};

struct end_notice {
	enum end_notice_kind kind;
	double at;             /* a hang: when every node asks for the stacks (wall clock) */
	char message[1024];    /* what happened, as the node that saw it says it */
};

/* RUN_DIR/logs/.end.JOB.R.A: the notice of the job's requeue R, attempt A. 0 or -1. */
int end_notice_path(char *path, size_t len, const char *run_dir, const char *job_id,
		    int restart_count, int attempt);

/* Post n at path: 1 when it is the first, 0 when another notice came before it
 * (*first then holds that one), -1 with errno. */
int end_notice_post(const char *path, const struct end_notice *n, struct end_notice *first);

/* The notice at path: 1 and *n, 0 when there is none (or it cannot be read). */
int end_notice_read(const char *path, struct end_notice *n);

/* Remove every attempt's notice of run_dir (launcher 0, at an attempt's end). */
void end_notice_remove_all(const char *run_dir);

#endif
