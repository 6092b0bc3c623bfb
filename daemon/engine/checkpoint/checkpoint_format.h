/*
 * daemon/engine/checkpoint/checkpoint_format.h - the files inside a checkpoint directory, for
 * the code that writes them (checkpoint.c) and the code that reads a
 * rank's part back by byte ranges (checkpoint_reshard.c). Not for anyone
 * else: checkpoint.h is the interface.
 *
 *   model.bin       llm.c's header (GPT2_HEADER_INTS ints), then the whole
 *                   model's parameters in llm.c's order
 *   optimizer.bin   struct opt_header, then m and v (n floats each)
 *   shard-NNNNN.bin struct shard_header, nparams parameters (the shard's
 *                   local order), then m over its parts (seg_lo..seg_hi,
 *                   packed in part order), then v likewise
 */
#ifndef STORK_DAEMON_CHECKPOINT_FORMAT_H
#define STORK_DAEMON_CHECKPOINT_FORMAT_H

#include <stdint.h>

#include "daemon/engine/checkpoint/checkpoint.h"

#define OPT_MAGIC "STORKOPT"
#define OPT_VERSION 1

struct opt_header {
	char magic[8];
	uint32_t version;
	uint32_t reserved;
	uint64_t n;
	int64_t step;
};

#define SHARD_NAME "shard-%05d.bin"
#define SHARD_MAGIC "STORKSHD"
#define SHARD_VERSION 1

/* The header of a shard file; parameters and the moments of its parts follow. */
struct shard_header {
	char magic[8];
	uint32_t version;
	int32_t rank, world, dp, tp, pp, zero;
	int32_t tp_rank, dp_rank, stage, first_layer, last_layer;
	int32_t model[GPT2_HEADER_INTS];      /* the model's llm.c header (gpt2_config_header) */
	uint64_t nparams;
	uint32_t nseg, reserved;
	uint64_t seg_lo[CKPT_MAX_SEGMENTS], seg_hi[CKPT_MAX_SEGMENTS];
	int64_t opt_step;
};

/* Open shard k of dir and read its header; checks it belongs to layout l. An fd or -1. */
int ckpt_open_shard(const char *dir, int k, const struct ckpt_layout *l, struct shard_header *h,
		    char *err, size_t errlen);

/* A model's shape in words, for messages. */
void ckpt_shape_str(const struct gpt2_config *c, char *buf, size_t len);

#endif
