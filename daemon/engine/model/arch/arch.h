/*
 * daemon/engine/model/arch/arch.h - what an architecture gives the model
 * (daemon/engine/model/): the shapes of its tensors, how tensor
 * parallelism cuts them, their initial values, and the forward and
 * backward passes of one block and of the final norm. The model's files do
 * everything else the same way for every architecture: shards and their
 * copies (model_shape.c), parameters (model.c), activations, embedding, LM
 * head, loss and pipeline stages (model_pass.c), files (model_file.c).
 *
 * One file per architecture (gpt2.c, llama.c) fills a struct arch; the
 * pieces they share (the attention core, the row-parallel projections,
 * the widths and the views of one layer's weights and activations) are in
 * blocks.c. A third architecture is a third file and a line in
 * arch_of().
 */
#ifndef STORK_DAEMON_ARCH_ARCH_H
#define STORK_DAEMON_ARCH_ARCH_H

#include "daemon/engine/model/model.h"

#include <stddef.h>
#include <stdint.h>

/*
 * How tensor parallelism cuts one layer's chunk of a tensor: the chunk is
 * `repeat` copies of a pattern of nseg segments of seg[i] floats, and
 * slice k of n takes the k-th n-th of every segment. GPT-2's qkvw is one
 * pattern of three segments (q, k, v rows: whole heads); a row-parallel
 * projection is C patterns of one segment (the input columns of every
 * output row). nseg 0: every rank holds the whole chunk.
 */
struct tp_split {
	size_t repeat;
	int nseg;
	size_t seg[3];
};

/* Widths of one block of a shard: where tensor parallelism narrows. */
struct block_dims {
	int C;       /* model width (norms, residual stream) */
	int NH, HS;  /* query heads of this shard and their size */
	int KV;      /* key-value heads of this shard (NH without grouped-query attention) */
	int qkv_oc;  /* 3 * NH * HS: the attention kernels' input row */
	int qkvr_oc; /* (NH + 2 KV) * HS: the projection's output row when it differs (else 0) */
	int att_c;   /* NH * HS: attention projection input channels (row-parallel) */
	int fc_oc;   /* fc output channels (column-parallel) */
	int act_oc;  /* the MLP activation's output: fcproj's input channels (row-parallel) */
	int Vp;      /* vocabulary rows of the shard's embedding and LM head */
};

/* The weights (or gradients) of one layer; NULL where the architecture has none. */
struct block_w {
	float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
	float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

/* The activations of one layer (see struct gpt2_acts). */
struct block_a {
	float *ln1, *ln1_mean, *ln1_rstd, *qkvr, *qkv, *atty, *att_stats, *res2;
	float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
};

struct arch {
	const char *name;
	/* Floats of one layer's chunk of tensor t in the whole model (0: no such tensor). */
	size_t (*chunk)(const struct gpt2_config *c, int t);
	/* How tensor parallelism cuts tensor t (nseg 0: replicated). */
	void (*split)(const struct gpt2_config *c, int t, struct tp_split *s);
	/* The standard deviation of a weight matrix's initial values. */
	float (*init_std)(const struct gpt2_config *c, int t);
	/* Check what only this architecture asks of a config and a tensor-parallel size. */
	int (*check)(const struct gpt2_config *c, int tp_size, char *err, size_t errlen);
	/* Work memory the passes of (B, T) need beyond the activations (Llama: the rotary table). */
	int (*prepare)(struct gpt2 *m, int B, int T);
	/* Layer l forward (into its activations) and backward (acts.dres in and out). */
	int (*block_forward)(struct gpt2 *m, int l);
	int (*block_backward)(struct gpt2 *m, int l);
	/* Make again the MLP activation of layer l from fc's kept output (train.recompute gelu). */
	void (*activation_again)(struct gpt2 *m, int l);
	/* Final norm of x (B*T, C) into acts.lnf, and its backward from acts.dlnf into acts.dres. */
	void (*final_norm_forward)(struct gpt2 *m, const float *x);
	void (*final_norm_backward)(struct gpt2 *m, const float *x);
};

extern const struct arch arch_gpt2;
extern const struct arch arch_llama;

/* The architecture of c. */
const struct arch *arch_of(const struct gpt2_config *c);

/* Llama's rotary frequencies inv_freq (HS/2) for c (rope_theta, rope scaling). */
void llama_inv_freq(const struct gpt2_config *c, int HS, float *inv);

/* blocks.c: what the architectures share. */
struct block_dims block_dims(const struct gpt2_config *c, const struct gpt2_shard *s);
struct block_w block_weights(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS],
			     const struct block_dims *d, int local_layer);
/*
 * Layer l's parameters and gradients: in place, or in the one-layer buffers
 * parallel.zero gathered them into (m->param_view, m->grad_view).
 */
struct block_w block_params(const struct gpt2 *m, const struct block_dims *d, int layer);
struct block_w block_grads(const struct gpt2 *m, const struct block_dims *d, int layer);
struct block_a block_acts(const struct gpt2 *m, const struct block_dims *d, int layer);
/* Activation p (n floats) as its storage keeps it: rounded to bf16 under gpt2_set_bf16_activations. */
void act_stored(const struct gpt2 *m, float *p, size_t n);
/* The residual stream entering layer l (B, T, C) of the stage's layers, or their end. */
float *layer_input(struct gpt2 *m, int l);
/*
 * out (N, C) = inp (N, in_c) @ w^T (+ bias on tensor-parallel rank 0), the
 * partial sums of the tensor-parallel ranks then added (Megatron's g).
 */
int project_out(struct gpt2 *m, float *out, const float *inp, const float *w, const float *bias,
		int in_c);
/* Attention of a.qkv into a.atty (fused where the backend has it and train.fused asks). */
void attention_core_forward(struct gpt2 *m, const struct block_dims *d, struct block_a *a);
/* dqkv += the attention's backward of datty. */
void attention_core_backward(struct gpt2 *m, const struct block_dims *d, struct block_a *a,
			     float *dqkv, const float *datty);

#endif
