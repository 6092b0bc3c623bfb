/*
 * daemon/engine/checkpoint/ckpt_writer.h - one rank's checkpoint written by a thread of its
 * own while the rank trains on (checkpoint.async).
 *
 * The writer first copies the rank's parameters and moments into a buffer
 * of the caller's, then writes from the copy. The rank's next optimizer
 * update is what changes them, so the rank waits for the copy (not the
 * write) before that update: on a CPU rank the copy runs beside the next
 * step's forward and backward pass, which only read the parameters, and
 * costs the training loop nothing when it is shorter than them. One write
 * at a time; what it wrote and whether it succeeded come back at the join.
 */
#ifndef STORK_DAEMON_CKPT_WRITER_H
#define STORK_DAEMON_CKPT_WRITER_H

#include <stddef.h>

#define CKPT_WRITER_MAX_COPIES 3

/* A range of live floats the writer copies before it writes. */
struct ckpt_copy {
	const float *src;
	size_t n;
};

/*
 * The write itself, on the writer's thread, from the copy (buf): 0, or -1
 * with a message in err.
 */
typedef int (*ckpt_write_fn)(void *arg, float *buf, char *err, size_t errlen);

struct ckpt_writer;

/* A writer with no write in flight, or NULL when out of memory. */
struct ckpt_writer *ckpt_writer_new(void);

/*
 * Start the thread: copy ncopy ranges one after the other into buf, then
 * write(arg, buf). The ranges may be none (the caller filled buf). 0, or -1
 * (no thread; nothing started) with errno set.
 */
int ckpt_writer_start(struct ckpt_writer *w, float *buf, const struct ckpt_copy *copies,
		      int ncopy, ckpt_write_fn write, void *arg);

/* Block until the copy of the write in flight is made (at once when none). */
void ckpt_writer_wait_copied(struct ckpt_writer *w);

/* Whether a write was started and has not finished yet. */
int ckpt_writer_busy(struct ckpt_writer *w);

/* Whether a write was started and not joined yet. */
int ckpt_writer_started(const struct ckpt_writer *w);

/*
 * Wait for the write in flight and take its result: 0, or -1 with the
 * write's message in err; *seconds: the copy and the write, on the thread.
 * 0 at once when none is in flight.
 */
int ckpt_writer_join(struct ckpt_writer *w, double *seconds, char *err, size_t errlen);

/* Join what is in flight and release the writer (NULL: nothing). */
void ckpt_writer_free(struct ckpt_writer *w);

#endif
