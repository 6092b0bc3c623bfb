/*
 * daemon/engine/parallel/tensor_parallel.h - the communication of
 * Megatron-style tensor parallelism inside the model's passes
 * (daemon/engine/model/model_pass.c).
 *
 * A tensor-parallel group of T ranks shares every layer: each rank holds
 * NH/T heads, 4C/T MLP columns and Vp/T vocabulary rows (model.h). The
 * activations entering and leaving each block are replicated; inside it,
 * the two row-parallel projections produce partial sums that are added
 * across the group (tp_allreduce, Megatron's g operator forward and f
 * operator backward). The vocabulary-parallel embedding and softmax below
 * never gather the full vocabulary: the embedding adds each token's row
 * from the rank that holds it; the softmax all-reduces a max and a sum of
 * exponentials per row, and the loss per row.
 *
 * All functions act on the model's shard (m->shard.tp) in the memory of
 * the model's backend (m->ops: host or GPU) and are called by every rank
 * of the group in the same order. On a failed
 * collective they return -1 with m->err naming it.
 */
#ifndef STORK_DAEMON_TENSOR_PARALLEL_H
#define STORK_DAEMON_TENSOR_PARALLEL_H

#include <stddef.h>

struct gpt2;

/* Sum buf (n floats) over the tensor-parallel group; nothing without one. */
int tp_allreduce(struct gpt2 *m, float *buf, size_t n);

/* out (B*T, C) = wte[token] + wpe[t], the wte row coming from the rank that holds it. */
int tp_encoder_forward(struct gpt2 *m, float *out, const int *inp, int B, int T);

/* dwte (own rows) and dwpe += the scatter of dout (B*T, C), as encoder_backward. */
void tp_encoder_backward(struct gpt2 *m, float *dwte, float *dwpe, const float *dout,
			 const int *inp, int B, int T);

/*
 * Softmax over the whole vocabulary of logits held in slices: logits (N,
 * Vp/T) is this rank's slice and becomes its slice of the probabilities
 * (0 in the padding [V, Vp)); with targets, losses (N) = -log p[target] on
 * every rank of the group.
 */
int tp_softmax_xent_forward(struct gpt2 *m, float *losses, float *logits, const int *targets,
			    int N);

/* probs (N, Vp/T) becomes dlogits = (p - onehot(target)) * dloss, 0 in the padding. */
void tp_softmax_xent_backward(struct gpt2 *m, float *probs, const int *targets, float dloss, int N);

#endif
