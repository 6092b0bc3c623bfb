/*
 * t/fuzz/fuzz_model_header.c - an llm.c model file driven by its header's
 * fields rather than its bytes: the input is read as the header ints that
 * set a shape (magic, version, max_seq_len, vocab_size, layers, heads,
 * channels, padded_vocab_size; then Llama's kv_heads and intermediate
 * size) and a body length. The file written has that header and that many
 * bytes after it, so the fuzzer explores shapes (the points where the
 * sizes would wrap, the limits of gpt2_config_check) and bodies just
 * shorter or longer than the shape says, where a byte fuzzer rarely
 * gets: gpt2_read_config, gpt2_load and rank 1 of 2's gpt2_load_shard
 * must refuse each with a message, never allocate from a size that
 * wrapped, never read past a buffer.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "t/fuzz/fuzz_model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE_INTS 8         /* magic, version, maxT, V, L, NH, C, Vp: header ints 0..7 */
#define LLAMA_INTS 2         /* kv_heads, intermediate: header ints 8 and 9 */
#define BODY_CAP (1 << 20)   /* a body is at most this long: enough for a tiny model */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int32_t hdr[GPT2_HEADER_INTS] = { 0 };
	size_t need = (SHAPE_INTS + LLAMA_INTS + 1) * 4;
	float eps = 1e-5f, theta = 10000.0f;
	char path[PATH_MAX];
	uint32_t body;
	uint8_t *file;

	fuzz_quiet();
	if (size < need)
		return 0;
	memcpy(hdr, data, (SHAPE_INTS + LLAMA_INTS) * 4);
	memcpy(&body, data + (SHAPE_INTS + LLAMA_INTS) * 4, 4);
	/* a Llama header's norm epsilon and rotary base (model_file.c's
	 * llama_header), valid so that the shape is what is judged */
	memcpy(&hdr[12], &eps, 4);
	memcpy(&hdr[13], &theta, 4);
	body %= BODY_CAP;
	if (!(file = calloc(1, sizeof hdr + body)))
		return 0;
	memcpy(file, hdr, sizeof hdr);
	/* the rest of the input fills the body, repeated: numbers, not zeros */
	for (uint32_t i = 0; i < body && size > need; i++)
		file[sizeof hdr + i] = data[need + i % (size - need)];
	fuzz_write(path, sizeof path, "model.bin", file, sizeof hdr + body);
	free(file);
	fuzz_load_model(path);
	return 0;
}
