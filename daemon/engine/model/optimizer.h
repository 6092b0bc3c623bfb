/*
 * daemon/engine/model/optimizer.h - AdamW, the learning-rate schedule and gradient
 * clipping: pure functions the training loop calls once per step.
 *
 * The state (moments m and v, step count) is plain data the caller may
 * save and restore byte for byte, so a resumed run continues exactly.
 * The update works on spans of parameters, so a ZeRO-1 rank updates only
 * its shard, and decay is chosen per span (per tensor: see
 * gpt2_tensor_decays, the 2-D weight matrices wte, wpe, qkvw, attprojw, fcw,
 * fcprojw; biases and LayerNorm parameters are not decayed).
 */
#ifndef STORK_DAEMON_OPTIMIZER_H
#define STORK_DAEMON_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/model/model.h"
#include "kernels/ops.h"

struct adamw_params {
	float beta1, beta2, eps;
	float weight_decay; /* decoupled; applied to spans marked decay */
};

struct adamw_state {
	size_t n;     /* parameters covered */
	float *m, *v; /* first and second moments, n each, zero at the start */
	int64_t step; /* updates done so far (bias correction uses step + 1) */
	const struct ops *mem; /* whose memory m and v are in (ops_cpu after adamw_init) */
};

/* Allocate zeroed moments for n parameters (host memory). Returns 0 or -2 (memory). */
int adamw_init(struct adamw_state *s, size_t n);

/*
 * The same in backend o's memory, zeroed there: a fresh state on a GPU
 * without zeroing and copying host memory (10 GB for a 1B model). Returns
 * 0 or -2 (o's memory is full).
 */
int adamw_init_on(struct adamw_state *s, size_t n, const struct ops *o);

/*
 * Move the moments into backend o's memory (a GPU's for ops_cuda), where
 * the model's parameters are. Returns 0 or -2 (o's memory is full; the
 * state stays where it was).
 */
int adamw_move(struct adamw_state *s, const struct ops *o);

/* Copy the moments to host memory m and v (n floats each). */
void adamw_to_host(const struct adamw_state *s, float *m, float *v);

void adamw_free(struct adamw_state *s);

/*
 * One AdamW update of n parameters at offset off of the state's span:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)   (wd only if decay)
 * with t = s->step + 1. Does not advance s->step (adamw_step_done does, once
 * per optimizer step, after all spans).
 */
void adamw_update(const struct ops *o, struct adamw_state *s, const struct adamw_params *h,
		  float lr, int decay, float *params, const float *grads, size_t off, size_t n);

/* Mark one optimizer step as done (t advances for the bias corrections). */
void adamw_step_done(struct adamw_state *s);

/*
 * Update a whole model: every tensor, with decay per gpt2_tensor_decays,
 * then adamw_step_done. The state covers m->num_params.
 */
void adamw_step_model(struct adamw_state *s, const struct adamw_params *h, float lr,
		      struct gpt2 *m);

enum lr_kind { LR_CONSTANT, LR_COSINE };

struct lr_schedule {
	enum lr_kind kind;
	float lr;           /* peak (constant) learning rate */
	float min_lr;       /* cosine: value at the last step */
	int64_t warmup;     /* cosine: steps of linear warmup */
	int64_t total;      /* cosine: steps of the run */
};

/*
 * Learning rate of step (0-based). Constant: lr. Cosine: lr * (step+1) /
 * warmup during the first warmup steps, then min_lr + (lr - min_lr) *
 * (1 + cos(pi * r)) / 2 with r = (step - warmup) / (total - 1 - warmup)
 * going from 0 to 1, so the last step (total - 1) runs at min_lr.
 */
float lr_at(const struct lr_schedule *s, int64_t step);

/*
 * Sum of squares of n gradients in backend o's memory, in double (o->sumsq):
 * the summation order depends on n only, so the result is the same for any
 * thread count (and, on a GPU, run to run).
 */
double grad_sumsq(const struct ops *o, const float *g, size_t n);

/*
 * Scale that clips a gradient of global norm `norm` to `clip`: clip / norm
 * when norm > clip > 0, else 1 (clip 0 = off). Multiply grads by it.
 */
float grad_clip_scale(float norm, float clip);

/* g *= scale over n elements of backend o's memory. */
void grad_scale(const struct ops *o, float *g, size_t n, float scale);

#endif
