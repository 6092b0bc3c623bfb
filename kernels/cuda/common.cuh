/*
 * kernels/cuda/common.cuh - what the CUDA layer files share (private to
 * kernels/cuda): launch helpers, error checks, the calling thread's cuBLAS
 * handle and scratch memory, warp reductions, and the entry points each
 * layer file defines for the table in ops_cuda.cu.
 *
 * Every kernel runs on the calling thread's default stream: the files are
 * built with --default-stream per-thread, so ranks that are threads of one
 * process (each on its own GPU, or sharing one) never serialise on the
 * legacy stream, and a plain cudaMemcpy orders with the thread's kernels.
 */
#ifndef STORK_KERNELS_CUDA_COMMON_CUH
#define STORK_KERNELS_CUDA_COMMON_CUH

#include <cstddef>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/ops.h"

#define BLOCK 256

static inline unsigned grid_for(size_t n)
{
	return (unsigned)((n + BLOCK - 1) / BLOCK);
}

/* A failed launch or CUDA call is a broken device: say where, then stop. */
void cuda_check(cudaError_t err, const char *what);
void cublas_check(cublasStatus_t st, const char *what);
#define LAUNCHED(what) cuda_check(cudaGetLastError(), what)

/* The calling thread's cuBLAS handle, on its default stream, TF32 as set. */
cublasHandle_t cuda_blas(void);
/* The calling thread's cuBLASLt handle (the products with epilogues; streams are per call). */
cublasLtHandle_t cuda_blas_lt(void);

/* The calling thread's matmul precision (ops->set_precision) and its setter. */
void cuda_set_precision(enum ops_precision p);
enum ops_precision cuda_precision(void);

/*
 * Scratch device memory of the calling thread, slot k (a few per layer
 * file), grown on demand and kept: attention's permuted q, k, v and its
 * T x T weights (one layer's at a time, never kept between passes), the
 * partial sums of the column reductions.
 */
void *cuda_scratch(int slot, size_t bytes);
enum { SCRATCH_ATT_QKV, SCRATCH_ATT_Y, SCRATCH_ATT_P, SCRATCH_ATT_DATT, SCRATCH_ATT_DQKV, SCRATCH_COLS,
       SCRATCH_SUMSQ, SCRATCH_TOKENS, SCRATCH_BF16_INP, SCRATCH_BF16_WEIGHT, SCRATCH_BF16_DOUT,
       SCRATCH_ATT_ROWDOT, SCRATCH_LT_WORKSPACE, SCRATCH_NUM };

/*
 * Allow kernel the dynamic shared memory it needs (past the 48 KiB every
 * kernel may have), on the calling thread's device; false where the GPU
 * has less.
 */
template <typename K> static inline bool allow_smem(K kernel, size_t bytes)
{
	int dev, most;

	cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
	cuda_check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
		   "shared memory per block");
	if (bytes > (size_t)most)
		return false;
	cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					(int)bytes),
		   "a kernel's shared memory");
	return true;
}

/* Sum over a warp, in a fixed butterfly order (every lane gets the same bits). */
__device__ static inline float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ static inline float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/*
 * Column sums of a row-major (N, C) array, added into out (C): partial sums
 * over chunks of ROWS_PER_CHUNK rows (tiles of COL_TILE columns, COL_LANES
 * threads per column), then the chunks in order (cuda_column_fold, which
 * LayerNorm's and RMSNorm's backward passes also use on their own
 * partials). Deterministic: the grouping depends on N and C only.
 */
#define COL_TILE 32
#define COL_LANES 8
#define ROWS_PER_CHUNK 256
void cuda_column_sums(float *out, const float *x, int N, int C);
/* out[c] += sum over k < chunks of partial[k][c], k in order. */
void cuda_column_fold(float *out, const float *partial, int chunks, int C);

/* The layers (one file each), in the order of struct ops. */
void cuda_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B,
			  int T, int C);
void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			   int T, int C);
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			    const float *weight, const float *bias, int N, int C);
void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			     const float *inp, const float *weight, const float *mean,
			     const float *rstd, int N, int C);
void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			 int N, int C, int OC);
void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			  const float *inp, const float *weight, int N, int C, int OC);
void cuda_attention_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
			    int HS);
void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv,
			     const float *stats, int B, int T, int NH, int HS);
void cuda_attention_fused_forward(float *out, float *stats, const float *qkv, int B, int T,
				  int NH, int HS);
void cuda_attention_fused_backward(float *dqkv, const float *dout, const float *out,
				   const float *qkv, const float *stats, int B, int T, int NH,
				   int HS);
/*
 * The register-tile bf16 kernels of the fused attention
 * (flash_attention_mma.cu), for heads they take (cuda_attention_mma_takes)
 * on sm_80 and later; rowdot = rowsum(dout * out) per row, as
 * flash_attention.cu computes it.
 */
bool cuda_attention_mma_takes(int HS);
void cuda_attention_mma_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
				int HS);
void cuda_attention_mma_backward(float *dqkv, const float *dout, const float *qkv,
				 const float *stats, const float *rowdot, int B, int T, int NH,
				 int HS);
void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N,
			  int C, float eps);
void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
			   const float *weight, const float *rstd, int N, int C);
void cuda_rope_forward(float *qkv, const float *raw, const float *rope, int B, int T, int NH,
		       int KV, int HS);
void cuda_rope_backward(float *draw, const float *dqkv, const float *rope, int B, int T, int NH,
			int KV, int HS);
void cuda_swiglu_forward(float *out, const float *inp, int N, int I);
void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int I);
void cuda_gelu_forward(float *out, const float *inp, size_t n);
void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void cuda_residual_forward(float *out, const float *a, const float *b, size_t n);
void cuda_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
				     const float *x, const float *y, const float *weight,
				     const float *bias, int N, int C);
void cuda_residual_backward(float *da, float *db, const float *dout, size_t n);
void cuda_softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V,
			       int Vp);
void cuda_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				int Vp);
void cuda_softmax_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
			     int V, int Vp);
void cuda_vocab_encoder_forward(float *out, const int *inp, const float *wte, int N, int C,
				int v0, int vn);
void cuda_vocab_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
				 int B, int T, int C, int v0, int vn);
void cuda_vocab_softmax_max(float *rows, const float *logits, int N, int nv, int vn);
void cuda_vocab_softmax_exp(float *logits, float *sums, const float *max, int N, int nv, int vn);
void cuda_vocab_softmax_finish(float *losses, float *logits, const float *sums,
			       const int *targets, int N, int nv, int vn, int v0);
void cuda_vocab_xent_backward(float *probs, const int *targets, float dloss, int N, int nv,
			      int vn, int v0);
void cuda_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		float beta1, float beta2, float eps, float wd, float bc1, float bc2);
void cuda_zero(float *p, size_t n);
void cuda_scale(float *p, size_t n, float s);
void cuda_round_bf16(float *p, size_t n);
double cuda_sumsq(const float *p, size_t n);

/* Memory (memory.cu). */
void *cuda_alloc(size_t bytes);
void cuda_free(void *p);
void cuda_upload(void *dst, const void *src, size_t bytes);
void cuda_download(void *dst, const void *src, size_t bytes);
void cuda_copy(void *dst, const void *src, size_t bytes);
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);
void cuda_sync(void);
void cuda_mem_info(size_t *free_bytes, size_t *total_bytes);

#endif
