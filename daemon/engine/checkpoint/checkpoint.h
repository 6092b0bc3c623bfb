/*
 * daemon/engine/checkpoint/checkpoint.h - checkpoints that are either complete or absent.
 *
 *   checkpoints/step_00001200/
 *     model.bin       the weights as an llm.c model file (fp32, version 3)
 *     optimizer.bin   AdamW moments and step ("STORKOPT" header, then m, v)
 *     state.json      completed steps, data position, config and model hashes,
 *                     the loss-spike detector's window
 *     manifest.json   every file above with its size and checksum (XXH3-64,
 *                     "hash": "xxh3-64"), written last
 *   checkpoints/latest -> step_00001200   (a symlink, replaced atomically)
 *
 * Commit protocol: write everything into step_N.tmp/, fsync each file,
 * write and fsync the manifest, fsync the directory, rename it to step_N/,
 * fsync checkpoints/, then replace `latest` and fsync checkpoints/ again. A
 * crash at any point leaves the previous `latest` valid. Loading verifies
 * the manifest (sizes and checksums) and falls back to the newest older
 * checkpoint that verifies, saying so.
 */
#ifndef STORK_DAEMON_CHECKPOINT_H
#define STORK_DAEMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/engine/data/data.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "daemon/engine/train/spike.h"

struct par_layout;

/*
 * The settings a checkpoint was written under, so that a resume can say
 * what changed since (and tell a new data-parallel width from a new batch
 * size). All 0: not recorded (checkpoints of earlier versions).
 */
struct ckpt_settings {
	int batch_size, grad_accum, seq_len;  /* train.* */
	int dp, tp, pp, zero;                 /* the layout */
	int64_t steps;                        /* train.steps: the run's target */
	double lr;                            /* train.lr */
};

struct ckpt_state {
	int64_t step;                 /* optimizer steps completed */
	struct data_position train;   /* next training batch */
	uint64_t config_hash;         /* config_hash() of the run that wrote it */
	uint64_t model_hash;          /* config_model_hash() */
	int restart_count;            /* SLURM_RESTART_COUNT when written */
	int64_t global_batch;         /* sequences per optimizer step (B x grad_accum x D);
				       * 0: not recorded (checkpoints of earlier versions) */
	struct ckpt_settings was;     /* the settings it was written under */
	struct spike_window spike;    /* train.on_spike's window (empty: none recorded) */
};

/* Report a fallback or other notice (e.g. into the rank's log). */
typedef void (*ckpt_notice_fn)(void *arg, const char *msg);

/*
 * Which checkpoints a commit keeps: the newest `newest` (0: all), and every
 * one of a step that is a multiple of `milestones` (0: none), whatever its age.
 */
struct ckpt_keep {
	int newest;
	int64_t milestones;
};

/*
 * Write and commit checkpoint step_N (N = st->step) under root (the run's
 * checkpoints/ directory), then delete what keep does not keep.
 * Returns 0, or -1 with a message naming the file; on failure the previous
 * checkpoints are untouched and step_N.tmp/ is removed.
 */
int ckpt_save(const char *root, const struct gpt2 *m, const struct adamw_state *opt,
	      const struct ckpt_state *st, struct ckpt_keep keep, char *err, size_t errlen);

/*
 * The newest checkpoint under root that verifies: `latest` first, then the
 * other step_N directories from newest to oldest; notice() is told why each
 * rejected one was skipped. Returns 1 with its path in dir, 0 when there is
 * none.
 */
int ckpt_find(const char *root, char *dir, size_t len, ckpt_notice_fn notice, void *arg);

/*
 * The checkpoint meant by path, verified: a step_N directory, a run directory (its checkpoints/) or a
 * checkpoints/ directory (ckpt_find there). Returns 1 with it in dir, or 0.
 */
int ckpt_find_any(const char *path, char *dir, size_t len, ckpt_notice_fn notice, void *arg);

/* Read state.json of a verified checkpoint. Returns 0 or -1 with a message. */
int ckpt_read_state(const char *dir, struct ckpt_state *st, char *err, size_t errlen);

/*
 * Load the model and optimizer of a verified checkpoint into m and opt
 * (both unallocated). expect (not NULL) is the configuration's shape; a
 * checkpoint of another shape is refused with a message naming both.
 * Returns 0, or -1 with a message.
 */
int ckpt_load(const char *dir, const struct gpt2_config *expect, struct gpt2 *m,
	      struct adamw_state *opt, char *err, size_t errlen);

/* ------------------------------------------------------------ sharded
 *
 * Layouts other than plain data parallelism write one shard per rank,
 * all in parallel, into the same step_N.tmp/:
 *
 *   checkpoints/step_00001200/
 *     shard-00000.bin ... one per rank: header (layout, the rank's place,
 *                     model sizes, its parameter count and optimizer
 *                     parts), its parameters, the moments m and v of its
 *                     parts (all its parameters, or its ZeRO-1 part)
 *     state.json      as above, plus "layout": {world, dp, tp, pp, zero}
 *     manifest.json   state.json and every shard, with sizes and checksums
 *
 * The job's commit: rank 0 prepares step_N.tmp/ (ckpt_prepare); every rank
 * writes and fsyncs its shard and computes its checksum
 * (ckpt_write_shard); once every rank's checksum has reached rank 0, it
 * writes state.json and the manifest and commits as above (ckpt_commit).
 * Until then `latest` is untouched: a crash mid-write leaves it valid.
 *
 * Any checkpoint can be read back as the whole model (ckpt_load_full), so
 * a run may resume on another layout and `stork export` writes one llm.c
 * model file from a sharded checkpoint.
 */
