/*
 * kernels/cpu/cpu.h - what the CPU layer files share (private to
 * kernels/cpu): the block helpers of threads.c, the SIMD clones, the
 * row-sum helper, and the entry points each layer file defines for the
 * table in ops_cpu.c. How work is cut into blocks, and why the results do
 * not depend on the thread count: kernels/cpu/ops_cpu.c.
 */
#ifndef STORK_KERNELS_CPU_CPU_H
#define STORK_KERNELS_CPU_CPU_H

#include "kernels/math.h"
#include "kernels/ops.h"
#include "lib/simd_clones.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 64

/*
 * The loops of the element-wise and row-wise kernels are compiled three
 * times, for AVX-512, AVX2 and the baseline ISA, and the loader picks the
 * best the CPU has (an ifunc). The clones give the same bits: no fused
 * multiply-adds (-ffp-contract=off in kernels/local.mk) and no reordered
 * sums, so a wider vector only does more of the same operations at once.
 */
#define SIMD_CLONES SIMD_CLONES_OF("avx512f", "avx2", "default")

/* Rows per block of row-wise kernels, elements per block of element-wise ones. */
#define ROW_BLOCK 8
#define EW_BLOCK 32768

/* Partial sums of a long float sum: vectorises, same bits for any thread count. */
#define SUM_LANES 16

static inline float sum_lanes(const float *x, int n)
{
	float acc[SUM_LANES] = { 0 }, s = 0.0f;
	int i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += x[i + j];
	for (; i < n; i++)
		acc[i % SUM_LANES] += x[i];
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

struct rows_args {
	float *out, *mean, *rstd, *dinp, *dweight, *dbias, *dwte, *dwpe;
	const float *inp, *weight, *bias, *dout, *wte, *wpe, *cmean, *crstd;
	const int *tok;
	float *res;                /* residual_layernorm_forward: res = res_a + res_b */
	const float *res_a, *res_b;
	int B, T, N, C;
	float eps;                 /* rmsnorm_forward */
	int row_blocks, channel_blocks; /* layernorm_backward's two kinds of block */
};

/* The pool and the blocks (threads.c). */
void parallel_for(int count, int threads, void (*fn)(void *arg, int block, int count), void *arg);
void split_range(int total, int align, int k, int count, int *lo, int *hi);
void split_size(size_t total, int k, int count, size_t *lo, size_t *hi);
int blocks_of(size_t total, size_t each);
int threads_for(double flops);

/* The layers (one file each), in the order of struct ops. */
void cpu_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C);
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C);
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias, int N, int C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp, const float *weight, const float *mean, const float *rstd, int N, int C);
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp, const float *weight, int N, int C, int OC);
void cpu_attention_forward(float *out, float *stats, const float *qkv, int B, int T, int NH, int HS);
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *stats, int B, int T, int NH, int HS);
void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
void cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight, const float *rstd, int N, int C);
void cpu_rope_forward(float *qkv, const float *raw, const float *rope, int B, int T, int NH, int KV, int HS);
void cpu_rope_backward(float *draw, const float *dqkv, const float *rope, int B, int T, int NH, int KV, int HS);
void cpu_swiglu_forward(float *out, const float *inp, int N, int I);
void cpu_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int I);
void cpu_gelu_forward(float *out, const float *inp, size_t n);
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void cpu_residual_forward(float *out, const float *a, const float *b, size_t n);
void cpu_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *x, const float *y, const float *weight, const float *bias, int N, int C);
void cpu_residual_backward(float *da, float *db, const float *dout, size_t n);
void cpu_softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V, int Vp);
void cpu_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp);
void cpu_softmax_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N, int V, int Vp);
void cpu_vocab_encoder_forward(float *out, const int *inp, const float *wte, int N, int C, int v0, int vn);
void cpu_vocab_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C, int v0, int vn);
void cpu_vocab_softmax_max(float *rows, const float *logits, int N, int nv, int vn);
void cpu_vocab_softmax_exp(float *logits, float *sums, const float *max, int N, int nv, int vn);
void cpu_vocab_softmax_finish(float *losses, float *logits, const float *sums, const int *targets, int N, int nv, int vn, int v0);
void cpu_vocab_xent_backward(float *probs, const int *targets, float dloss, int N, int nv, int vn, int v0);
void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2);
void cpu_zero(float *p, size_t n);
void cpu_scale(float *p, size_t n, float s);
double cpu_sumsq(const float *x, size_t n);

/*
 * Precision (precision.c): the calling thread's setting, and its bf16
 * copies, one scratch slot per operand of a product.
 */
enum { CPU_BF16_INP, CPU_BF16_WEIGHT, CPU_BF16_DOUT, CPU_BF16_SLOTS };
void cpu_set_precision(enum ops_precision p);
int cpu_bf16_on(void);
/* x (n) rounded to bf16 into the thread's slot (kept until the slot's next use). */
const float *cpu_bf16_rounded(int slot, const float *x, size_t n);
/* p (n) rounded to bf16 in place (ops->round_bf16). */
void cpu_round_bf16(float *p, size_t n);

/* Memory (memory.c): host memory. */
void *cpu_host_alloc(size_t bytes);
void cpu_host_free(void *p);
void cpu_host_copy(void *dst, const void *src, size_t bytes);
void cpu_host_sync(void);
void cpu_host_mem_info(size_t *free_bytes, size_t *total_bytes);

#endif
