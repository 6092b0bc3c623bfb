/*
 * kernels/cuda/elementwise.cu - one thread per element: GELU, the residual
 * sum, AdamW, scaling. Each calls the formula of kernels/math.h that the
 * CPU backend calls, so the CPU tests check the arithmetic these run.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = math_gelu_forward(inp[i]);
}

__global__ static void gelu_backward_kernel(float *dinp, const float *inp, const float *dout,
					    size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dinp[i] += math_gelu_backward(inp[i], dout[i]);
}

__global__ static void residual_forward_kernel(float *out, const float *a, const float *b,
					       size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = a[i] + b[i];
}

__global__ static void residual_backward_kernel(float *da, float *db, const float *dout, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		da[i] += dout[i];
		db[i] += dout[i];
	}
}

__global__ static void adamw_kernel(float *params, const float *grads, float *m, float *v,
				    size_t n, float lr, float beta1, float beta2, float eps,
				    float wd, float bc1, float bc2)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		params[i] = math_adamw(params[i], grads[i], &m[i], &v[i], lr, beta1, beta2, eps, wd,
				       bc1, bc2);
}

__global__ static void scale_kernel(float *p, size_t n, float s)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] *= s;
}

void cuda_gelu_forward(float *out, const float *inp, size_t n)
{
	if (!n)
		return;
	gelu_forward_kernel<<<grid_for(n), BLOCK>>>(out, inp, n);
	LAUNCHED("gelu_forward");
}

void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	if (!n)
		return;
	gelu_backward_kernel<<<grid_for(n), BLOCK>>>(dinp, inp, dout, n);
	LAUNCHED("gelu_backward");
}

void cuda_residual_forward(float *out, const float *a, const float *b, size_t n)
{
	if (!n)
		return;
	residual_forward_kernel<<<grid_for(n), BLOCK>>>(out, a, b, n);
	LAUNCHED("residual_forward");
}

void cuda_residual_backward(float *da, float *db, const float *dout, size_t n)
{
	if (!n)
		return;
	residual_backward_kernel<<<grid_for(n), BLOCK>>>(da, db, dout, n);
	LAUNCHED("residual_backward");
}

void cuda_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
	if (!n)
		return;
	adamw_kernel<<<grid_for(n), BLOCK>>>(params, grads, m, v, n, lr, beta1, beta2, eps, wd, bc1,
					      bc2);
	LAUNCHED("adamw");
}

/* Zero n floats of device memory, in order with the kernels. */
void cuda_zero(float *p, size_t n)
{
	if (n)
		cuda_check(cudaMemsetAsync(p, 0, n * sizeof(float), cudaStreamPerThread), "zero");
}

__global__ static void round_bf16_kernel(float *p, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = math_bf16_round(p[i]);
}

void cuda_round_bf16(float *p, size_t n)
{
	if (!n)
		return;
	round_bf16_kernel<<<grid_for(n), BLOCK>>>(p, n);
	LAUNCHED("round_bf16");
}

void cuda_scale(float *p, size_t n, float s)
{
	if (!n)
		return;
	scale_kernel<<<grid_for(n), BLOCK>>>(p, n, s);
	LAUNCHED("scale");
}
