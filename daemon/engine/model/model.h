/*
 * daemon/engine/model/model.h - the GPT-2 decoder that storkd trains.
 *
 * The model of llm.c's train_gpt2.c: token + learned position embeddings,
 * L pre-LayerNorm blocks (causal self-attention, tanh-GELU MLP), a final
 * LayerNorm, and the LM head tied to the token embedding, over a vocabulary
 * padded from V to Vp (the padding logits take no part in the loss).
 *
 * Parameters live in one contiguous buffer; tensors[] points into it in
 * llm.c's order (GPT2_WTE ... GPT2_LNFB), so saving, loading, zeroing and
 * all-reducing are single operations on one span. Gradients are laid out
 * the same way. Activations are allocated on the first forward pass of a
 * given (B, T) and layer range, for those layers only, and reused.
 *
 * Files: llm.c's model format, a 256 x int32 header (magic 20240326,
 * version 3 = fp32, then max_seq_len, vocab_size, layers, heads, channels,
 * padded_vocab_size) followed by the fp32 parameters in tensor order.
 *
 * Parallelism: a model object may hold a shard of the model (struct
 * gpt2_shard). A pipeline stage holds the layers [first_layer, last_layer)
 * only, the first stage also the embeddings, the last the final LayerNorm
 * and the LM head (the tied token embedding, so both ends hold it); a
 * tensor-parallel rank holds a 1/tp slice of every split matrix, Megatron
 * style: qkv and fc by output rows (whole heads for qkv), the attention and
 * fc projections by input columns, and the token embedding by vocabulary
 * rows (Vp/tp each); LayerNorm, position embedding and the projection
 * biases are replicated. Tensors keep llm.c's order with the shard's sizes,
 * so gpt2_shard_copy maps between a shard and the whole model (llm.c's
 * layout) for loading, checkpoints and resharding. The all-reduces of the
 * tensor-parallel group live in daemon/engine/parallel/tensor_parallel.c.
 */
#ifndef STORK_DAEMON_MODEL_H
#define STORK_DAEMON_MODEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

struct comm;

#define GPT2_MAGIC 20240326
#define GPT2_VERSION_FP32 3
#define GPT2_HEADER_INTS 256
/* Stork's Llama model files: the same 256-int header, another magic (llm.c's tools refuse them). */
#define LLAMA_MAGIC 20241125
#define LLAMA_VERSION_FP32 1

/* Tensors in llm.c's order; per-layer tensors hold all L layers back to back. */
enum gpt2_tensor {
	GPT2_WTE,      /* (Vp, C)      token embedding = LM head */
	GPT2_WPE,      /* (maxT, C)    position embedding */
	GPT2_LN1W,     /* (L, C) */
	GPT2_LN1B,     /* (L, C) */
	GPT2_QKVW,     /* (L, 3C, C) */
	GPT2_QKVB,     /* (L, 3C) */
	GPT2_ATTPROJW, /* (L, C, C) */
	GPT2_ATTPROJB, /* (L, C) */
	GPT2_LN2W,     /* (L, C) */
	GPT2_LN2B,     /* (L, C) */
	GPT2_FCW,      /* (L, 4C, C) */
	GPT2_FCB,      /* (L, 4C) */
	GPT2_FCPROJW,  /* (L, C, 4C) */
	GPT2_FCPROJB,  /* (L, C) */
	GPT2_LNFW,     /* (C) */
	GPT2_LNFB,     /* (C) */
	GPT2_LMHEAD,   /* (Vp, C)      an LM head of its own (untied); none in GPT-2 */
	GPT2_NUM_TENSORS
};

