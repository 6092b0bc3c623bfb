/*
 * kernels/cuda/matmul.cu - the linear layers on cuBLAS.
 *
 * cuBLAS is column-major: a row-major (R, K) array is its column-major
 * (K, R) transpose. Row-major out (N, OC) = inp (N, C) @ W (OC, C)^T is
 * therefore column-major out' (OC x N) = W'^T (OC x C) * inp' (C x N), with
 * W' the column-major (C x OC) view of W. The thread's precision
 * (ops->set_precision) chooses the arithmetic: fp32 (cublasSgemm), TF32
 * (the same calls, the handle in TF32 tensor-op mode), or bf16: the
 * operands are converted to bf16 copies (math_bf16_bits, the rounding the
 * CPU emulation uses) and cublasGemmEx multiplies them on the tensor cores
 * with fp32 accumulation into the fp32 output. In bf16 the bias is added
 * by the product itself (a cuBLASLt epilogue: the sums plus the bias,
 * rounded once to fp32, as the separate pass gives them, without reading
 * and writing the whole output again); elsewhere it is a kernel of its own.
 * Its gradient is a deterministic column sum of the fp32 dout.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#include <cstdint>

#define LT_WORKSPACE ((size_t)32 << 20) /* cuBLASLt's scratch: what Hopper's kernels ask for */

__global__ static void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dst[i] = math_bf16_bits(src[i]);
}

/* src (n floats) as bf16 in the thread's scratch slot. */
static const uint16_t *bf16_copy(int slot, const float *src, size_t n)
{
	uint16_t *dst = (uint16_t *)cuda_scratch(slot, n * sizeof(uint16_t));

	to_bf16_kernel<<<grid_for(n), BLOCK>>>(dst, src, n);
	LAUNCHED("matmul bf16 conversion");
	return dst;
}

/*
 * C (m x n, fp32, column-major, leading dimension ldc) = alpha op(A) op(B)
 * + beta C with A and B bf16: cuBLAS's sgemm with bf16 inputs.
 */
static void gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		      const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
		      int ldc, const char *what)
{
	const float one = 1.0f;

	cublas_check(cublasGemmEx(cuda_blas(), ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B,
				  CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT),
		     what);
}

/*
 * out (column-major OC x N) = W'^T (OC x C) x' (C x N) + bias, bf16 operands,
 * fp32 sums and output, in one cuBLASLt call whose epilogue adds the bias.
 * False, having launched nothing, where cuBLASLt offers no algorithm for
 * the shape, refuses the call, or a pointer lacks the 16-byte alignment the
 * epilogue needs: the caller takes the separate bias pass then.
 */
static bool bf16_forward_with_bias(float *out, const uint16_t *w16, const uint16_t *x16,
				   const float *bias, int N, int C, int OC)
{
	cublasLtMatmulDesc_t op = nullptr;
	cublasLtMatrixLayout_t lw = nullptr, lx = nullptr, lo = nullptr;
	cublasLtMatmulPreference_t pref = nullptr;
	cublasLtMatmulHeuristicResult_t heur;
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
	cudaDataType_t bias_type = CUDA_R_32F;
	size_t ws_bytes = LT_WORKSPACE;
	const float one = 1.0f, zero = 0.0f;
	int found = 0;
	bool done = false;

	if ((uintptr_t)bias % 16 || (uintptr_t)out % 16 || OC % 4)
		return false;
	if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
					   sizeof bias) ||
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
					   sizeof bias_type) ||
	    cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, C, OC, C) ||
	    cublasLtMatrixLayoutCreate(&lx, CUDA_R_16BF, C, N, C) ||
	    cublasLtMatrixLayoutCreate(&lo, CUDA_R_32F, OC, N, OC) ||
	    cublasLtMatmulPreferenceCreate(&pref) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						 &ws_bytes, sizeof ws_bytes) ||
	    cublasLtMatmulAlgoGetHeuristic(cuda_blas_lt(), op, lw, lx, lo, lo, pref, 1, &heur,
					   &found) ||
	    !found)
		goto out;
	/* a refusal launches nothing: the plain path then computes the same */
	done = cublasLtMatmul(cuda_blas_lt(), op, &one, w16, lw, x16, lx, &zero, out, lo, out, lo,
			      &heur.algo, cuda_scratch(SCRATCH_LT_WORKSPACE, ws_bytes), ws_bytes,
			      cudaStreamPerThread) == CUBLAS_STATUS_SUCCESS;
out:
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(lo);
	cublasLtMatrixLayoutDestroy(lx);
	cublasLtMatrixLayoutDestroy(lw);
	cublasLtMatmulDescDestroy(op);
	return done;
}

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
	if (cuda_precision() == OPS_BF16) {
		const uint16_t *w16 = bf16_copy(SCRATCH_BF16_WEIGHT, weight, (size_t)OC * C);
		const uint16_t *x16 = bf16_copy(SCRATCH_BF16_INP, inp, (size_t)N * C);

		if (bias && bf16_forward_with_bias(out, w16, x16, bias, N, C, OC))
			return;
		gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w16, C, x16, C, 0.0f, out, OC,
			  "matmul_forward bf16 gemm");
	} else
		cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one,
					 weight, C, inp, C, &zero, out, OC),
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
	if (cuda_precision() == OPS_BF16) {
		const uint16_t *d16 = bf16_copy(SCRATCH_BF16_DOUT, dout, (size_t)N * OC);

		if (dinp)
			gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC,
				  bf16_copy(SCRATCH_BF16_WEIGHT, weight, (size_t)OC * C), C, d16, OC,
				  1.0f, dinp, C, "matmul_backward dinp bf16 gemm");
		gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N,
			  bf16_copy(SCRATCH_BF16_INP, inp, (size_t)N * C), C, d16, OC, 1.0f, dweight,
			  C, "matmul_backward dweight bf16 gemm");
	} else {
		if (dinp)
			cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one,
						 weight, C, dout, OC, &one, dinp, C),
				     "matmul_backward dinp sgemm");
		cublas_check(cublasSgemm(cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp,
					 C, dout, OC, &one, dweight, C),
			     "matmul_backward dweight sgemm");
	}
	if (dbias)
		cuda_column_sums(dbias, dout, N, OC);
}
