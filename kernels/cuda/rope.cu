/*
 * kernels/cuda/rope.cu - rotary positions and grouped-query heads (Llama's
 * attention input): see rope_forward in kernels/ops.h. One thread per
 * (row, head, pair of dimensions i and i + HS/2), the pair math_rope
 * turns together.
 *
 * The forward pass has a thread per pair of the output qkv; a key or
 * value head shared by a group of query heads is read by each of them.
 * The backward pass has a thread per pair of draw instead: the thread of
 * a key or value head sums the gradients of its group's NH/KV copies
 * itself, in head order as the CPU does, so each float of draw has one
 * writer (no atomics) and the bits do not depend on timing.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

/*
 * qkv (N, 3*NH*HS) from raw (N, (NH + 2*KV)*HS): thread i is row i /
 * (3*NH*half), output head (i / half) % (3*NH), pair i % half.
 */
__global__ static void rope_forward_kernel(float *qkv, const float *raw, const float *rope, int N,
					   int T, int NH, int KV, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int half = HS / 2, heads = 3 * NH, group = NH / KV;

	if (i < (size_t)N * heads * half) {
		int p = (int)(i % half), h = (int)(i / half % heads);
		size_t row = i / ((size_t)half * heads);
		const float *x = raw + row * (size_t)(NH + 2 * KV) * HS;
		const float *cs = rope + (size_t)(row % T) * HS + 2 * p;
		float *y = qkv + row * (size_t)heads * HS + (size_t)h * HS;

		if (h < NH) {
			x += (size_t)h * HS;
		} else if (h < 2 * NH) {
			x += (size_t)(NH + (h - NH) / group) * HS;
		} else {
			/* values are not turned: copied into each head of the group */
			x += (size_t)(NH + KV + (h - 2 * NH) / group) * HS;
			y[p] = x[p];
			y[p + half] = x[p + half];
			return;
		}
		math_rope(x[p], x[p + half], cs[0], cs[1], &y[p], &y[p + half]);
	}
}

void cuda_rope_forward(float *qkv, const float *raw, const float *rope, int B, int T, int NH,
		       int KV, int HS)
{
	size_t n = (size_t)B * T * 3 * NH * (HS / 2);

	if (!n)
		return;
	rope_forward_kernel<<<grid_for(n), BLOCK>>>(qkv, raw, rope, B * T, T, NH, KV, HS);
	LAUNCHED("rope_forward");
}

/*
 * draw (N, (NH + 2*KV)*HS) += the gradient from dqkv (N, 3*NH*HS): thread
 * i is row i / ((NH + 2*KV)*half), raw head (i / half) % (NH + 2*KV),
 * pair i % half. A query head turns its own gradient back (the sine
 * negated); a key or value head sums its group's heads, each turned back
 * (keys) or as is (values), into the value draw held before.
 */
__global__ static void rope_backward_kernel(float *draw, const float *dqkv, const float *rope,
					    int N, int T, int NH, int KV, int HS)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int half = HS / 2, heads = NH + 2 * KV, group = NH / KV;

	if (i < (size_t)N * heads * half) {
		int p = (int)(i % half), h = (int)(i / half % heads);
		size_t row = i / ((size_t)half * heads);
		const float *d = dqkv + row * 3 * (size_t)NH * HS;
		const float *cs = rope + (size_t)(row % T) * HS + 2 * p;
		float *dx = draw + row * (size_t)heads * HS + (size_t)h * HS;
		float c = cs[0], s = -cs[1], a1 = dx[p], a2 = dx[p + half];

		if (h < NH) {
			float y1, y2;

			math_rope(d[(size_t)h * HS + p], d[(size_t)h * HS + p + half], c, s, &y1,
				  &y2);
			a1 += y1;
			a2 += y2;
		} else if (h < NH + KV) {
			for (int q = (h - NH) * group; q < (h - NH + 1) * group; q++) {
				const float *dk = d + (size_t)(NH + q) * HS;
				float y1, y2;

				math_rope(dk[p], dk[p + half], c, s, &y1, &y2);
				a1 += y1;
				a2 += y2;
			}
		} else {
			for (int q = (h - NH - KV) * group; q < (h - NH - KV + 1) * group; q++) {
				const float *dv = d + (size_t)(2 * NH + q) * HS;

				a1 += dv[p];
				a2 += dv[p + half];
			}
		}
		dx[p] = a1;
		dx[p + half] = a2;
	}
}

void cuda_rope_backward(float *draw, const float *dqkv, const float *rope, int B, int T, int NH,
			int KV, int HS)
{
	size_t n = (size_t)B * T * (NH + 2 * KV) * (HS / 2);

	if (!n)
		return;
	rope_backward_kernel<<<grid_for(n), BLOCK>>>(draw, dqkv, rope, B * T, T, NH, KV, HS);
	LAUNCHED("rope_backward");
}