/*
 * The architectures (model.arch). Both use the tensor table above; a
 * tensor an architecture lacks has size 0 (Llama: wpe, every bias; GPT-2:
 * lmhead). Llama's tensors, in the same slots:
 *   wte (Vp, C) embed_tokens; ln1w (L, C) input_layernorm (RMSNorm);
 *   qkvw (L, (NH + 2 KV) HS, C) q, k, v projections stacked;
 *   attprojw (L, C, NH HS) o_proj; ln2w (L, C) post_attention_layernorm;
 *   fcw (L, 2I, C) gate_proj then up_proj; fcprojw (L, C, I) down_proj;
 *   lnfw (C) the final RMSNorm; lmhead (Vp, C) unless tied.
 * The code of each lives in daemon/engine/model/arch/ (arch.h).
 */
enum model_arch {
	MODEL_GPT2 = 0,
	MODEL_LLAMA = 1,
};

struct gpt2_config {
	int max_seq_len;       /* maxT */
	int vocab_size;        /* V */
	int padded_vocab_size; /* Vp >= V */
	int num_layers;        /* L */
	int num_heads;         /* NH, divides C */
	int channels;          /* C */
	/* Llama's; zero in a GPT-2 configuration */
	enum model_arch arch;
	int kv_heads;          /* KV, divides NH (grouped-query attention) */
	int intermediate;      /* I, the MLP's width (GPT-2: 4C) */
	int untied;            /* the LM head is a tensor of its own */
	float norm_eps;        /* RMSNorm's epsilon */
	float rope_theta;      /* rotary base */
	/* Llama 3.1's rope scaling; factor 0 = none */
	float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
	int rope_original_max_positions;
};

/* "gpt2" or "llama". */
const char *model_arch_name(enum model_arch a);

/* KV heads of c (NH unless grouped-query attention). */
int model_kv_heads(const struct gpt2_config *c);

/* The MLP's width I (4C for GPT-2). */
int model_mlp_width(const struct gpt2_config *c);

/* Whether the LM head is the token embedding (both ends of a pipeline hold it). */
int model_tied(const struct gpt2_config *c);

/*
 * The part of the model one rank holds: a tensor-parallel slice (tp_rank of
 * tp_size) of the layers [first_layer, last_layer) of a pipeline stage.
 * gpt2_shard_whole gives the whole model (1 slice, every layer).
 */
struct gpt2_shard {
	int tp_rank, tp_size;
	int first_layer, last_layer;
	struct comm *tp;             /* the tensor-parallel group; NULL when tp_size == 1 */
};

/*
 * Activations of one (B, T) for the layers [first, last) of a stage (all L
 * layers for the whole model); per-layer arrays hold those last - first
 * layers (written L below), the head arrays (lnf..losses) are NULL unless
 * the stage ends the model. See model_pass.c for the layout.
 */
struct gpt2_acts {
	float *encoded;  /* (B, T, C) residual stream entering the first layer */
	float *ln1, *ln1_mean, *ln1_rstd; /* (L, B, T, C), (L, B, T) x2 */
	float *qkvr;     /* (L, B, T, (NH + 2 KV) HS) Llama: the projection's q, k, v before rope */
	float *qkv;      /* (L, B, T, 3C) */
	float *atty;     /* (L, B, T, C) */
	float *att_stats; /* (L, B, NH, T, 2): each row's max score and exp-sum */
	float *res2;     /* (L, B, T, C) residual after attention */
	float *ln2, *ln2_mean, *ln2_rstd;
	float *fch;      /* (L, B, T, 4C) */
	float *fch_gelu; /* (L, B, T, 4C) */
	float *res3;     /* (L, B, T, C) residual leaving each layer */
	float *lnf, *lnf_mean, *lnf_rstd; /* (B, T, C), (B, T) x2 */
	float *logits;   /* (B, T, Vp): logits, then probabilities, then their gradient */
	float *losses;   /* (B, T) */
	float *vocab_rows; /* (2, B, T) tensor parallelism: each row's max and exp-sum */
	/* backward scratch, reused by every layer */
	float *dres;     /* (B, T, C) gradient of the residual stream */
	float *dln, *datty; /* (B, T, C) */
	float *dqkv;     /* (B, T, 3C) */
	float *dqkvr;    /* (B, T, (NH + 2 KV) HS) Llama */
	float *dfch, *dfch_gelu; /* (B, T, 4C) */
	float *dlnf;     /* (B, T, C) */
};

