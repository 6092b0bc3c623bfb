/*
 * t/fuzz/fuzz_model.c - an llm.c model file (daemon/engine/model/model.c), as
 * model.init_from and a checkpoint's model.bin are read: the header's
 * sizes (gpt2_read_config), the whole model (gpt2_load), and the slice a
 * tensor-parallel rank reads (gpt2_load_shard, rank 1 of 2: a model whose
 * heads or vocabulary do not split is refused).
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/engine/model/model.h"

#include <limits.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX], err[1024];
	struct gpt2_config c;
	struct gpt2 m;

	fuzz_quiet();
	fuzz_write(path, sizeof path, "model.bin", data, size);
	if (gpt2_read_config(path, &c, err, sizeof err) < 0)
		return 0;
	if (gpt2_load(&m, path, err, sizeof err) == 0)
		gpt2_free(&m);
	struct gpt2_shard s = { .tp_rank = 1, .tp_size = 2, .first_layer = 0,
				.last_layer = c.num_layers };
	if (gpt2_load_shard(&m, path, &s, err, sizeof err) == 0)
		gpt2_free(&m);
	return 0;
}
