/*
 * daemon/engine/parallel/zero_paged.h - ZeRO-2 and ZeRO-3 on CPU ranks:
 * the gradients (2), and the parameters too (3), held whole only where
 * and while they are needed, on ZeRO-1's plan (zero.h).
 *
 * The arrays keep their full size in address space, so every kernel and
 * every reader (checkpoints, validation, the pipeline) uses them as
 * before; what a rank does not own is given back to the kernel page by
 * page (madvise MADV_DONTNEED: it reads as zeros and holds no memory)
 * when it is not needed:
 *
 *   zero 2  after a layer's backward pass of the last micro-batch, the
 *           layer's gradients are summed over the replicas (an all-reduce
 *           of its pieces) and all but this rank's part are given back;
 *           the embeddings and final LayerNorm follow after the pass.
 *   zero 3  also the parameters: a layer's are gathered from their owners
 *           (one broadcast per owner of each piece) before each of its
 *           passes, forward, backward and recomputation, and given back
 *           after; the update touches only the rank's part, and only the
 *           tensors of no layer (embeddings, final LayerNorm, LM head)
 *           are gathered back whole, as under ZeRO-1.
 *
 * The bits are ZeRO-1's: lib/comm's reductions give the same element
 * sums however a buffer is cut into calls (comm.h), the update is the
 * same AdamW over the same parts, and a gathered parameter is its owner's
 * copy. Gradients of a step with train.grad_accum > 1 are summed whole
 * until the last micro-batch, as ZeRO-1 sums them, so the saving of
 * zero 2 comes with that micro-batch.
 *
 * A layer gathered stays in its buffer until the update: the forward
 * pass's last layer is the backward pass's first, and a step's next
 * micro-batch starts with the layer the last one ended with. With
 * parallel.overlap a thread runs the collectives in the order the rank
 * hands them (comm_queue.h): the pass's next layer is gathered into a
 * second buffer while this one computes (only the layer the pass is sure
 * to need next, so nothing is in flight once a pass ends), and a layer's
 * gradients are summed while the layer below computes. The order of the
 * collectives is the rank's, so the bits do not change.
 *
 * What stays whole: the tensors of no layer (for GPT-2 small the token
 * embedding, 31% of the parameters), one layer's parameters and
 * gradients in flight (two with overlap), and the pages at a part's two
 * ends.
 */
#ifndef STORK_DAEMON_ZERO_PAGED_H
#define STORK_DAEMON_ZERO_PAGED_H

#include <stddef.h>

#include "daemon/engine/parallel/zero.h"

struct comm;
struct comm_queue;
struct comm_trace;

struct zero_paged {
	const struct zero_plan *z;
	struct comm *dp;             /* the replicas; NULL: one replica, nothing to give back */
	struct gpt2 *m;              /* the model whose hooks these are */
	struct comm_queue *q;        /* parallel.overlap: the thread that runs the collectives; NULL: the rank */
	int level;                   /* 2 or 3 */
	int failed;                  /* a collective in a hook failed: its COMM_E* code; 0 */
	int gathered;                /* zero 3: every layer's parameters are whole (a checkpoint) */
	int grad_buffer;             /* train.grad_accum 1: a layer's gradients go through gbuf */
	int nbuf;                    /* one-layer buffers of each kind: 2 with the thread (one in use, one filling) */
	size_t layer_n;              /* floats of one layer's parameters */
	float *pbuf[2], *gbuf[2];    /* one layer's parameters (zero 3) and gradients (grad_buffer) */
	float *pview[2][GPT2_NUM_TENSORS], *gview[2][GPT2_NUM_TENSORS]; /* their tensors */
	int held[2];                 /* the layer pbuf[b] holds or is being gathered into; -1 */
	long pticket[2], gticket[2]; /* the job filling pbuf[b]; the last job reading gbuf[b] */
	int cur, gcur;               /* the buffers of the layer last fetched */
	double busy_s, wait_s;       /* the step's collectives: their time, the rank's wait for them */
};

/*
 * Set zp up (level 2 or 3, plan z, communicator dp, train.grad_accum,
 * parallel.overlap) for model m: its one-layer buffers, its hooks in m's
 * passes, and (zero 3) every layer's parameters but this rank's parts
 * given back now. With overlap a thread of the rank's (comm_queue.h) runs
 * the layers' collectives: the next layer of a pass is gathered while
 * this one computes, and a layer's gradients are summed while the
 * backward pass computes the layer below; its calls are recorded in trace
 * (NULL: none). 0, or -1 (memory or thread).
 */
int zero_paged_attach(struct zero_paged *zp, const struct zero_plan *z, struct comm *dp,
		      int level, int grad_accum, int overlap, struct comm_trace *trace,
		      struct gpt2 *m);

/* The thread, the buffers, and m's hooks. */
void zero_paged_free(struct zero_paged *zp, struct gpt2 *m);

/*
 * The layer hook of the backward pass of a step's last micro-batch
 * (gpt2_set_layer_hook, pipeline_set_layer_hook; arg: the zero_paged):
 * the layer's final gradients summed over the replicas, and all but this
 * rank's part given back.
 */
void zero_paged_layer_done(void *arg, struct gpt2 *m, int layer);

/* Zero the gradients for a step: this rank's parts and the tensors of no layer; the rest given back. 0 or -2 (memory). */
int zero_paged_zero_grad(struct zero_paged *zp, struct gpt2 *m);

/*
 * After the last backward pass: the tensors of no layer summed over the
 * replicas, and this rank's parts scaled to the mean (what
 * zero_reduce_scatter leaves). 0 or the first COMM_E* of the step.
 */
int zero_paged_reduce_rest(struct zero_paged *zp, struct gpt2 *m);

/*
 * The step's collectives so far (the layers' gathers and sums, the rest's
 * sum): the seconds they ran, and those the rank waited for them (all of
 * them without overlap); then zero again.
 */
void zero_paged_times(struct zero_paged *zp, double *busy_s, double *wait_s);

/* After the update: zero 2 gathers every part back (zero_allgather), zero 3 the tensors of no layer. */
int zero_paged_after_update(struct zero_paged *zp, struct gpt2 *m);

/* zero 3: every layer's parameters whole (a checkpoint's writer reads them), or given back. */
int zero_paged_gather_all(struct zero_paged *zp, struct gpt2 *m);
void zero_paged_release_all(struct zero_paged *zp, struct gpt2 *m);

/*
 * What a rank of plan z keeps of a shard's parameters and gradients
 * (sizes, over `layers` layers) at zero `level` with `micro` micro-batches
 * a step, with parallel.overlap or not, in floats: the tensors of no
 * layer, its parts of the layers and a one-layer buffer, two with
 * overlap (the whole where the level keeps it whole, or the gradients
 * sum in place over micro-batches).
 */
void zero_paged_floats(const struct zero_plan *z, const size_t sizes[GPT2_NUM_TENSORS],
		       int layers, int level, int micro, int overlap, size_t *params, size_t *grads);

#endif
