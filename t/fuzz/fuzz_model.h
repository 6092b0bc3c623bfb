/*
 * t/fuzz/fuzz_model.h - what both model harnesses (fuzz_model.c, bytes;
 * fuzz_model_header.c, header fields) do with the file they wrote: read
 * its header's sizes (gpt2_read_config), the whole model (gpt2_load), and
 * the slice a tensor-parallel rank reads (gpt2_load_shard, rank 1 of 2: a
 * model whose heads or vocabulary do not split is refused).
 */
#ifndef STORK_FUZZ_MODEL_H
#define STORK_FUZZ_MODEL_H

#include "daemon/engine/model/model.h"

static inline void fuzz_load_model(const char *path)
{
	char err[1024];
	struct gpt2_config c;
	struct gpt2 m;

	if (gpt2_read_config(path, &c, err, sizeof err) < 0)
		return;
	if (gpt2_load(&m, path, err, sizeof err) == 0)
		gpt2_free(&m);
	struct gpt2_shard s = { .tp_rank = 1, .tp_size = 2, .first_layer = 0,
				.last_layer = c.num_layers };
	if (gpt2_load_shard(&m, path, &s, err, sizeof err) == 0)
		gpt2_free(&m);
}

#endif