/*
 * Activation recomputation: what the forward pass keeps for the backward
 * pass, trading compute for memory. The losses and gradients are the same
 * bit for bit in every mode: the backward pass recomputes with the same
 * kernels on the same inputs.
 */
enum gpt2_recompute {
	GPT2_RECOMPUTE_NONE = 0,  /* keep every layer's activations */
	GPT2_RECOMPUTE_GELU = 1,  /* keep fc's output, redo its GELU (4C per token per layer) */
	GPT2_RECOMPUTE_BLOCK = 2, /* keep each layer's input only, redo the layer's forward pass */
};

/* What one in-flight micro-batch keeps between its forward and backward passes. */
struct gpt2_slot {
	struct gpt2_acts acts;
	int *inputs, *targets;
	int have_targets;
	float loss;
	float dlogits_scale;
};

/*
 * Where a rank's model is, for a hang's report: the pass and the block it
 * is in, updated as it goes (daemon/engine/train/train.h's rank_progress holds one; the
 * trainer adds its own phases above GPT2_PHASE_BACKWARD).
 */
enum gpt2_phase { GPT2_PHASE_NONE, GPT2_PHASE_FORWARD, GPT2_PHASE_BACKWARD };

struct gpt2_where {
	_Atomic int phase;
	_Atomic int layer;              /* the block; num_layers: the head; -1: outside */
};

struct gpt2 {
	struct gpt2_config config;
	struct gpt2_shard shard;
	const struct ops *ops;
	size_t sizes[GPT2_NUM_TENSORS]; /* elements of each tensor */
	size_t num_params;
	float *params;                  /* num_params floats */
	float *tensors[GPT2_NUM_TENSORS];
	float *grads;                   /* NULL until the first gpt2_zero_grad */
	float *grad_tensors[GPT2_NUM_TENSORS];
	/* activations for (B, T) and layers [act_first, act_last) */
	int B, T;
	int act_first, act_last;
	float *act_mem;
	size_t act_cap;
	struct gpt2_acts acts;
	int *inputs, *targets;          /* copies of the last forward's tokens (B*T) */
	int *tok_mem;                   /* every slot's inputs and targets */
	size_t tok_cap;                 /* ints allocated at tok_mem */
	int have_targets;
	float loss;                     /* mean loss of the last forward, or -1 */
	float dlogits_scale;            /* > 0: the fused classifier left the logits' gradient for this loss scale */
	/* micro-batches in flight (pipeline): nslots activation sets; the
	 * fields acts..loss above are those of slot `slot` */
	int nslots, slot;
	struct gpt2_slot *slots;
	enum gpt2_recompute recompute;  /* GPT2_RECOMPUTE_NONE unless gpt2_set_recompute */
	int fused;                      /* fused kernels where the backend has them (gpt2_set_fused) */
	int bf16_acts;                  /* activations and their gradients stored as bf16 (gpt2_set_bf16_activations) */
	/* after each layer's backward pass (gpt2_set_layer_hook), or NULL */
	void (*layer_done)(void *arg, struct gpt2 *m, int layer);
	void *layer_done_arg;
	/* parallel.zero 3: a layer's parameters fetched before each of its passes and released
	 * after (gpt2_set_layer_params), or NULL: always in place */
	int (*layer_fetch)(void *arg, struct gpt2 *m, int layer, int backward);
	void (*layer_release)(void *arg, struct gpt2 *m, int layer);
	void *layer_params_arg;
	/* where the layer in its pass finds its parameters and puts its gradients, as
	 * tensors of one layer (the fetch sets them); NULL: in place */
	float **param_view, **grad_view;
	struct gpt2_where *where;       /* updated per block when not NULL */
	float loss_scale;               /* the backward passes' expected loss_scale (gpt2_set_fused) */
	size_t grad_pad;                /* zeroed floats after the gradients (ZeRO-1 padding) */
	float *host_losses;             /* (B, T) host copy of acts.losses for the mean */
	float *rope;                    /* Llama: (rope_T, HS/2, 2) cos, sin of the rotary angles */
	int rope_T;
	char err[256];                  /* why the last call failed */
	int out_of_memory;              /* ... an allocation of a pass (err: what, how much) */
	double device_wait_s;           /* the host waiting for the loss, summed (on a GPU: the pass's kernels) */
};

