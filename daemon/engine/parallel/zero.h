/*
 * daemon/engine/parallel/zero.h - ZeRO-1: the optimizer state sharded over the D replicas.
 *
 * Each of the D data-parallel ranks of a model shard owns 1/D of its
 * parameters: gradients are reduce-scattered (each rank receives the sum
 * of its part only), AdamW runs on that part with moments for that part
 * only, and the updated parameters are gathered back so every replica
 * holds all of them. Optimizer memory per rank falls by D; the traffic is
 * that of an all-reduce (a reduce-scatter plus an all-gather).
 *
 * The shard's parameters are cut in segments that are partitioned
 * separately: the token embedding, then everything else. The first and
 * last pipeline stages both hold the tied embedding; with its own segment
 * their replicas own the same rows, so summing the two stages' gradients
 * and updating keep both copies identical bit for bit.
 */
#ifndef STORK_DAEMON_ZERO_H
#define STORK_DAEMON_ZERO_H

#include <stddef.h>

#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"

struct comm;

#define ZERO_MAX_SEGMENTS 2

struct zero_segment {
	size_t off, n;             /* the segment in the shard's parameters */
	size_t per;                /* ceil(n / D): each rank's part (the last may be shorter) */
	size_t lo, hi;             /* this rank's part [lo, hi), offsets in the parameters */
};

struct zero_plan {
	int D, d;
	int nseg;
	struct zero_segment seg[ZERO_MAX_SEGMENTS];
	size_t state_n;            /* parameters this rank updates: the sum of hi - lo */
	float *recv;               /* reduce-scatter receive space (recv_n floats), or NULL */
	size_t recv_n;             /* the largest part of a segment (at least 1) */
	const struct ops *recv_mem; /* whose memory recv is in: the gradients' */
};

/*
 * Plan rank d of D for model m (its shard's sizes), and pad m's gradient
 * buffer so every segment's reduce-scatter can read D * per elements. Call
 * before the first gpt2_zero_grad. Returns 0 or -1 (memory).
 */
int zero_plan_make(struct zero_plan *z, struct gpt2 *m, int D, int d);

void zero_plan_free(struct zero_plan *z);

/* Rank r's part of segment s: [*a, *b), offsets in the parameters (empty past the end). */
void zero_part(const struct zero_segment *s, int r, size_t *a, size_t *b);

/* The same plan from sizes only (checkpoint readers): no buffers. */
void zero_plan_layout(struct zero_plan *z, const size_t sizes[GPT2_NUM_TENSORS], int D, int d);

/*
 * Reduce-scatter the gradients over dp and average them: on return this
 * rank's parts of m->grads hold the mean over the replicas. 0 or a COMM_E*.
 */
int zero_reduce_scatter(struct zero_plan *z, struct gpt2 *m, struct comm *dp);

/* Sum of squares of this rank's parts of the gradients, replicas left out. */
double zero_sumsq(const struct zero_plan *z, const struct gpt2 *m);

/* grads *= s over this rank's parts. */
void zero_scale(const struct zero_plan *z, struct gpt2 *m, float s);

/* AdamW over this rank's parts (opt covers state_n parameters), then the step is done. */
void zero_adamw(const struct zero_plan *z, struct adamw_state *opt, const struct adamw_params *h,
		float lr, struct gpt2 *m);

/* Every rank's updated parts to every replica. 0 or a COMM_E* code. */
int zero_allgather(const struct zero_plan *z, struct gpt2 *m, struct comm *dp);

#endif
