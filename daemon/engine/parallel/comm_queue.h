/*
 * daemon/engine/parallel/comm_queue.h - collectives run in order by a
 * thread of the rank's, so that they overlap its compute (parallel.overlap
 * under parallel.zero 2 and 3: a layer's parameters gathered before the
 * rank needs them, a layer's gradients summed while it computes the next).
 *
 * The rank hands jobs (a function and its arguments) to the queue and
 * goes on; one thread runs them one at a time in the order handed. Ranks
 * that hand the same jobs in the same order run the same collectives in
 * the same order, whatever the timing, so the bits are those of running
 * each job where it was handed. Each job has a ticket; the rank waits for
 * a ticket before it uses what that job makes or before it reuses what
 * the job reads.
 *
 * Ownership: while jobs are queued the thread is the only user of the
 * communicators they use (a struct comm belongs to one thread at a time);
 * the rank uses them again after comm_queue_drain. The thread is created by
 * the rank thread and so runs on the rank's cores.
 *
 * Failure: a job returns 0 or a COMM_E* code. After a failure the thread
 * runs none of the jobs behind it, and every wait returns that failure.
 */
#ifndef STORK_DAEMON_COMM_QUEUE_H
#define STORK_DAEMON_COMM_QUEUE_H

struct comm_queue;
struct comm_trace;

typedef int (*comm_job_fn)(void *arg, int a, int b);

/*
 * Start the thread; its collectives are recorded in trace (NULL: none),
 * where a hang's report finds them. 0, or -1 (memory or thread: errno).
 */
int comm_queue_start(struct comm_queue **out, struct comm_trace *trace);

/* Hand fn(arg, a, b) to the thread; its ticket (from 1, in order). Waits while 16 jobs are queued. */
long comm_queue_push(struct comm_queue *q, comm_job_fn fn, void *arg, int a, int b);

/* Wait until the job of this ticket has run (and every one before it): 0 or the first failure. */
int comm_queue_wait(struct comm_queue *q, long ticket);

/* Wait until every job handed has run: 0 or the first failure. */
int comm_queue_drain(struct comm_queue *q);

/* The seconds the thread spent running jobs since the last call. */
double comm_queue_busy(struct comm_queue *q);

/* Run what is queued, end the thread and free q (NULL: nothing). */
void comm_queue_stop(struct comm_queue *q);

#endif
