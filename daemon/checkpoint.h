/*
 * daemon/checkpoint.h - checkpoints that are either complete or absent.
 *
 *   checkpoints/step_00001200/
 *     model.bin       the weights as an llm.c model file (fp32, version 3)
 *     optimizer.bin   AdamW moments and step ("STORKOPT" header, then m, v)
 *     state.json      completed steps, data position, config and model hashes
 *     manifest.json   every file above with its size and checksum, written last
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

#include "daemon/data.h"
#include "daemon/model.h"
#include "daemon/optimizer.h"

struct ckpt_state {
	int64_t step;                 /* optimizer steps completed */
	struct data_position train;   /* next training batch */
	uint64_t config_hash;         /* config_hash() of the run that wrote it */
	uint64_t model_hash;          /* config_model_hash() */
	int restart_count;            /* SLURM_RESTART_COUNT when written */
};

/* Report a fallback or other notice (e.g. into the rank's log). */
typedef void (*ckpt_notice_fn)(void *arg, const char *msg);

/*
 * Write and commit checkpoint step_N (N = st->step) under root (the run's
 * checkpoints/ directory), then delete the oldest beyond keep (0 = keep all).
 * Returns 0, or -1 with a message naming the file; on failure the previous
 * checkpoints are untouched and step_N.tmp/ is removed.
 */
int ckpt_save(const char *root, const struct gpt2 *m, const struct adamw_state *opt,
	      const struct ckpt_state *st, int keep, char *err, size_t errlen);

/*
 * The newest checkpoint under root that verifies: `latest` first, then the
 * other step_N directories from newest to oldest; notice() is told why each
 * rejected one was skipped. Returns 1 with its path in dir, 0 when there is
 * none.
 */
int ckpt_find(const char *root, char *dir, size_t len, ckpt_notice_fn notice, void *arg);

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

/* The 64-bit checksum used in manifests, over a whole file. -1 on error. */
int ckpt_checksum_file(const char *path, uint64_t *sum, uint64_t *size);

#endif
