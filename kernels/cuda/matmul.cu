/*
 * kernels/cuda/matmul.cu - the linear layers on cuBLAS.
 *
 * cuBLAS is column-major: a row-major (R, K) array is its column-major
 * (K, R) transpose. Row-major out (N, OC) = inp (N, C) @ W (OC, C)^T is
 * therefore column-major out' (OC x N) = W'^T (OC x C) * inp' (C x N), with
 * W' the column-major (C x OC) view of W. TF32 tensor cores are used when
 * the thread turned them on (kernels_cuda_set_tf32), otherwise full fp32.
 * The bias is a kernel of its own; its gradient a deterministic column sum.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"

/* out (N, OC) += bias (OC) broadcast over rows. */
__global__ static void bias_add_kernel(float *out, const float *bias, int N, int OC)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * OC)
		out[i] += bias[i % OC];
}

void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			 int N, int C, int OC)
{
	const float one = 1.0f, zero = 0.0f;

	if (N <= 0 || OC <= 0)
		return;
	cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, weight, C,
				 inp, C, &zero, out, OC),
		     "matmul_forward sgemm");
	if (bias) {
		bias_add_kernel<<<grid_for((size_t)N * OC), BLOCK>>>(out, bias, N, OC);
		LAUNCHED("matmul_forward bias");
	}
}

/*
 * dinp (N, C) += dout (N, OC) @ W (OC, C): column-major dinp' (C x N) =
 *   W' (C x OC) * dout' (OC x N).
 * dweight (OC, C) += dout^T @ inp: column-major dweight' (C x OC) =
 *   inp' (C x N) * dout'^T (N x OC).
 */
void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			  const float *inp, const float *weight, int N, int C, int OC)
{
	const float one = 1.0f;

	if (N <= 0 || OC <= 0)
		return;
	if (dinp)
		cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one,
					 weight, C, dout, OC, &one, dinp, C),
			     "matmul_backward dinp sgemm");
	cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C,
				 dout, OC, &one, dweight, C),
		     "matmul_backward dweight sgemm");
	if (dbias)
		cuda_column_sums(dbias, dout, N, OC);
}
