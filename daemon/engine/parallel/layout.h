/*
 * daemon/engine/parallel/layout.h - how the world's ranks are cut into data-, tensor- and
 * pipeline-parallel groups, and the communicators of those groups.
 *
 * From parallel.tensor (T) and parallel.pipeline (P) a world of W ranks
 * holds D = W / (T * P) model replicas. Tensor parallelism is the innermost
 * dimension, then data, then pipeline:
 *
 *     rank = stage * (D * T) + dp * T + tp
 *
 * so a tensor-parallel group is T consecutive ranks (inside a node whenever
 * T divides the node's rank count: its all-reduces, two per block and
 * pass, are the most frequent), a pipeline stage is D * T consecutive ranks,
 * and stages follow each other (across nodes when a stage fills a node).
 *
 * Layers are split over the stages by parameter count: the first stage
 * also holds the token and position embeddings, the last the final
 * LayerNorm and the LM head (the tied token embedding), and every stage at
 * least one layer.
 */
#ifndef STORK_DAEMON_LAYOUT_H
#define STORK_DAEMON_LAYOUT_H

#include <stddef.h>

#include "daemon/engine/model/model.h"

struct comm;
struct stork_config;

struct par_layout {
	int world, dp, tp, pp;     /* W = D x T x P */
	int zero;                  /* ZeRO-1: optimizer state sharded over the D replicas */
	int tied;                  /* the LM head is the token embedding: the first and last stages share it */
	int rank, dp_rank, tp_rank, stage;
	int first_layer, last_layer; /* this stage's layers */
};

/* The communicators of one rank's groups (NULL where a group has one rank). */
struct par_groups {
	struct comm *tp;           /* the T ranks of this replica's stage: ranks by tp */
	struct comm *dp;           /* the D replicas of this (stage, tp): ranks by dp */
	struct comm *pp;           /* the P stages of this (dp, tp): ranks by stage */
	struct comm *mp;           /* the T x P ranks of this replica (gradient norm) */
	struct comm *emb;          /* first and last stage of this (dp, tp): the tied embedding (NULL when untied) */
	struct comm *world;        /* a group that is the whole world is this one, not a copy */
};

/*
 * The shape of the model a run trains: the configuration's settings, or
 * model.init_from's when set (an llm.c or Stork model file's header, a
 * Hugging Face directory's config.json; the layout is cut for it). Returns
 * 0; -1 with a message naming the file (it cannot be read); -2 when a
 * shape key is set to another value than the file's (a configuration
 * error, naming both).
 */
int layout_model_shape(const struct stork_config *cfg, struct gpt2_config *mc, char *err,
		       size_t errlen);

/*
 * Check that W ranks can run T x P for this model and place `rank`. Returns
 * 0, or -1 with a message naming the configuration keys and values.
 */
int layout_make(struct par_layout *l, const struct gpt2_config *c, int world, int tensor,
		int pipeline, int zero, const char *split, int seq_len, int rank, char *err,
		size_t errlen);

/*
 * The layers [*first, *last) of stage s of P by parallel.stage_split: params
 * (or NULL: balanced by parameter count), compute (balanced by forward
 * FLOPs at seq_len tokens, the last stage's head included), or a list of
 * layer counts ("5,7"). Check the split with layout_check_split first.
 */
void layout_stage_layers(const struct gpt2_config *c, int P, const char *split, int seq_len,
			 int s, int *first, int *last);

/* parallel.stage_split fits P stages of this model: 0, or -1 with a message. */
int layout_check_split(const struct gpt2_config *c, int P, const char *split, char *err,
		       size_t errlen);

/* "dp 2 x tp 2 x pp 2; rank 5 = dp 1, tp 1, stage 1 (layers 6-11)" */
void layout_describe(const struct par_layout *l, char *buf, size_t len);

/*
 * train.recompute in the model's terms: what each rank's forward pass
 * keeps (storkd and stork bench train size the activations with it).
 */
enum gpt2_recompute layout_recompute(const struct stork_config *cfg);

/* train.precision in the kernels' terms (ops->set_precision), on CPUs: auto is fp32. */
enum ops_precision layout_precision(const struct stork_config *cfg);
/*
 * The same on the calling thread's GPU: auto is bf16 where it has bf16
 * tensor cores (compute capability 8.0 and later; seen to track fp32
 * within 2% over 200 steps on an H100), fp32 on older ones.
 */
enum ops_precision layout_gpu_precision(const struct stork_config *cfg);

/* This rank's model shard (tp is set by layout_groups' caller). */
void layout_shard(const struct par_layout *l, struct gpt2_shard *s);

/*
 * Make the groups: collective over world (every rank calls it once, in
 * the same order). Returns 0 or a COMM_E* code (e.g. COMM_EINVAL when a
 * group would span nodes and the communicator cannot do that).
 */
int layout_groups(const struct par_layout *l, struct comm *world, struct par_groups *g);

void layout_groups_free(struct par_groups *g);

#endif