/*
 * Check a configuration: every size positive and at most its limit below,
 * C divisible by NH, Vp >= V. Returns 0, or -1 with a message in err
 * naming the bad field.
 *
 * The limits are far above any real model (Llama 3.1 405B: C 16384, 126
 * layers, 128 heads, I 53248, a 128k vocabulary) and keep every size
 * computed from a shape (a tensor, a shard, the whole model, in bytes) far
 * below SIZE_MAX: a shape read from a file cannot make one wrap into a
 * small allocation. The file's length is then checked against the sizes
 * before anything is allocated.
 */
#define GPT2_MAX_CHANNELS 65536
#define GPT2_MAX_LAYERS 1024
#define GPT2_MAX_HEADS 4096
#define GPT2_MAX_SEQ_LEN (1 << 20)
#define GPT2_MAX_VOCAB (1 << 21)
#define GPT2_MAX_INTERMEDIATE (1 << 20)
int gpt2_config_check(const struct gpt2_config *c, char *err, size_t errlen);

/*
 * Build a model of the given sizes with GPT-2 initialisation drawn from
 * seed: weights N(0, 0.02), the two residual projections (attention and MLP
 * output) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1, the padding
 * rows [V, Vp) of the token embedding 0. Each (tensor, layer) draws from its
 * own stream rng_seed(seed, tensor * 65536 + layer), so a pipeline stage can
 * initialise only its own layers and get the same values. Deterministic.
 * Returns 0, -1 on a bad config (m->err says why), -2 out of memory.
 */
int gpt2_build(struct gpt2 *m, const struct gpt2_config *c, uint64_t seed);

/* The whole model as a shard: one tensor-parallel slice, every layer. */
void gpt2_shard_whole(const struct gpt2_config *c, struct gpt2_shard *s);

/*
 * Check that a shard fits the model: tp_size divides the heads and the
 * padded vocabulary, the layer range is within [0, L). Returns 0 or -1 with
 * a message in err.
 */
int gpt2_shard_check(const struct gpt2_config *c, const struct gpt2_shard *s, char *err,
		     size_t errlen);

/* Elements of each tensor a shard holds (0 for tensors it lacks) and their sum. */
size_t gpt2_shard_sizes(const struct gpt2_config *c, const struct gpt2_shard *s,
			size_t sizes[GPT2_NUM_TENSORS]);

/*
 * Copy between the whole model's parameters (full, llm.c's layout and
 * order) and a shard's (local): to_local = 1 copies the shard's part of
 * full into local, 0 writes local into its place in full. The same map
 * serves optimizer moments, which have the parameters' layout.
 */
void gpt2_shard_copy(const struct gpt2_config *c, const struct gpt2_shard *s, float *full,
		     float *local, int to_local);

/*
 * A run of floats a shard holds contiguously that is contiguous in the
 * whole model too: n floats from offset full there and local in the shard.
 */
struct shard_piece {
	size_t full, local, n;
};

typedef void shard_piece_fn(void *arg, const struct shard_piece *p);

/* Pieces being joined while they are listed (model_shape.c's own). */
struct piece_run {
	shard_piece_fn *fn;
	void *arg;
	struct shard_piece pending;
};

