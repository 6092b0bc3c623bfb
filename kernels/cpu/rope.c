/*
 * kernels/cpu/rope.c - rotary positions and grouped-query heads (Llama's
 * attention input; CPU backend): see rope_forward in kernels/ops.h. Rows
 * (B*T) are cut into blocks; a row's key and value gradients are summed
 * over its group's heads in head order, so no two threads write one float.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

struct rope_args {
	float *out;
	const float *in, *rope;
	int B, T, NH, KV, HS;
};

/* Turn one head (HS floats) by the angles of cs (HS/2 cosine, sine pairs); sign -1 turns back. */
static inline void turn(float *restrict y, const float *restrict x, const float *cs, int HS,
			float sign, int add)
{
	int half = HS / 2;

	for (int i = 0; i < half; i++) {
		float y1, y2;

		math_rope(x[i], x[i + half], cs[2 * i], sign * cs[2 * i + 1], &y1, &y2);
		if (add) {
			y[i] += y1;
			y[i + half] += y2;
		} else {
			y[i] = y1;
			y[i + half] = y2;
		}
	}
}

SIMD_CLONES
static void rope_forward_part(void *p, int block, int count)
{
	struct rope_args *a = p;
	int lo, hi, NH = a->NH, KV = a->KV, HS = a->HS, group = NH / KV;
	size_t in_w = (size_t)(NH + 2 * KV) * HS, out_w = 3 * (size_t)NH * HS;

	split_range(a->B * a->T, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *x = a->in + r * in_w, *cs = a->rope + (size_t)(r % a->T) * HS;
		float *y = a->out + r * out_w;

		for (int h = 0; h < NH; h++) {
			const float *k = x + (size_t)(NH + h / group) * HS;
			const float *v = x + (size_t)(NH + KV + h / group) * HS;

			turn(y + (size_t)h * HS, x + (size_t)h * HS, cs, HS, 1.0f, 0);
			turn(y + (size_t)(NH + h) * HS, k, cs, HS, 1.0f, 0);
			memcpy(y + (size_t)(2 * NH + h) * HS, v, (size_t)HS * sizeof(float));
		}
	}
}

void cpu_rope_forward(float *qkv, const float *raw, const float *rope, int B, int T, int NH,
		      int KV, int HS)
{
	struct rope_args a = { .out = qkv, .in = raw, .rope = rope, .B = B, .T = T, .NH = NH,
			       .KV = KV, .HS = HS };

	parallel_for(blocks_of((size_t)B * T, ROW_BLOCK), threads_for(8.0 * B * T * NH * HS),
		     rope_forward_part, &a);
}

SIMD_CLONES
static void rope_backward_part(void *p, int block, int count)
{
	struct rope_args *a = p;
	int lo, hi, NH = a->NH, KV = a->KV, HS = a->HS, group = NH / KV;
	size_t raw_w = (size_t)(NH + 2 * KV) * HS, qkv_w = 3 * (size_t)NH * HS;

	split_range(a->B * a->T, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *d = a->in + r * qkv_w, *cs = a->rope + (size_t)(r % a->T) * HS;
		float *dx = a->out + r * raw_w;

		for (int h = 0; h < NH; h++)
			turn(dx + (size_t)h * HS, d + (size_t)h * HS, cs, HS, -1.0f, 1);
		for (int g = 0; g < KV; g++) {
			float *dk = dx + (size_t)(NH + g) * HS, *dv = dx + (size_t)(NH + KV + g) * HS;

			for (int h = g * group; h < (g + 1) * group; h++) {
				const float *dvh = d + (size_t)(2 * NH + h) * HS;

				turn(dk, d + (size_t)(NH + h) * HS, cs, HS, -1.0f, 1);
				for (int i = 0; i < HS; i++)
					dv[i] += dvh[i];
			}
		}
	}
}

void cpu_rope_backward(float *draw, const float *dqkv, const float *rope, int B, int T, int NH,
		       int KV, int HS)
{
	struct rope_args a = { .out = draw, .in = dqkv, .rope = rope, .B = B, .T = T, .NH = NH,
			       .KV = KV, .HS = HS };

	parallel_for(blocks_of((size_t)B * T, ROW_BLOCK), threads_for(10.0 * B * T * NH * HS),
		     rope_backward_part, &a);
}
