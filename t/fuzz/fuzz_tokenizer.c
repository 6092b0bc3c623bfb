/*
 * t/fuzz/fuzz_tokenizer.c - a tokenizer file given to `stork prep
 * --tokenizer` (launcher/prep/tokenizer_load.c): a tokenizer.json, an
 * encoder.json (with a fixed vocab.bpe beside it) or a tiktoken rank file,
 * as tok_load tells them apart; a tokenizer it accepts then encodes a text
 * of several scripts, whitespace runs and digits, and every id it gives is
 * turned back into its bytes.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "launcher/prep/tokenizer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char text[] = "Hello, world! It's 2026: naïve café 😀 日本語  \n\n\tdef f(x): "
			   "return x**2 123456789 don'T Съешь";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char merges[] = "#version: 0.2\nH e\nl l\n";
	char path[PATH_MAX], err[1024];
	struct tokenizer *t;
	struct tok_state *s;
	struct tok_ids ids = { 0 };
	uint32_t id;

	fuzz_write(path, sizeof path, "tok/vocab.bpe", merges, sizeof merges - 1);
	fuzz_write(path, sizeof path, "tok/encoder.json", data, size);
	if (!(t = tok_load(path, err, sizeof err)))
		return 0;
	tok_vocab_size(t);
	tok_family(t);
	tok_format(t);
	for (size_t i = 0; i < tok_special_count(t); i++)
		tok_special(t, i, &id);
	if ((s = tok_state_new(t))) {
		tok_encode(s, text, sizeof text - 1, &ids, err, sizeof err);
		for (size_t i = 0; i < ids.n; i++) {
			size_t n;

			if (!tok_bytes(t, ids.v[i], &n))
				abort(); /* an id the tokenizer gave must have bytes */
		}
		tok_state_free(s);
	}
	tok_ids_free(&ids);
	tok_free(t);
	return 0;
}