/*
 * Call fn for every piece of the shard in increasing order of both offsets,
 * joined where they continue each other: the map gpt2_shard_copy follows,
 * which a resharding resume intersects with the pieces of the shards that
 * wrote a checkpoint.
 */
void gpt2_shard_pieces(const struct gpt2_config *c, const struct gpt2_shard *s,
		       shard_piece_fn *fn, void *arg);

/* Whether tensor parallelism cuts tensor t (else every tensor-parallel rank holds all of it). */
int gpt2_tensor_is_split(const struct gpt2_config *c, enum gpt2_tensor t);

/*
 * Whether the shard's copy of tensor t is a replica another rank of the
 * model-parallel group also holds and counts (tensor-parallel ranks above 0
 * for replicated tensors; the last stage's tied embedding when the first
 * stage holds it too): such copies are left out of the gradient norm.
 */
int gpt2_shard_is_replica(const struct gpt2_config *c, const struct gpt2_shard *s,
			  enum gpt2_tensor t);

/*
 * gpt2_build for a shard: the same values as the whole model's, for the
 * part the shard holds. s->tp is kept for the passes.
 */
int gpt2_build_shard(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s,
		     uint64_t seed);

/*
 * A shard (NULL: the whole model) of the whole model's parameters full
 * (llm.c's layout; NULL: parameters left for the caller to fill). Returns
 * 0, -1 (bad shard or config: m->err), -2 (memory).
 */
int gpt2_shard_from_full(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s,
			 const float *full);

/*
 * gpt2_load for a shard: reads only the shard's part of the file. Errors
 * as gpt2_load, and -1 when the file's model cannot be cut as s asks.
 */
int gpt2_load_shard(struct gpt2 *m, const char *path, const struct gpt2_shard *s, char *err,
		    size_t errlen);

/*
 * Keep n >= 1 activation sets, one per micro-batch in flight (a pipeline
 * stage's 1F1B schedule has up to P - stage of them), and make slot 0
 * current. Returns 0 or -2 (memory, on the next forward).
 */
int gpt2_set_slots(struct gpt2 *m, int n);

/*
 * Floats of one activation set (one slot) of shard s for batches (B, T)
 * under recomputation mode r.
 */
size_t gpt2_activation_floats(const struct gpt2_config *c, const struct gpt2_shard *s, int B,
			      int T, enum gpt2_recompute r);

/*
 * What the forward pass keeps from now on (the activations are made again
 * on the next forward pass). Returns 0.
 */
int gpt2_set_recompute(struct gpt2 *m, enum gpt2_recompute r);

/*
 * Fused kernels (train.fused): on, a training forward pass (with targets,
 * no tensor parallelism) runs the backend's fused classifier, which
 * leaves the gradient of the logits for loss_scale, the scale the
 * backward pass of this forward is expected to take (1/grad_accum in
 * storkd). A backward pass with another scale still gets the right
 * gradient: the logits' gradient is rescaled first. Off (a model's
 * default; storkd follows train.fused), the separate softmax and its
 * backward run: the reference. The losses
 * and gradients are the same bit for bit either way (for the expected
 * scale), except where the backend also has a fused attention (CUDA):
 * that one sums its tiles in another order, the same within rounding.
 */
void gpt2_set_fused(struct gpt2 *m, int on, float loss_scale);

/*
 * bf16 activations (on) or fp32 (off, the default): every activation and
 * activation gradient the passes keep is rounded to bf16 where a kernel
 * stores it (ops->round_bf16), as llm.c's floatX holds them, while
 * statistics (LayerNorm's and RMSNorm's mean and rstd, attention's row
 * maxima and sums), the losses, the parameters, their gradients and the
 * moments stay fp32 and every kernel sums in fp32. The points where the
 * rounding happens are the semantics a GPU storing bf16 must keep; on a
 * CPU they are emulated. The matrix products' operands are rounded by
 * the backend's precision (set_precision), not by this.
 */
