/*
 * kernels/ops.h - what a compute backend provides: the layers of a GPT-2
 * or Llama decoder as forward/backward pairs over plain float arrays.
 *
 * A backend is a table of function pointers (struct ops). The CPU backend
 * (ops_cpu, kernels/cpu) implements every entry: matrix products on CBLAS,
 * the rest in C loops. The CUDA backend (ops_cuda, kernels/cuda, only in
 * builds with HAVE_CUDA) takes device pointers and implements the entries it
 * has so far; the others are NULL. Both call the element-wise formulas of
 * kernels/math.h.
 *
 * Conventions (as llm.c's train_gpt2.c):
 *   - arrays are row-major; shapes are given in the comments, N = B*T rows;
 *   - every *_backward ADDS into its gradient outputs (dinp, dweight, ...),
 *     so gradients of a tensor used twice accumulate; callers zero them;
 *   - optional pointers (bias, dbias, targets) may be NULL.
 * Widths are parameters, never taken from a global model: a tensor-parallel
 * rank calls the same functions with its local slice (fewer heads, fewer
 * output channels).
 */
#ifndef STORK_KERNELS_OPS_H
#define STORK_KERNELS_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The arithmetic of the linear layers' matrix products (train.precision).
 * Storage, accumulation and every other kernel stay fp32, except that on
 * GPUs bf16 also lets attention's own fp32 products use TF32.
 */
/* Floats attention keeps per row of scores between its passes: the max and the exp-sum. */
#define OPS_ATT_STATS 2

enum ops_precision {
	OPS_FP32 = 0, /* fp32 inputs and products */
	OPS_TF32 = 1, /* GPU: inputs rounded to TF32 on the tensor cores; the CPU computes fp32 */
	OPS_BF16 = 2, /* inputs rounded to bf16 (math_bf16_round), products summed in fp32 */
};

/* "fp32", "tf32" or "bf16" (train.precision's names). */
static inline const char *ops_precision_name(enum ops_precision p)
{
	return p == OPS_BF16 ? "bf16" : p == OPS_TF32 ? "tf32" : "fp32";
}

struct ops {
	const char *name;

	/*
	 * The precision of the calling thread's matmul_forward and
	 * matmul_backward from now on (OPS_FP32 until set). The CPU emulates
	 * bf16 exactly: it rounds the inputs with math_bf16_round into
	 * scratch copies and multiplies those in fp32.
	 */
	void (*set_precision)(enum ops_precision p);

	/*
	 * out (N=B*T, C) = wte[inp[n]] + wpe[n % T]; wte (V, C), wpe (maxT, C),
	 * or NULL: no position embedding (Llama's positions are rotary).
	 */
	void (*encoder_forward)(float *out, const int *inp, const float *wte, const float *wpe,
				int B, int T, int C);
	/* dwte, dwpe += scatter of dout (B*T, C); dwpe NULL when wpe was. */
	void (*encoder_backward)(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
				 int T, int C);