#define CKPT_MAX_SEGMENTS 2

struct ckpt_layout {
	int world, dp, tp, pp, zero;
	int sharded;                  /* 0: model.bin + optimizer.bin */
};

struct ckpt_shard_info {
	int rank;
	struct ckpt_layout layout;
	struct gpt2_config config;
	int tp_rank, dp_rank, stage, first_layer, last_layer;
	uint64_t nparams;             /* the shard's parameters */
	int nseg;                     /* parts of them whose moments the rank holds */
	uint64_t seg_lo[CKPT_MAX_SEGMENTS], seg_hi[CKPT_MAX_SEGMENTS];
	int64_t opt_step;
};

/* Rank 0: an empty step_N.tmp/ under root. 0 or -1 with a message. */
int ckpt_prepare(const char *root, int64_t step, char *err, size_t errlen);

/* Rank 0: remove step_N.tmp/ after a failed attempt. */
void ckpt_abandon(const char *root, int64_t step);

/*
 * Every rank: write and fsync its shard into step_N.tmp/: nparams
 * parameters, then m and v over its parts (packed, in part order). Its
 * checksum and size for the manifest come back in sum and size.
 */
int ckpt_write_shard(const char *root, int64_t step, const struct ckpt_shard_info *info,
		     const float *params, const float *m, const float *v, uint64_t *sum,
		     uint64_t *size, char *err, size_t errlen);

/* Rank 0, once every shard is written: state, manifest, rename, latest, prune. */
int ckpt_commit(const char *root, const struct ckpt_state *st, const struct ckpt_layout *l,
		const uint64_t *sums, const uint64_t *sizes, struct ckpt_keep keep, char *err,
		size_t errlen);

/*
 * The same for a node-local tier (checkpoint.local_dir): the count shards
 * from rank first on, those of this node, with their checksums and sizes
 * in sums[0..count-1] and sizes[0..count-1]; the manifest lists them alone.
 */
int ckpt_commit_part(const char *root, const struct ckpt_state *st, const struct ckpt_layout *l,
		     int first, int count, const uint64_t *sums, const uint64_t *sizes,
		     struct ckpt_keep keep,
		     char *err, size_t errlen);

/* The shards dir's manifest lists: from *first, *count of them (0: a whole-model one). */
int ckpt_read_part(const char *dir, int *first, int *count, char *err, size_t errlen);

/* The layout that wrote dir (plain: sharded = 0, the rest 0). */
int ckpt_read_layout(const char *dir, struct ckpt_layout *l, char *err, size_t errlen);

/* The whole model and optimizer of any verified checkpoint. */
struct ckpt_full {
	struct gpt2_config config;
	float *params, *m, *v;        /* llm.c's layout, num_params each */
	int64_t opt_step;
};

/* Read it; expect (not NULL) must match the model's shape. 0 or -1 with a message. */
int ckpt_load_full(const char *dir, const struct gpt2_config *expect, struct ckpt_full *f,
		   char *err, size_t errlen);

void ckpt_full_free(struct ckpt_full *f);

/*
 * When the layout did not change: read only rank want->rank's shard (its
 * parameters into params, its moment parts into m and v), checking that it
 * is the part want describes. 0 or -1 with a message.
 */
int ckpt_read_own_shard(const char *dir, const struct ckpt_shard_info *want, float *params,
			float *m, float *v, int64_t *opt_step, char *err, size_t errlen);

/*
 * When the layout changed: read rank want->rank's part of checkpoint dir
 * (any layout, whole model or shards) straight into params, m and v (its
 * moment parts, packed), by byte ranges: only what overlaps the part is
 * read, so nothing beyond the rank's own arrays is allocated but a list
 * of pieces. want->config is the shape the checkpoint must have; opt_step
 * gets the optimizer's step. 0 or -1 with a message.
 */
int ckpt_read_resharded(const char *dir, const struct ckpt_shard_info *want, float *params,
			float *m, float *v, int64_t *opt_step, char *err, size_t errlen);

/*
 * What rank l->rank of layout l holds of a model of shape g: its shard and,
 * under ZeRO-1, its parts of the moments (opt_step left 0).
 */
void ckpt_shard_info_of(const struct gpt2_config *g, const struct par_layout *l,
			struct ckpt_shard_info *info);

/* Write the checkpoint's model as one llm.c model file at out (stork export). */
int ckpt_export(const char *dir, const char *out, char *err, size_t errlen);

/* Checkpoints written from now on readable by the group (run.shared): step
 * directories 0750 and files 0640; else 0700 and 0600, the default. */
void ckpt_share_with_group(bool shared);

#endif
