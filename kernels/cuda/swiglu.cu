/*
 * kernels/cuda/swiglu.cu - SwiGLU (Llama's MLP activation), one thread
 * per element of out (N, I): each reads its gate and up from the two
 * halves of its row of inp (N, 2I) and calls kernels/math.h's formula,
 * the one the CPU backend calls. In the backward pass the thread writes
 * the gate's and the up's gradient of its element, so every float of
 * dinp has one writer.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

__global__ static void swiglu_forward_kernel(float *out, const float *inp, int N, int I)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * I) {
		size_t r = i / I, j = i % I;
		const float *g = inp + r * 2 * I;

		out[i] = math_swiglu_forward(g[j], g[I + j]);
	}
}

__global__ static void swiglu_backward_kernel(float *dinp, const float *inp, const float *dout,
					      int N, int I)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * I) {
		size_t r = i / I, j = i % I;
		const float *g = inp + r * 2 * I;
		float *dg = dinp + r * 2 * I, dgate, dup;

		math_swiglu_backward(g[j], g[I + j], dout[i], &dgate, &dup);
		dg[j] += dgate;
		dg[I + j] += dup;
	}
}

void cuda_swiglu_forward(float *out, const float *inp, int N, int I)
{
	size_t n = (size_t)N * I;

	if (!n)
		return;
	swiglu_forward_kernel<<<grid_for(n), BLOCK>>>(out, inp, N, I);
	LAUNCHED("swiglu_forward");
}

void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int I)
{
	size_t n = (size_t)N * I;

	if (!n)
		return;
	swiglu_backward_kernel<<<grid_for(n), BLOCK>>>(dinp, inp, dout, N, I);
	LAUNCHED("swiglu_backward");
}