	/* out (N, C) = LayerNorm(inp (N, C)) * weight (C) + bias (C); saves mean, rstd (N). */
	void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
				  const float *weight, const float *bias, int N, int C);
	void (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
				   const float *inp, const float *weight, const float *mean,
				   const float *rstd, int N, int C);

	/*
	 * out (N, OC) = inp (N, C) @ weight (OC, C)^T (+ bias (OC) if not NULL).
	 * A column-parallel shard passes its OC rows of weight; a row-parallel
	 * shard passes its own (OC, C/tp) block and no bias (the bias is added
	 * once, after the partial sums are all-reduced).
	 */
	void (*matmul_forward)(float *out, const float *inp, const float *weight, const float *bias,
			       int N, int C, int OC);
	/* dinp (N, C) += dout @ weight; dweight (OC, C) += dout^T @ inp; dbias (OC) += sum dout. */
	void (*matmul_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
				const float *inp, const float *weight, int N, int C, int OC);

	/*
	 * Causal multi-head self-attention. qkv (B, T, 3*NH*HS) holds q, k, v
	 * one after the other in each row; out (B, T, NH*HS). The T x T softmax
	 * weights are not kept: stats (B, NH, T, OPS_ATT_STATS) keeps each row's
	 * max score and exp-sum, from which the backward pass computes the
	 * weights again (math_attention_weight), bit for bit.
	 */
	void (*attention_forward)(float *out, float *stats, const float *qkv, int B, int T, int NH,
				  int HS);
	/* dqkv (B, T, 3*NH*HS) += gradient of the attention given dout (B, T, NH*HS). */
	void (*attention_backward)(float *dqkv, const float *dout, const float *qkv,
				   const float *stats, int B, int T, int NH, int HS);

	/*
	 * The same attention fused (NULL where a backend has none): the
	 * scores never leave on-chip memory, the stats are the same two
	 * floats a row. The backward pass also takes out, the forward's
	 * output (rowsum(dout * out) is the softmax backward's row term).
	 * Equal to the entries above within the rounding of the precision.
	 */
	void (*attention_fused_forward)(float *out, float *stats, const float *qkv, int B, int T,
					int NH, int HS);
	void (*attention_fused_backward)(float *dqkv, const float *dout, const float *out,
					 const float *qkv, const float *stats, int B, int T, int NH,
					 int HS);

	/*
	 * RMSNorm (Llama): out (N, C) = inp * rstd * weight (C), rstd (N) =
	 * 1 / sqrt(mean(inp^2) + eps) saved for the backward pass, which
	 * adds into dinp and dweight.
	 */
	void (*rmsnorm_forward)(float *out, float *rstd, const float *inp, const float *weight,
				int N, int C, float eps);
	void (*rmsnorm_backward)(float *dinp, float *dweight, const float *dout, const float *inp,
				 const float *weight, const float *rstd, int N, int C);

	/*
	 * Rotary positions and grouped-query heads, from the q, k, v
	 * projection's output raw (B, T, (NH + 2*KV)*HS) = [NH query heads |
	 * KV key heads | KV value heads] to the attention's layout qkv (B, T,
	 * 3*NH*HS): q and k turned by position t (rotate_half pairing:
	 * dimension i of a head with i + HS/2, angle from rope (T, HS/2, 2) =
	 * cos, sin of t * inv_freq[i]), each key and value head repeated for
	 * the NH/KV query heads of its group. The backward pass turns back
	 * and adds each group's gradients into draw.
	 */
	void (*rope_forward)(float *qkv, const float *raw, const float *rope, int B, int T, int NH,
			     int KV, int HS);
	void (*rope_backward)(float *draw, const float *dqkv, const float *rope, int B, int T,
			      int NH, int KV, int HS);

	/*
	 * SwiGLU (Llama's MLP): out (N, I) = silu(gate) * up where inp (N, 2I)
	 * holds gate then up in each row; dinp (N, 2I) += the backward.
	 */
	void (*swiglu_forward)(float *out, const float *inp, int N, int I);
	void (*swiglu_backward)(float *dinp, const float *inp, const float *dout, int N, int I);

	/* out (n) = GELU(inp); dinp += GELU'(inp) * dout. */
	void (*gelu_forward)(float *out, const float *inp, size_t n);
	void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n);

	/*
	 * residual_forward, then layernorm_forward of its result, in one pass
	 * over each row (the row is still in cache for the statistics):
	 * res (N, C) = a + b (res may be a or b), out = LayerNorm(res) *
	 * weight + bias, mean and rstd saved. The same bits as the two calls.
	 */
	void (*residual_layernorm_forward)(float *res, float *out, float *mean, float *rstd,
					   const float *a, const float *b, const float *weight,
					   const float *bias, int N, int C);

	/* out (n) = a + b; da += dout, db += dout. */
	void (*residual_forward)(float *out, const float *a, const float *b, size_t n);
	void (*residual_backward)(float *da, float *db, const float *dout, size_t n);

	/*
	 * Softmax over the first V of Vp logits of each of N rows, in place:
	 * logits (N, Vp) becomes probabilities, padding columns [V, Vp) become
	 * 0. With targets (N) not NULL, losses (N) = -log p[target].
	 */
	void (*softmax_xent_forward)(float *losses, float *logits, const int *targets, int N, int V,
				     int Vp);
	/*
	 * In place: probs (N, Vp) becomes dlogits = (p - onehot(target)) * dloss
	 * for the first V columns, 0 in the padding. dloss is the gradient of
	 * the total loss with respect to each row's loss (1/N for a mean).
	 */
	void (*softmax_xent_backward)(float *probs, const int *targets, float dloss, int N, int V,
				      int Vp);
	/*
	 * The classifier of a training step fused: softmax, cross-entropy
	 * and its gradient in one pass over each row, never writing the
	 * probabilities. losses (N) = -log p[target], and in place logits
	 * (N, Vp) become dlogits = (p - onehot(target)) * dloss, 0 in the
	 * padding: the values of softmax_xent_forward then
	 * softmax_xent_backward, bit for bit (the same formulas and sums).
	 */
	void (*softmax_xent_fused)(float *losses, float *logits, const int *targets, float dloss,
				   int N, int V, int Vp);

	/*
	 * Tensor parallelism over the vocabulary (daemon/engine/parallel/tensor_parallel.c):
	 * this rank holds rows [v0, v0 + vn) of wte and the same columns of
	 * the logits; of those the first nv are real tokens (the rest is
	 * padding). The collectives between the calls are the caller's.
	 *
	 * vocab_encoder_forward: out (B*T, C) = wte[inp[n] - v0] where the
	 * token is in the slice, else 0 (the all-reduce over the slices then
	 * gives each row from its one holder, bit for bit); no positions.
	 * vocab_encoder_backward: dwte += the rows of dout (B*T, C) whose token
	 * is in the slice, dwpe (T, C; NULL: none) += every row of position t,
	 * in position order.
	 */
	void (*vocab_encoder_forward)(float *out, const int *inp, const float *wte, int N, int C,
				      int v0, int vn);
	void (*vocab_encoder_backward)(float *dwte, float *dwpe, const float *dout, const int *inp,
				       int B, int T, int C, int v0, int vn);
	/*
	 * The softmax over the slices, in three steps around the caller's
	 * all-reduces of rows (N floats each):
	 * vocab_softmax_max: rows (N) = the largest of the first nv of each
	 * row's vn logits (-FLT_MAX when nv is 0); then the MAX all-reduce.
	 * vocab_softmax_exp: in place, logits = exp(logit - max[r]) for the
	 * first nv columns; sums (N) = their sum in column order, in double,
	 * rounded to float once; then the SUM all-reduce.
	 * vocab_softmax_finish: logits /= sums[r], padding columns 0; with
	 * targets, losses[r] = -log p[target - v0] where the target is in the
	 * slice, else 0 (then the SUM all-reduce of the losses).
	 */
	void (*vocab_softmax_max)(float *rows, const float *logits, int N, int nv, int vn);
	void (*vocab_softmax_exp)(float *logits, float *sums, const float *max, int N, int nv,
				  int vn);
	void (*vocab_softmax_finish)(float *losses, float *logits, const float *sums,
				     const int *targets, int N, int nv, int vn, int v0);
	/* In place: probs (N, vn) become dlogits (math_xent_dlogit), nv columns; 0 after. */
	void (*vocab_xent_backward)(float *probs, const int *targets, float dloss, int N, int nv,
				    int vn, int v0);

	/*
	 * AdamW over n parameters (kernels/math.h: math_adamw); bc1, bc2 are the
	 * bias corrections 1 - beta^t of step t.
	 */
	void (*adamw)(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		      float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2);

	/* p (n) = 0: gradients and activation gradients before they accumulate. */
	void (*zero)(float *p, size_t n);
	/* p (n) *= s: gradient averaging and clipping. */
	void (*scale)(float *p, size_t n, float s);
	/*
	 * p (n) rounded to bf16 in place (math_bf16_round): an activation as
	 * bf16 storage holds it (gpt2_set_bf16_activations).
	 */
	void (*round_bf16)(float *p, size_t n);
	/*
	 * Sum of squares of p (n) in double (the global gradient norm), summed
	 * in an order that depends only on n, not on the thread count.
	 */
	double (*sumsq)(const float *p, size_t n);

	/* Memory of this backend: host memory for cpu, device memory for cuda (cudaMalloc, never managed). NULL when out of memory. */
	void *(*alloc)(size_t bytes);
	void (*free)(void *p);
	/* host -> backend and backend -> host copies; both return when the copy is done (download waits for the kernels issued before it). */
	void (*upload)(void *dst, const void *host_src, size_t bytes);
	void (*download)(void *host_dst, const void *src, size_t bytes);
	/* backend -> backend copy, in order with the kernels. */
	void (*copy)(void *dst, const void *src, size_t bytes);
	/* Host memory for transfers (pinned for cuda, cudaMallocHost; plain aligned memory for cpu). */
	void *(*host_alloc)(size_t bytes);
	void (*host_free)(void *p);
	/* Wait for every kernel issued by the calling thread. */
	void (*sync)(void);
	/* Free and total bytes of the backend's memory (cpu: 0, 0 = unknown). */
	void (*mem_info)(size_t *free_bytes, size_t *total_bytes);
};

