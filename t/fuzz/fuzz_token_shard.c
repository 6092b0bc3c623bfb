/*
 * t/fuzz/fuzz_token_shard.c - an llm.c token shard: its header held
 * against the file (lib/formats/token_shard.c, as `stork run --check` and storkd
 * do), then the data loader on it (daemon/engine/data/data.c): B = 2 sequences of
 * T = 8 tokens below a vocabulary of 257, shuffled, three batches (a small
 * shard wraps into the next epoch).
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/engine/data/data.h"

#include <limits.h>

#define B 2
#define T 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX], err[1024];
	const char *globs[1] = { path };
	struct data_config cfg = { .key = "data.train", .globs = globs, .nglobs = 1,
				   .batch_size = B, .seq_len = T, .rank = 0, .nranks = 1,
				   .shuffle = 1, .seed = 1337, .vocab_size = 257 };
	struct data_loader *dl;
	struct token_shard s;
	int inputs[B * T], targets[B * T];

	fuzz_write(path, sizeof path, "train_000.bin", data, size);
	if (token_shard_check(path, &s, err, sizeof err) != 0 ||
	    data_open(&dl, &cfg, err, sizeof err) != 0)
		return 0;
	for (int i = 0; i < 3 && data_next(dl, inputs, targets, err, sizeof err) == 0; i++)
		;
	data_close(dl);
	return 0;
}
