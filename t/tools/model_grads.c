/*
 * t/tools/model_grads.c - the engine's loss and gradients of a Hugging
 * Face model on the first batch of a token shard, for
 * t/tools/llama_ref.py to hold against PyTorch's.
 *
 *   model_grads DIR SHARD B T OUT
 *
 * Loads DIR (daemon/engine/model/hf_model.c), runs one forward and backward pass on
 * samples 0..B-1 of SHARD (tokens [jT, jT + T + 1), as the unshuffled data
 * loader reads them), prints the loss and writes the gradients to OUT as a
 * Hugging Face directory (the weights' names and layout, fp32).
 */
#include "config.h"
#include "daemon/engine/model/hf_model.h"
#include "lib/formats/token_shard.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct gpt2 m;
	char err[1024];
	int B, T, *x, *y;
	float loss, *full;
	uint16_t *tok;
	FILE *f;

	if (argc != 6) {
		fprintf(stderr, "usage: model_grads DIR SHARD B T OUT\n");
		return 2;
	}
	B = atoi(argv[3]);
	T = atoi(argv[4]);
	tok = malloc(((size_t)B * T + 1) * sizeof *tok);
	x = malloc((size_t)B * T * sizeof *x);
	y = malloc((size_t)B * T * sizeof *y);
	if (!tok || !x || !y || !(f = fopen(argv[2], "rb")) || fseek(f, 1024, SEEK_SET) ||
	    fread(tok, sizeof *tok, (size_t)B * T + 1, f) != (size_t)B * T + 1) {
		fprintf(stderr, "model_grads: cannot read %zu tokens of %s\n", (size_t)B * T + 1,
			argv[2]);
		return 1;
	}
	fclose(f);
	for (int j = 0; j < B; j++)
		for (int t = 0; t < T; t++) {
			x[j * T + t] = tok[j * T + t];
			y[j * T + t] = tok[j * T + t + 1];
		}
	if (hf_model_load_shard(&m, argv[1], NULL, err, sizeof err)) {
		fprintf(stderr, "model_grads: %s\n", err);
		return 1;
	}
	if (gpt2_zero_grad(&m) || !((loss = gpt2_forward(&m, x, y, B, T)) >= 0) ||
	    gpt2_backward(&m, 1.0f)) {
		fprintf(stderr, "model_grads: %s\n", m.err);
		return 1;
	}
	full = m.grads; /* the whole model: its gradients are in llm.c's layout */
	if (hf_model_export(&m.config, full, argv[5], ST_F32, -1, -1, err, sizeof err)) {
		fprintf(stderr, "model_grads: %s\n", err);
		return 1;
	}
	printf("%.9g\n", (double)loss);
	gpt2_free(&m);
	free(tok);
	free(x);
	free(y);
	return 0;
}
