/*
 * daemon/engine/parallel/grad_sync.h - the data-parallel gradient all-reduce, overlapped
 * with the backward pass (parallel.overlap).
 *
 * Without overlap a rank runs its whole backward pass, then all-reduces
 * every gradient: the network (or the other ranks' memory) idles during
 * the backward pass and the cores during the all-reduce. With overlap the
 * gradients of each layer are handed to a communication thread as soon as
 * the backward pass has finished that layer (the layers run backwards, so
 * the last layer's gradients are ready first), and the thread all-reduces
 * them while the rank computes the layers below. After the backward pass
 * the rank hands over what is left (embeddings, final LayerNorm) and waits
 * only for what is still in flight.
 *
 * The losses do not change by a bit: lib/comm's reductions give the same
 * bits however a buffer is cut into calls (comm.h), and every rank hands
 * the same pieces in the same order, so the collectives match. NCCL's
 * reductions are the exception: their order depends on an element's place
 * in the buffer and on the count, so GPU ranks on NCCL train with and
 * without overlap to rounding, not to the bit (the host-staged GPU path
 * keeps comm.h's order).
 *
 * Ownership: while pieces are in flight the communication thread is the
 * only user of the data-parallel communicator (a struct comm belongs to
 * one thread at a time); the rank uses it again after grad_sync_wait. The
 * thread is created by the rank thread and so runs on the rank's cores.
 *
 * GPU ranks: a piece must be final when it is handed over, so the rank
 * waits for its kernels first (ops->sync: the GPU finishes the layer
 * while the rank launches nothing, a gap of one launch per layer); the
 * thread makes the rank's GPU current (thread_init) and reduces on its
 * own stream, through NCCL or host staging (lib/comm/device.c).
 */
#ifndef STORK_DAEMON_GRAD_SYNC_H
#define STORK_DAEMON_GRAD_SYNC_H

#include <stddef.h>

struct comm;
struct comm_trace;
struct gpt2;
struct grad_sync;
struct ops;

/*
 * Start the communication thread for communicator dp, with room for up to
 * max_pieces pieces per step; the gradients live in o's memory (o makes
 * the bucket the small pieces are packed into, and copies). The thread
 * first calls thread_init(arg) when not NULL (a GPU rank's: make its
 * device current); a non-zero return fails every piece with COMM_ESYS.
 * Returns 0, or -1 (memory or thread: errno).
 */
int grad_sync_start(struct grad_sync **out, struct comm *dp, const struct ops *o,
		    size_t max_pieces, int (*thread_init)(void *arg), void *arg);

/* Record the thread's collectives in t from its next group on (a hang's report reads it). */
void grad_sync_trace(struct grad_sync *g, struct comm_trace *t);

/*
 * Hand a group of k pieces (n[i] floats at p[i], final already) to the
 * thread: each all-reduced (summed) in place over dp, in order. The small
 * pieces of a group are reduced together in one call, so a group should
 * be what becomes final at once (a layer's tensors).
 */
void grad_sync_push(struct grad_sync *g, float *const *p, const size_t *n, int k);

/*
 * The model's layer hook (gpt2_set_layer_hook, arg: the grad_sync): the
 * backward pass finished layer l, so its tensors go as one group, once
 * the backend's kernels are done (ops->sync: a GPU's stream).
 */
void grad_sync_layer_done(void *grad_sync, struct gpt2 *m, int l);

/* After the backward pass: the tensors of no layer (embeddings, final LayerNorm), as one group. */
void grad_sync_push_rest(struct grad_sync *g, struct gpt2 *m);

/*
 * Wait until every piece handed over is reduced. *busy_s is the time the
 * thread spent reducing them since the last wait, *wait_s the time this
 * call waited (the part of the communication the backward pass did not
 * hide). Returns 0, or the first COMM_E* code of a failed reduction (the
 * pieces after it were skipped).
 */
int grad_sync_wait(struct grad_sync *g, double *busy_s, double *wait_s);

/* Stop the thread (after grad_sync_wait) and free everything. NULL is fine. */
void grad_sync_stop(struct grad_sync *g);

#endif
