/*
 * daemon/engine/parallel/layout_cost.h - what a parallel layout costs each rank: memory,
 * FLOPs, bytes over each kind of link, and the step time those take on a
 * machine of given figures. `stork bench train --ranks` prints the memory,
 * `stork plan` all of it (stork(1) gives the model in words).
 *
 * Memory is what storkd allocates for a rank's shard (the sizes the model
 * and ZeRO-1 compute, not a formula of their own). FLOPs are the model
 * FLOPs `stork bench train` counts (6 per parameter in a matrix product
 * per token, 12 L C T per token for attention), for the shard's tensors
 * and layers, plus one more forward pass of the blocks under
 * recompute: block. Communication follows the code: per micro-batch,
 * tensor parallelism all-reduces B T C floats twice per block in each
 * pass (and twice more when blocks are recomputed), once more for the
 * embedding (first stage) and the head's input (last stage), and 3 x B T
 * floats for the vocabulary-parallel softmax; a pipeline sends B T C
 * floats each way between neighbouring stages; per step the replicas
 * all-reduce (or, ZeRO-1, reduce-scatter and all-gather) their gradients,
 * the two ends of a pipeline the tied embedding's, and the world agrees on
 * 4 scalars (loss, gradient norm, stop, cancel).
 *
 * A collective over a group that spans k nodes with at most j members on
 * one costs, as lib/comm/hier.c runs it, an in-node part (latency + 2 (j-1)/j
 * bytes / bandwidth of the node's link) and a cross-node part (latency +
 * 2 (k-1)/k bytes / bandwidth between nodes): the bytes counted on each
 * kind of link are those factors times the buffer.
 *
 * Time of a step: stage s takes t(s) per micro-batch (its FLOPs at the
 * rank's rate, its tensor-parallel collectives, its pipeline transfers);
 * 1F1B over m micro-batches takes (m - 1) max t(s) + sum t(s), which is
 * (m + P - 1) t for equal stages, in which a stage waits 1 - m t(s) / that
 * (the bubble: (P - 1) / (m + P - 1) for equal stages, more for unequal
 * ones, the mean over stages); then the gradient collectives, AdamW and
 * the scalars. On CPU nodes where ranks share cores (more ranks on a
 * machine than cores) no step is shorter than the machine's whole work
 * over its cores: a stage waiting in the bubble leaves its core to others.
 */
#ifndef STORK_DAEMON_LAYOUT_COST_H
#define STORK_DAEMON_LAYOUT_COST_H

#include <stddef.h>

#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/model/model.h"

/* Floats one rank holds. */
struct rank_memory {
	size_t params, grads, optimizer, activations;
};

/*
 * The floats rank l->rank holds (l from layout_make) at micro-batches of
 * (B, T), `micro` of them per step, with parallel.overlap or not, under
 * recompute r: its parameters (ZeRO-3: its parts and the gathered layers,
 * zero_paged.h), its gradients (with ZeRO-1's padding; ZeRO-2: its parts), its AdamW moments (ZeRO-1: its part only) and one
 * activation set per micro-batch in flight (P - stage under 1F1B, at most
 * micro; one without a pipeline).
 */
void layout_rank_memory(const struct gpt2_config *g, const struct par_layout *l, int B, int T,
			int micro, int overlap, enum gpt2_recompute r, struct rank_memory *m);

/* All of it: the floats of m's four parts. */
size_t layout_memory_floats(const struct rank_memory *m);

/* One layout of a run: its parallelism and its micro-batches. */
struct cost_layout {
	int tp, pp, dp, zero;
	int overlap;               /* parallel.overlap (ZeRO-2/3 keep a second layer in flight) */
	enum gpt2_recompute recompute;
	int B, T, micro;           /* train.batch_size, seq_len, grad_accum */
	const char *split;         /* parallel.stage_split (NULL: params) */
};

/* A link's cost: time = latency + bytes / bandwidth. */
struct link_figure {
	double latency_s, bytes_per_s;
};

/* Where the ranks run and how fast (see stork(1) for where each figure comes from). */
struct cost_machine {
	int nodes, ranks_per_node;    /* ranks node-major, as storkd numbers them */
	int gpu;                      /* a rank is a GPU: no cores shared */
	int cores;                    /* CPU: cores of one machine */
	int nodes_per_machine;        /* consecutive nodes sharing one machine's cores (a test cluster) */
	int threads_per_rank;         /* CPU: each rank's threads (its cores) */
	double flops_per_s;           /* model FLOPs/s of the forward and backward passes, one thread or GPU */
	double update_s_per_param;    /* AdamW, seconds per parameter, one thread or GPU */
	struct link_figure intra, inter;
};

/* What a layout costs. Bytes are those the busiest rank sends per step. */
struct cost_estimate {
	double mem_bytes;             /* the largest rank's memory */
	struct rank_memory mem;       /* that rank's, in floats */
	double flops;                 /* model FLOPs per step, the busiest rank's */
	double intra_bytes, inter_bytes;
	double bubble;                /* share of the pipeline's time a stage waits, their mean */
	double compute_s;             /* the pipeline: forward, backward, tensor and stage traffic */
	double pipe_comm_s;           /* the tensor and stage traffic's part, the busiest stage's */
	double dp_s, update_s, small_s; /* gradients (and tied embedding), AdamW, the 4 scalars */
	double floor_s;               /* CPU ranks sharing cores: the machine's work over its cores */
	double step_s, tokens_per_s;
};

/*
 * Estimate layout l on machine x into e. Returns 0, or -1 with a message
 * when l cannot run on x (layout_make's refusals).
 */
int layout_estimate(const struct gpt2_config *g, const struct cost_layout *l,
		    const struct cost_machine *x, struct cost_estimate *e, char *err,
		    size_t errlen);

/*
 * Model FLOPs of one token through shard s of a (T tokens per sequence):
 * 6 per parameter in its matrix products (the token embedding counts only
 * where it is the head), 12 L C T / tp for its attention, and under
 * recompute: block one more forward pass of its blocks.
 */
double layout_shard_flops(const struct gpt2_config *g, const struct gpt2_shard *s, int T,
			  enum gpt2_recompute r);

#endif
