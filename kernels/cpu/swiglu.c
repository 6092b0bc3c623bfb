/*
 * kernels/cpu/swiglu.c - SwiGLU, Llama's MLP activation: silu(gate) * up
 * over rows of [gate | up] (CPU backend). Rows are cut into blocks; each
 * element is one kernels/math.h formula.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

struct swiglu_args {
	float *out;
	const float *inp, *dout;
	int N, I;
};

/* Rows per block: about EW_BLOCK elements. */
static int swiglu_rows(int I)
{
	int rows = EW_BLOCK / (I > 0 ? I : 1);

	return rows > 0 ? rows : 1;
}

SIMD_CLONES
static void swiglu_forward_part(void *p, int block, int count)
{
	struct swiglu_args *a = p;
	int lo, hi, I = a->I;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *restrict g = a->inp + (size_t)r * 2 * I, *restrict u = g + I;
		float *restrict o = a->out + (size_t)r * I;

		for (int i = 0; i < I; i++)
			o[i] = math_swiglu_forward(g[i], u[i]);
	}
}

void cpu_swiglu_forward(float *out, const float *inp, int N, int I)
{
	struct swiglu_args a = { .out = out, .inp = inp, .N = N, .I = I };

	parallel_for(blocks_of(N, swiglu_rows(I)), threads_for(25.0 * N * I), swiglu_forward_part,
		     &a);
}

SIMD_CLONES
static void swiglu_backward_part(void *p, int block, int count)
{
	struct swiglu_args *a = p;
	int lo, hi, I = a->I;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *restrict g = a->inp + (size_t)r * 2 * I, *restrict u = g + I;
		const float *restrict d = a->dout + (size_t)r * I;
		float *restrict dg = a->out + (size_t)r * 2 * I, *restrict du = dg + I;

		for (int i = 0; i < I; i++) {
			float x, y;

			math_swiglu_backward(g[i], u[i], d[i], &x, &y);
			dg[i] += x;
			du[i] += y;
		}
	}
}

void cpu_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int I)
{
	struct swiglu_args a = { .out = dinp, .inp = inp, .dout = dout, .N = N, .I = I };

	parallel_for(blocks_of(N, swiglu_rows(I)), threads_for(35.0 * N * I), swiglu_backward_part,
		     &a);
}
