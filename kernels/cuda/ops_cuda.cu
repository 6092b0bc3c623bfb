/*
 * kernels/cuda/ops_cuda.cu - the CUDA backend of kernels/ops.h (device arrays).
 *
 * Element-wise kernels are one thread per element calling the same inline
 * functions of kernels/math.h as the CPU backend, so the CPU unit tests
 * check the formulas these kernels run. Matrix products are cuBLAS calls on
 * one handle per host thread (row-major products written as column-major
 * ones with the operands swapped). Layers not written yet are NULL in the
 * table; the model refuses a backend with missing entries.
 *
 * No GPU is needed to build this file; nothing here has been run on one.
 */
#include "config.h"
#include "kernels/math.h"
#include "kernels/ops.h"

#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define BLOCK 256

static unsigned grid_for(size_t n)
{
	return (unsigned)((n + BLOCK - 1) / BLOCK);
}

/* A failed launch or cuBLAS call is a broken device: say where, then stop. */
static void cuda_check(cudaError_t err, const char *what)
{
	if (err != cudaSuccess) {
		fprintf(stderr, "stork cuda: %s: %s\n", what, cudaGetErrorString(err));
		abort();
	}
}

static void cublas_check(cublasStatus_t st, const char *what)
{
	if (st != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "stork cublas: %s failed (status %d)\n", what, (int)st);
		abort();
	}
}

static cublasHandle_t handle(void)
{
	static thread_local cublasHandle_t h;
	if (!h)
		cublas_check(cublasCreate(&h), "cublasCreate");
	return h;
}

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = math_gelu_forward(inp[i]);
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dinp[i] += math_gelu_backward(inp[i], dout[i]);
}

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float *da, float *db, const float *dout, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		da[i] += dout[i];
		db[i] += dout[i];
	}
}

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n,
			     float lr, float beta1, float beta2, float eps, float wd, float bc1,
			     float bc2)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		params[i] = math_adamw(params[i], grads[i], &m[i], &v[i], lr, beta1, beta2, eps, wd,
				       bc1, bc2);
}

/* out (N, OC) += bias (OC) broadcast over rows. */
__global__ void bias_add_kernel(float *out, const float *bias, int N, int OC)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (size_t)N * OC)
		out[i] += bias[i % OC];
}

/* dbias (OC) += column sums of dout (N, OC); one thread per column, fixed order. */
__global__ void bias_backward_kernel(float *dbias, const float *dout, int N, int OC)
{
	int oc = blockIdx.x * blockDim.x + threadIdx.x;
	if (oc < OC) {
		float s = 0.0f;
		for (int n = 0; n < N; n++)
			s += dout[(size_t)n * OC + oc];
		dbias[oc] += s;
	}
}

static void gelu_forward(float *out, const float *inp, size_t n)
{
	gelu_forward_kernel<<<grid_for(n), BLOCK>>>(out, inp, n);
	cuda_check(cudaGetLastError(), "gelu_forward");
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	gelu_backward_kernel<<<grid_for(n), BLOCK>>>(dinp, inp, dout, n);
	cuda_check(cudaGetLastError(), "gelu_backward");
}

static void residual_forward(float *out, const float *a, const float *b, size_t n)
{
	residual_forward_kernel<<<grid_for(n), BLOCK>>>(out, a, b, n);
	cuda_check(cudaGetLastError(), "residual_forward");
}

static void residual_backward(float *da, float *db, const float *dout, size_t n)
{
	residual_backward_kernel<<<grid_for(n), BLOCK>>>(da, db, dout, n);
	cuda_check(cudaGetLastError(), "residual_backward");
}

/* Zero n floats of device memory (in stream order with the kernels). */
static void zero(float *p, size_t n)
{
	cuda_check(cudaMemsetAsync(p, 0, n * sizeof(float)), "zero");
}

static void adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		  float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
	adamw_kernel<<<grid_for(n), BLOCK>>>(params, grads, m, v, n, lr, beta1, beta2, eps, wd,
					      bc1, bc2);
	cuda_check(cudaGetLastError(), "adamw");
}

/*
 * cuBLAS is column-major: a row-major (R, K) array is its column-major
 * (K, R) transpose. Row-major out (N, OC) = inp (N, C) @ W (OC, C)^T is
 * therefore column-major out' (OC x N) = T(W' (C x OC)) * inp' (C x N).
 */
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			   int N, int C, int OC)
{
	const float one = 1.0f, zero = 0.0f;

	cublas_check(cublasSgemm(handle(), CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, weight, C,
				 inp, C, &zero, out, OC),
		     "matmul_forward sgemm");
	if (bias) {
		bias_add_kernel<<<grid_for((size_t)N * OC), BLOCK>>>(out, bias, N, OC);
		cuda_check(cudaGetLastError(), "matmul_forward bias");
	}
}

/*
 * dinp (N, C) += dout (N, OC) @ W (OC, C): column-major dinp^T (C x N) =
 *   W^T(col-major view: C x OC) * dout^T (OC x N).
 * dweight (OC, C) += dout^T @ inp: column-major dweight^T (C x OC) =
 *   inp^T (C x N) * dout (N x OC).
 */
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			    const float *inp, const float *weight, int N, int C, int OC)
{
	const float one = 1.0f;

	if (dinp)
		cublas_check(cublasSgemm(handle(), CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, weight,
					 C, dout, OC, &one, dinp, C),
			     "matmul_backward dinp sgemm");
	cublas_check(cublasSgemm(handle(), CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout,
				 OC, &one, dweight, C),
		     "matmul_backward dweight sgemm");
	if (dbias) {
		bias_backward_kernel<<<grid_for((size_t)OC), BLOCK>>>(dbias, dout, N, OC);
		cuda_check(cudaGetLastError(), "matmul_backward dbias");
	}
}

static struct ops make_ops_cuda(void)
{
	struct ops o = {};
	o.name = "cuda";
	o.matmul_forward = matmul_forward;
	o.matmul_backward = matmul_backward;
	o.gelu_forward = gelu_forward;
	o.gelu_backward = gelu_backward;
	o.residual_forward = residual_forward;
	o.residual_backward = residual_backward;
	o.adamw = adamw;
	o.zero = zero;
	return o;
}

extern "C" const struct ops ops_cuda = make_ops_cuda();
