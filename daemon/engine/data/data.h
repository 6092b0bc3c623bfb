/*
 * daemon/engine/data/data.h - the training and validation data loader.
 *
 * Data are llm.c token shards (lib/formats/token_shard.h): a 256 x int32 header
 * (magic 20240520, version 1, token count) followed by that many uint16
 * tokens. A loader reads the shards matched by a list of globs (each glob's
 * matches sorted by name, the globs in the order given).
 *
 * Samples: a shard of N tokens holds (N-1)/T samples; sample j is the T+1
 * tokens starting at token j*T (inputs are its first T, targets its last T).
 * The global sample stream visits the shards in order and each shard's
 * samples in order; with shuffling, every epoch permutes the shards and every
 * shard visit permutes its samples (Fisher-Yates, lib/rng.h). Global batch k
 * is samples [k*R*B, (k+1)*R*B) of the stream, and data-parallel rank r of R
 * takes its slot r: the B samples starting at k*R*B + r*B. The stream depends
 * only on the files, T, the seed and the shuffle flag, not on B or R, so
 * 2 ranks x batch B read exactly the samples of 1 rank x batch 2B, and a
 * batch may continue into the next shard or epoch.
 *
 * The position of the stream is a small plain struct (struct data_position),
 * the same on every rank; the checkpoint saves it and a resumed run reads
 * exactly the batches an uninterrupted one would.
 *
 * Errors name the file and the problem, and the functions return an exit
 * code of lib/exit_codes.h (STORK_EXIT_DATA for bad data) for the caller to
 * exit with. Shards are read with pread, a sample at a time: memory use is
 * one permutation of the current shard's samples.
 *
 * With prefetch, a helper thread reads the next batch while the caller
 * computes on the last one: the same reads in the same order, so the
 * batches are bit-identical, and a slow file system costs the step nothing
 * as long as a batch reads faster than a step computes. An error in the
 * prefetched batch is returned by the data_next that would have read it.
 */
#ifndef STORK_DAEMON_DATA_H
#define STORK_DAEMON_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "lib/formats/token_shard.h"

/* Where the sample stream stands; saved in checkpoints as is. */
struct data_position {
	uint64_t epoch;   /* completed passes over all shards */
	uint64_t shard;   /* index into this epoch's shard order */
	uint64_t sample;  /* index into the current shard's sample order */
	uint64_t rng;     /* generator state of this epoch (shuffle) */
};

struct data_config {
	const char *key;            /* config key for messages: "data.train" */
	const char *const *globs;   /* shard file patterns, glob(3) syntax */
	int nglobs;
	int batch_size;             /* B: samples per rank per batch */
	int seq_len;                /* T: tokens per sample (inputs) */
	int rank;                   /* this data-parallel rank, 0..nranks-1 */
	int nranks;                 /* R: data-parallel ranks */
	int shuffle;                /* permute shards and samples every epoch */
	uint64_t seed;              /* shuffling seed */
	int vocab_size;             /* tokens must be below this; 0: no check */
	int prefetch;               /* read the next batch on a helper thread */
};

struct data_loader;

/*
 * Find, open and check every shard (header, size, at least B*T+1 tokens).
 * Returns 0 and *out, or an exit code with a message in err.
 */
int data_open(struct data_loader **out, const struct data_config *cfg,
	      char *err, size_t errlen);

/*
 * This rank's next batch: inputs and targets are B*T ints each, row-major
 * (B, T). Advances the position by one global batch. Returns 0, or an exit
 * code with a message in err (a shard changed under us, a token >= vocab).
 */
int data_next(struct data_loader *dl, int *inputs, int *targets,
	      char *err, size_t errlen);

/*
 * The seconds data_next held its caller (reading, or waiting for the
 * batch read ahead) since the last call; the count starts again at 0.
 */
double data_take_wait(struct data_loader *dl);

/* Back to the first batch (validation does this before each evaluation). */
void data_rewind(struct data_loader *dl);

/* The position of the next batch. */
void data_get_position(const struct data_loader *dl, struct data_position *pos);

/*
 * Continue from a saved position. Returns 0, or STORK_EXIT_DATA with a
 * message when the position does not fit these shards (data changed).
 */
int data_set_position(struct data_loader *dl, const struct data_position *pos,
		      char *err, size_t errlen);

/* Number of shards, their total tokens, and shard i's path (sorted order). */
size_t data_num_shards(const struct data_loader *dl);
uint64_t data_num_tokens(const struct data_loader *dl);
const char *data_shard_path(const struct data_loader *dl, size_t i);

void data_close(struct data_loader *dl);

#endif