/* The CPU backend: host arrays, every entry implemented. */
extern const struct ops ops_cpu;

/*
 * Threads the CPU kernels of the calling thread use (a rank's
 * worker thread calls this once after it is pinned). n <= 0 means: as many
 * as CPUs in the calling thread's affinity mask. Helper threads inherit the
 * caller's affinity, so a rank never computes outside its cores. OpenBLAS
 * itself is kept single-threaded (its thread count is process-wide). Results
 * are the same, bit for bit, for any n: work is cut into blocks that depend
 * on the sizes only.
 */
void ops_cpu_set_threads(int n);
/* Threads the calling thread's kernels use now. */
int ops_cpu_threads(void);
/*
 * fn(arg, k, count) for every block k in [0, count) on the calling thread
 * and its helpers (the threads above): host work outside the kernels, such
 * as filling the initial parameters, on the rank's own cores.
 */
void ops_cpu_parallel_for(int count, void (*fn)(void *arg, int block, int count), void *arg);

/*
 * OpenBLAS core type this CPU should use when the kernels OpenBLAS loaded
 * are AVX2 (or older) on a CPU with AVX-512, or NULL. That happens when the
 * library does not know the CPU, or when OPENBLAS_CORETYPE asks for older
 * kernels (e.g. Haswell): on an AVX-512 CPU the Haswell sgemm runs at half
 * the speed, at most 50% of the fp32 peak. (OpenBLAS 0.3.21 itself picks
 * Cooperlake, with the SkylakeX sgemm, on AMD Zen 5.) The value takes
 * effect only through the environment variable OPENBLAS_CORETYPE before the
 * library loads, so a program sets it for the processes it starts (or
 * re-executes itself) when the variable is unset; a value the user set
 * wins, and this function then says what it costs.
 */
const char *ops_cpu_blas_coretype_hint(void);

/*
 * First thing in the main of a program that links the CPU backend: set
 * OPENBLAS_CORETYPE (when ops_cpu_blas_coretype_hint says so) and
 * OPENBLAS_NUM_THREADS=1 (the backend runs its own threads and calls the
 * BLAS single-threaded; OpenBLAS's own workers would only spin on the
 * ranks' cores), each unless the user set it, and re-execute the program
 * with argv once: OpenBLAS reads them only as it loads. The signal mask,
 * open descriptors and the process id carry over.
 */
void ops_cpu_blas_reexec(char **argv);

#ifdef HAVE_CUDA
/* The CUDA backend: device arrays; entries not written yet are NULL. */
extern const struct ops ops_cuda;
#endif

#ifdef __cplusplus
}
#endif
#endif