void gpt2_set_bf16_activations(struct gpt2 *m, int on);

/*
 * Call fn(arg, m, l) after the backward pass of each layer l of the next
 * backward passes, once the layer's parameter gradients have their
 * contributions from this pass (gradient overlap: daemon/engine/parallel/grad_sync.h).
 * fn NULL: no calls.
 */
void gpt2_set_layer_hook(struct gpt2 *m, void (*fn)(void *arg, struct gpt2 *m, int layer),
			 void *arg);

/*
 * Call fetch(arg, m, l, backward) before each pass of layer l (forward, or
 * backward with its recomputation) and release(arg, m, l) after it:
 * parameters held whole only while their layer computes (parallel.zero,
 * daemon/engine/parallel/zero_paged.h), which may point m->param_view and
 * m->grad_view at one-layer buffers. A non-zero fetch fails the pass.
 * fetch NULL: no calls.
 */
void gpt2_set_layer_params(struct gpt2 *m,
			   int (*fetch)(void *arg, struct gpt2 *m, int layer, int backward),
			   void (*release)(void *arg, struct gpt2 *m, int layer), void *arg);

/*
 * The parameters of layer l as pieces of m->params, as gpt2_layer_grads
 * gives its gradients.
 */
int gpt2_layer_params(const struct gpt2 *m, int l, float **p, size_t *n);

/*
 * The gradients of layer l (one of the shard's layers) as pieces of
 * m->grads: one per per-layer tensor (LayerNorms, qkv, projections, MLP),
 * pointers in p and lengths in n (room for GPT2_NUM_TENSORS). Returns the
 * count. The other tensors (embeddings, final LayerNorm) are the
 * remainder, which gpt2_global_grads gives.
 */
int gpt2_layer_grads(const struct gpt2 *m, int l, float **p, size_t *n);

/* The gradients of the tensors that belong to no layer, as gpt2_layer_grads. */
int gpt2_global_grads(const struct gpt2 *m, float **p, size_t *n);

/*
 * The most pieces one backward pass hands over through the two above (each
 * of the shard's layers, then the rest): grad_sync_start's max_pieces.
 */
size_t gpt2_grad_pieces(const struct gpt2 *m);

/* "none", "gelu" or "block" (train.recompute's names). */
const char *gpt2_recompute_name(enum gpt2_recompute r);

/* Make slot k (< nslots) current: the next forward fills it, the next backward reads it. */
void gpt2_use_slot(struct gpt2 *m, int k);

/*
 * Load an llm.c model file (fp32, version 3). Returns 0; or -1 with a
 * message in err naming the file and the problem (cannot open, wrong magic,
 * wrong version, bad sizes, truncated, trailing bytes), -2 out of memory.
 * On failure m holds nothing to free.
 */
int gpt2_load(struct gpt2 *m, const char *path, char *err, size_t errlen);

/* The sizes in an llm.c model file's header. 0 or -1 with a message. */
int gpt2_read_config(const char *path, struct gpt2_config *c, char *err, size_t errlen);

/*
 * Write the model as an llm.c model file at path (created or truncated; the
 * caller handles temporary names, fsync and rename). Returns 0 or -1 with a
 * message naming the file.
 */
int gpt2_save(const struct gpt2 *m, const char *path, char *err, size_t errlen);

/* Write the 256-int header of m (of a model of config c) into hdr. */
void gpt2_header(const struct gpt2 *m, int32_t hdr[GPT2_HEADER_INTS]);
void gpt2_config_header(const struct gpt2_config *c, int32_t hdr[GPT2_HEADER_INTS]);

/*
 * Check a header read from path (magic, version, sizes) and fill c.
 * Returns 0 or -1 with a message naming path.
 */
int gpt2_config_from_header(const int32_t *h, const char *path, struct gpt2_config *c, char *err,
			    size_t errlen);

