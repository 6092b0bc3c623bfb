/*
 * kernels/cpu/encoder.c - token + position embedding and its backward
 * (no position embedding when wpe is NULL: Llama)
 * (CPU backend; see kernels/cpu/ops_cpu.c for how work is split).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <limits.h>

SIMD_CLONES
static void encoder_forward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->B * a->T, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *o = a->out + (size_t)r * C;
		const float *te = a->wte + (size_t)a->tok[r] * C;
		const float *pe = a->wpe ? a->wpe + (size_t)(r % a->T) * C : NULL;

		if (!pe) {
			memcpy(o, te, (size_t)C * sizeof(float));
			continue;
		}
		for (int c = 0; c < C; c++)
			o[c] = te[c] + pe[c];
	}
}

void cpu_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B,
			    int T, int C)
{
	struct rows_args a = { .out = out, .tok = inp, .wte = wte, .wpe = wpe, .B = B, .T = T,
			       .C = C };

	parallel_for(blocks_of((size_t)B * T, ROW_BLOCK), threads_for(2.0 * B * T * C),
		     encoder_forward_part, &a);
}

/* The whole vocabulary is the one slice starting at 0 (vocab_parallel.c). */
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			     int T, int C)
{
	cpu_vocab_encoder_backward(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX);
}