/*
 * Forward pass of the whole model (every layer: a tensor-parallel shard is
 * fine, a pipeline stage is not) over inputs (B, T) (token ids < V).
 * With targets (B, T) not NULL, returns the mean cross-entropy loss and
 * keeps what gpt2_backward needs; without, returns 0 and leaves the next
 * token probabilities in m->acts.logits (B, T, Vp). Returns NAN on error
 * (token out of range, T > maxT, out of memory: m->err says which).
 */
float gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T);

/* Allocate the gradients if needed and set them to zero. Returns 0 or -2 (memory). */
int gpt2_zero_grad(struct gpt2 *m);

/*
 * Backward pass of the last forward (which had targets): ADDS the gradient
 * of loss_scale * mean loss to m->grads (so micro-batches accumulate; use
 * loss_scale = 1/grad_accum). Returns 0, or -1 if there is no forward with
 * targets to differentiate or no gradient buffer (call gpt2_zero_grad).
 */
int gpt2_backward(struct gpt2 *m, float loss_scale);

/*
 * Pipeline stage forward over the shard's layers [first, last), into the
 * current slot. With first == 0 the stage embeds inputs; otherwise x_in
 * (B, T, C) is the residual stream from the previous stage. With last == L
 * the stage ends with the head and, when targets is not NULL, stores the
 * mean loss in *loss; otherwise the residual stream leaving layer last-1 is
 * copied to x_out (B, T, C). x_in and x_out are in the backend's memory (a
 * GPU stage's activations go to the next stage from GPU to GPU). Returns 0
 * or -1 (m->err says why).
 */
int gpt2_stage_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T,
		       const float *x_in, float *x_out, float *loss);

/*
 * Pipeline stage backward of the current slot's forward. With last == L
 * the gradient starts at the loss (scaled by loss_scale); otherwise dx_out
 * (B, T, C) is the gradient of the stage's output from the next stage. With
 * first == 0 the gradient ends in the embeddings; otherwise it is written
 * to dx_in (B, T, C). dx_out and dx_in are in the backend's memory. Returns
 * 0 or -1.
 */
int gpt2_stage_backward(struct gpt2 *m, float loss_scale, const float *dx_out, float *dx_in);

/*
 * Run the model on backend o from now on (gpt2_build and gpt2_load choose
 * ops_cpu). The parameters move into o's memory (a GPU's for ops_cuda);
 * gradients and activations are made there when next needed. Returns 0;
 * -1 when o lacks entries the forward and backward passes call (m->err
 * names the backend and every missing entry; the model keeps its backend);
 * -2 when o's memory cannot hold the parameters (m->err says how much was
 * asked and how much is free).
 */
int gpt2_set_backend(struct gpt2 *m, const struct ops *o);

/*
 * "out of cuda memory for WHAT: N MiB asked, M MiB free" into err: the
 * sentence every allocation of the model's or optimizer's memory reports
 * (the free MiB only where the backend knows them: a GPU).
 */
void gpt2_oom_message(const struct ops *o, const char *what, size_t bytes, char *err,
		      size_t errlen);

/* Copy the parameters (num_params floats) from the backend's memory to host memory dst. */
void gpt2_params_to_host(const struct gpt2 *m, float *dst);

/* Floats of one layer's chunk of tensor t in the whole model (the whole tensor if not per layer). */
size_t gpt2_chunk_floats(const struct gpt2_config *c, enum gpt2_tensor t);

/* Whether tensor t holds one chunk per layer. */
int gpt2_tensor_per_layer(enum gpt2_tensor t);

/* Whether the optimizer decays tensor t: the 2-D weight matrices only. */
int gpt2_tensor_decays(enum gpt2_tensor t);

/* The tensor's llm.c name ("wte", "qkvw", ...). */
const char *gpt2_tensor_name(enum gpt2_tensor t);

/* Free everything the model holds; m may then be built or loaded again. */
void gpt2_free(struct gpt2 *m);

#endif
