/*
 * kernels/cuda/flash_attention.cu - causal self-attention fused: the T x T
 * scores live only in shared memory, a tile at a time.
 *
 * Every kernel is a block of WARPS warps over one (batch, head) pair; each
 * warp owns 16 rows of the block's 64 (query rows, or keys), so after a
 * tile is loaded the warps work alone and meet only at the next load.
 *
 * The forward pass (a block per 64 query rows) walks the key tiles up to
 * the diagonal with the online softmax: each tile of scores raises the
 * rows' running max, rescales what the output has summed so far, and adds
 * its weights times the values. What stays in global memory is the output
 * and, per row, the max and the exp-sum (ops.h's stats), as the unfused
 * path keeps them.
 *
 * The backward pass needs D = rowsum(dout * out) per row (the softmax
 * backward's rowsum(p * dp), which equals it), computed first; then two
 * kernels compute the weights again from the stats with the formula both
 * passes share (fused_weight):
 *   a block per key tile:   dv += p^T dout,  dk += ds^T q   over the query tiles after it,
 *   a block per query tile: dq += ds k                      over the key tiles up to it,
 * with dp = dout v^T and ds = math_attention_dscore(p, dp, D, scale). Each
 * gradient element is summed by one warp in a fixed order: no atomics, so a
 * run repeats its bits. The sums stay in registers for the whole loop.
 *
 * The products run on the tensor cores (WMMA: bf16 or TF32 inputs, fp32
 * sums) as the thread's precision says (ops->set_precision), or as plain
 * fp32 multiply-adds under fp32, the reference the other two are measured
 * against (and on GPUs before sm_80). Heads up to 128 wide are padded with
 * zeros to 32, 64 or 128 columns; wider heads, or a GPU whose shared
 * memory per block is too small, take the unfused path (attention.cu).
 * So do fp32 and TF32 unless kernels_cuda_fused_attention_everywhere: on
 * an H100 (GPT-2 124M, B=16, T=1024) these kernels took 34 ms a step in
 * bf16 against the unfused path's 56, but 94 in TF32 against 56. In bf16,
 * heads up to 64 wide go to the register-tile kernels of
 * flash_attention_mma.cu instead (on an H200: 18 ms where these took 34;
 * kernels_cuda_attention_mma(0) keeps these).
 */
#include "config.h"
#include "kernels/cuda/attention_head.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/device.h"
#include "kernels/math.h"

#include <cfloat>
#include <cstdint>
#include <cuda_bf16.h>
#include <mma.h>
#include <type_traits>

#define WARPS 4
#define FA_THREADS (32 * WARPS)
#define ROWS (16 * WARPS) /* query rows, or keys, of a block */
#define KEYS 64           /* keys of a tile the query rows meet */
#define PAD 8             /* elements after each shared row: fewer bank conflicts, WMMA alignment kept */
#define LK (KEYS + PAD)   /* leading dimension of a warp's scores (16 x KEYS, or 16 x ROWS) */
static_assert(ROWS == KEYS, "a backward block's keys are a forward block's query rows");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FA_TENSOR_CORES 1
#else
#define FA_TENSOR_CORES 0
#endif

/* What the tiles of q, k, v and the weights are stored as in shared memory. */
template <int P> struct fa_elem {
	typedef float type;
};
template <> struct fa_elem<OPS_BF16> {
	typedef __nv_bfloat16 type;
};

__device__ static inline void put(float *dst, float x)
{
	*dst = x;
}

/* bf16 rounded to nearest even, as math_bf16_bits rounds (one instruction on sm_80+). */
__device__ static inline void put(__nv_bfloat16 *dst, float x)
{
	*dst = __float2bfloat16_rn(x);
}

/*
 * exp(score - max): the weights' numerator in both passes. These kernels
 * spend more instructions on the weights than on the products, so they use
 * the GPU's exponential (ex2.approx: a multiply and one instruction, about
 * 2 ulp) rather than math_exp's polynomial; both passes call this one, so
 * the backward pass still sees the forward's weights, and the result
 * agrees with the unfused path and the CPU within fp32 rounding.
 */
__device__ static inline float fused_exp(float score, float max)
{
	return __expf(score - max);
}

/* A weight from its score, its row's max and the reciprocal of its row's exp-sum. */
__device__ static inline float fused_weight(float score, float max, float inv_sum)
{
	return fused_exp(score, max) * inv_sum;
}

/*
 * A 16 x 16 fp32 sum held by one warp, and the products that add into it:
 * mma(A, B, K) adds op(A) op(B), op(A) 16 x K and op(B) K x 16, both in
 * shared memory; op(A) is A[m * lda + k], or with TA A[k * lda + m]; op(B)
 * is B[k * ldb + n], or with TB B[n * ldb + k]. This one computes in fp32
 * multiply-adds (lane l holds elements l + 32 e); the specialisation below
 * on the tensor cores.
 */
template <int P, bool TC = FA_TENSOR_CORES && P != OPS_FP32> struct warp_tile {
	float x[8];

	__device__ void zero()
	{
		_Pragma("unroll") for (int e = 0; e < 8; e++)
			x[e] = 0.0f;
	}
	__device__ void load(const float *C, int ldc)
	{
		_Pragma("unroll") for (int e = 0; e < 8; e++) {
			int i = threadIdx.x % 32 + 32 * e;

			x[e] = C[i / 16 * ldc + i % 16];
		}
	}
	__device__ void store(float *C, int ldc) const
	{
		_Pragma("unroll") for (int e = 0; e < 8; e++) {
			int i = threadIdx.x % 32 + 32 * e;

			C[i / 16 * ldc + i % 16] = x[e];
		}
	}
	template <bool TA, bool TB, typename E>
	__device__ void mma(const E *A, int lda, const E *B, int ldb, int K)
	{
		_Pragma("unroll") for (int e = 0; e < 8; e++) {
			int i = threadIdx.x % 32 + 32 * e, m = i / 16, n = i % 16;
			float s = x[e];

			_Pragma("unroll 1") for (int k = 0; k < K; k++)
				s += (float)(TA ? A[k * lda + m] : A[m * lda + k]) *
				     (float)(TB ? B[n * ldb + k] : B[k * ldb + n]);
			x[e] = s;
		}
	}
};

#if FA_TENSOR_CORES
template <int P> struct warp_tile<P, true> {
	typedef typename std::conditional<P == OPS_BF16, __nv_bfloat16,
					  nvcuda::wmma::precision::tf32>::type W;
	static constexpr int KS = P == OPS_BF16 ? 16 : 8;
	nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, KS, float> f;

	__device__ void zero()
	{
		nvcuda::wmma::fill_fragment(f, 0.0f);
	}
	__device__ void load(const float *C, int ldc)
	{
		nvcuda::wmma::load_matrix_sync(f, C, ldc, nvcuda::wmma::mem_row_major);
	}
	__device__ void store(float *C, int ldc) const
	{
		nvcuda::wmma::store_matrix_sync(C, f, ldc, nvcuda::wmma::mem_row_major);
	}
	template <bool TA, bool TB, typename E>
	__device__ void mma(const E *A, int lda, const E *B, int ldb, int K)
	{
		using namespace nvcuda;
		typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
		typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;

		for (int k = 0; k < K; k += KS) {
			wmma::fragment<wmma::matrix_a, 16, 16, KS, W, LA> a;
			wmma::fragment<wmma::matrix_b, 16, 16, KS, W, LB> b;

			wmma::load_matrix_sync(a, TA ? A + k * lda : A + k, lda);
			wmma::load_matrix_sync(b, TB ? B + k : B + k * ldb, ldb);
			if constexpr (P == OPS_TF32) {
				for (int e = 0; e < a.num_elements; e++)
					a.x[e] = wmma::__float_to_tf32(a.x[e]);
				for (int e = 0; e < b.num_elements; e++)
					b.x[e] = wmma::__float_to_tf32(b.x[e]);
			}
			wmma::mma_sync(f, a, b, f);
		}
	}
};
#endif

__device__ static inline void put4(float *dst, float4 v)
{
	*(float4 *)dst = v;
}

__device__ static inline void put4(__nv_bfloat16 *dst, float4 v)
{
	put(dst, v.x), put(dst + 1, v.y), put(dst + 2, v.z), put(dst + 3, v.w);
}

/*
 * Rows t0 .. t0+ROWS-1 of one head's (T, HS) slice of src (row t at src + t
 * * stride) into dst (ROWS x D, leading dimension D + PAD); rows past T and
 * columns past HS are zeros, so the padded products are the true ones.
 * Where the rows are whole float4s (HS and the strides multiples of 4),
 * each thread issues all its loads before it stores any: a tile's loads
 * are in flight together instead of one latency after another.
 */
template <int D, typename E>
__device__ static void load_rows(E *dst, const float *src, size_t stride, int t0, int T, int HS)
{
	constexpr int V = D / 4, PER = ROWS * V / FA_THREADS;
	static_assert(ROWS * V % FA_THREADS == 0, "a tile is whole float4s per thread");

	if (HS % 4 == 0 && stride % 4 == 0 && (uintptr_t)src % 16 == 0) {
		float4 buf[PER];

#pragma unroll
		for (int j = 0; j < PER; j++) {
			int i = threadIdx.x + j * FA_THREADS, t = t0 + i / V, c = i % V * 4;

			buf[j] = t < T && c < HS ? *(const float4 *)(src + (size_t)t * stride + c) :
						   make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int j = 0; j < PER; j++) {
			int i = threadIdx.x + j * FA_THREADS;

			put4(dst + i / V * (D + PAD) + i % V * 4, buf[j]);
		}
		return;
	}
	for (int i = threadIdx.x; i < ROWS * D; i += FA_THREADS) {
		int r = i / D, d = i % D, t = t0 + r;

		put(dst + r * (D + PAD) + d, t < T && d < HS ? src[(size_t)t * stride + d] : 0.0f);
	}
}

/* The 16 x D sums of a warp (D / 16 tiles) through its staging area into dst rows t0.. (+=). */
template <int P, int D>
__device__ static void add_rows(float *dst, size_t stride, const warp_tile<P> *acc, float *stage,
				int t0, int T, int HS)
{
	#pragma unroll
	for (int n = 0; n < D / 16; n++)
		acc[n].store(stage + n * 16, D + PAD);
	__syncwarp();
	for (int i = threadIdx.x % 32; i < 16 * HS; i += 32) {
		int r = i / HS, d = i % HS;

		if (t0 + r < T)
			dst[(size_t)(t0 + r) * stride + d] += stage[r * (D + PAD) + d];
	}
	__syncwarp();
}

/* Shared memory of the forward kernel: q, k, v tiles, then per warp its scores, weights, output. */
template <typename E> static size_t forward_smem(int D)
{
	return (size_t)(ROWS + 2 * KEYS) * (D + PAD) * sizeof(E) +
	       (size_t)WARPS * 16 * (LK * (sizeof(float) + sizeof(E)) + (D + PAD) * sizeof(float));
}

/*
 * One tile of a warp's 16 rows of scores S (q.k, unscaled) into their
 * running softmax: the weights exp(s - max) into Pw, the rows' max and sum
 * (m, l: two lanes a row, each with both) updated, and the output Ow
 * rescaled to the new max. Keys after a row's position, and rows past T,
 * are masked.
 */
template <typename E>
__device__ static void online_softmax(E *Pw, const float *S, float *Ow, float &m, float &l, int t,
				      int k0, int T, int D, float scale)
{
	int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
	float m_new = m, sum = 0.0f, alpha;

	for (int c = half; c < KEYS; c += 2)
		if (t < T && k0 + c <= t)
			m_new = fmaxf(m_new, S[r * LK + c] * scale);
	m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
	for (int c = half; c < KEYS; c += 2) {
		float p = t < T && k0 + c <= t ? fused_exp(S[r * LK + c] * scale, m_new) : 0.0f;

		put(Pw + r * LK + c, p);
		sum += p;
	}
	sum += __shfl_xor_sync(0xffffffffu, sum, 1);
	alpha = fused_exp(m, m_new);
	for (int d = half; d < D; d += 2)
		Ow[r * (D + PAD) + d] *= alpha;
	m = m_new;
	l = l * alpha + sum;
}

template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	forward_kernel(float *out, float *stats, const float *qkv, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	int w = threadIdx.x / 32, lane = threadIdx.x % 32;
	E *Qs = (E *)smem, *Ks = Qs + ROWS * (D + PAD), *Vs = Ks + KEYS * (D + PAD);
	float *S = (float *)(Vs + KEYS * (D + PAD)) + w * 16 * LK;
	E *Pw = (E *)((float *)(Vs + KEYS * (D + PAD)) + WARPS * 16 * LK) + w * 16 * LK;
	float *Ow = (float *)((E *)((float *)(Vs + KEYS * (D + PAD)) + WARPS * 16 * LK) +
			      WARPS * 16 * LK) +
		    w * 16 * (D + PAD);
	/* the longest rows (last tiles) first: the short ones fill in behind them */
	int q0 = (gridDim.x - 1 - blockIdx.x) * ROWS, kend = min(T, q0 + ROWS);
	int t = q0 + 16 * w + lane / 2; /* this lane's row */
	float m = -FLT_MAX, l = 0.0f;
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	load_rows<D>(Qs, x.q, x.row3, q0, T, HS);
	for (int i = lane; i < 16 * (D + PAD); i += 32)
		Ow[i] = 0.0f;
	for (int k0 = 0; k0 < kend; k0 += KEYS) {
		__syncthreads();
		load_rows<D>(Ks, x.k, x.row3, k0, T, HS);
		load_rows<D>(Vs, x.v, x.row3, k0, T, HS);
		__syncthreads();
		for (int n = 0; n < KEYS / 16; n++) {
			warp_tile<P> s;

			s.zero();
			s.template mma<false, true>(Qs + 16 * w * (D + PAD), D + PAD,
						    Ks + 16 * n * (D + PAD), D + PAD, D);
			s.store(S + 16 * n, LK);
		}
		__syncwarp();
		online_softmax(Pw, S, Ow, m, l, t, k0, T, D, scale);
		__syncwarp();
		#pragma unroll
		for (int n = 0; n < D / 16; n++) {
			warp_tile<P> o;

			o.load(Ow + 16 * n, D + PAD);
			o.template mma<false, false>(Pw, LK, Vs + 16 * n, D + PAD, KEYS);
			o.store(Ow + 16 * n, D + PAD);
		}
		__syncwarp();
	}
	for (int i = lane % 2; i < HS; i += 2)
		if (t < T)
			out[x.off + (size_t)t * x.row + i] = Ow[lane / 2 * (D + PAD) + i] / l;
	if (t < T && lane % 2 == 0) {
		stats[(x.bh * T + t) * OPS_ATT_STATS] = m;
		stats[(x.bh * T + t) * OPS_ATT_STATS + 1] = l;
	}
}

/* D (B, NH, T) = rowsum(dout * out) of each head's row: one warp a row, in a fixed order. */
__global__ static void rowdot_kernel(float *rowdot, const float *dout, const float *out, int B,
				     int T, int NH, int HS)
{
	int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
	float s = 0.0f;

	if (w >= B * T * NH)
		return;
	int h = w % NH, t = (w / NH) % T, b = w / NH / T;
	size_t at = ((size_t)b * T + t) * NH * HS + (size_t)h * HS;

	for (int d = lane; d < HS; d += 32)
		s += dout[at + d] * out[at + d];
	s = warp_sum(s);
	if (lane == 0)
		rowdot[((size_t)b * NH + h) * T + t] = s;
}

/*
 * The shared memory of a backward block: q and dout of ROWS query rows, k
 * and v of KEYS keys, the query rows' stats and D, and per warp its 16 x 64
 * scores and their gradients in fp32 (also the staging area of its sums)
 * and as E for the products.
 */
template <typename E> struct bwd_tiles {
	E *Qs, *dOs, *Ks, *Vs;
	float *row_max, *row_inv, *rowdot; /* row_inv: 1 / the row's exp-sum */
	float *S, *dP; /* this warp's */
	E *Pw, *dSw;   /* this warp's */
};

template <typename E> static size_t backward_smem(int D)
{
	return (size_t)(2 * ROWS + 2 * KEYS) * (D + PAD) * sizeof(E) + 3 * ROWS * sizeof(float) +
	       (size_t)WARPS * 2 * 16 * LK * (sizeof(float) + sizeof(E));
}

template <typename E> __device__ static bwd_tiles<E> bwd_layout(unsigned char *smem, int D)
{
	int w = threadIdx.x / 32;
	bwd_tiles<E> s;
	float *f;
	E *e;

	s.Qs = (E *)smem;
	s.dOs = s.Qs + ROWS * (D + PAD);
	s.Ks = s.dOs + ROWS * (D + PAD);
	s.Vs = s.Ks + KEYS * (D + PAD);
	f = (float *)(s.Vs + KEYS * (D + PAD));
	s.S = f + w * 2 * 16 * LK;
	s.dP = s.S + 16 * LK;
	e = (E *)(f + WARPS * 2 * 16 * LK);
	s.Pw = e + w * 2 * 16 * LK;
	s.dSw = s.Pw + 16 * LK;
	s.row_max = (float *)(e + WARPS * 2 * 16 * LK);
	s.row_inv = s.row_max + ROWS;
	s.rowdot = s.row_inv + ROWS;
	return s;
}

/* The query rows' q, dout, stats and D; the caller syncs after. */
template <int D, typename E>
__device__ static void load_query_rows(bwd_tiles<E> &s, const fa_head &x, const float *dout,
				       const float *stats, const float *rowdot, int q0, int T, int HS)
{
	load_rows<D>(s.Qs, x.q, x.row3, q0, T, HS);
	load_rows<D>(s.dOs, dout + x.off, x.row, q0, T, HS);
	for (int r = threadIdx.x; r < ROWS; r += FA_THREADS) {
		int t = q0 + r < T ? q0 + r : T - 1;

		s.row_max[r] = stats[(x.bh * T + t) * OPS_ATT_STATS];
		s.row_inv[r] = 1.0f / stats[(x.bh * T + t) * OPS_ATT_STATS + 1];
		s.rowdot[r] = rowdot[x.bh * T + t];
	}
}

/* One weight and its score gradient from a score and its weight's gradient, 0 where masked. */
template <typename E>
__device__ static void weight_and_dscore(E *p_out, E *ds_out, float s, float dp, const float *m,
					 const float *inv_sum, const float *rowdot, int r, bool visible,
					 float scale)
{
	float p = 0.0f, ds = 0.0f;

	if (visible) {
		p = fused_weight(s * scale, m[r], inv_sum[r]);
		ds = math_attention_dscore(p, dp, rowdot[r], scale);
	}
	if (p_out)
		put(p_out, p);
	put(ds_out, ds);
}

/*
 * dk, dv of one block of keys (a warp's 16 each): the sums over every query
 * row at or after them. A warp computes its keys' scores transposed (k
 * q^T, v dout^T: 16 keys x 64 query rows), so its sums are products of
 * its own tiles.
 */
template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	backward_kv_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			   const float *rowdot, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	bwd_tiles<E> s = bwd_layout<E>(smem, D);
	int w = threadIdx.x / 32, lane = threadIdx.x % 32, k0 = blockIdx.x * KEYS;
	const E *Kw, *Vw;
	warp_tile<P> dK[D / 16], dV[D / 16];
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	load_rows<D>(s.Ks, x.k, x.row3, k0, T, HS);
	load_rows<D>(s.Vs, x.v, x.row3, k0, T, HS);
	Kw = s.Ks + 16 * w * (D + PAD);
	Vw = s.Vs + 16 * w * (D + PAD);
	#pragma unroll
	for (int n = 0; n < D / 16; n++)
		dK[n].zero(), dV[n].zero();
	for (int q0 = k0 / ROWS * ROWS; q0 < T; q0 += ROWS) {
		__syncthreads();
		load_query_rows<D>(s, x, dout, stats, rowdot, q0, T, HS);
		__syncthreads();
		for (int n = 0; n < ROWS / 16; n++) {
			warp_tile<P> a;

			a.zero();
			a.template mma<false, true>(Kw, D + PAD, s.Qs + 16 * n * (D + PAD), D + PAD, D);
			a.store(s.S + 16 * n, LK);
			a.zero();
			a.template mma<false, true>(Vw, D + PAD, s.dOs + 16 * n * (D + PAD), D + PAD, D);
			a.store(s.dP + 16 * n, LK);
		}
		__syncwarp();
		for (int i = lane; i < 16 * ROWS; i += 32) {
			int kr = i / ROWS, qc = i % ROWS, t = q0 + qc;

			weight_and_dscore(s.Pw + kr * LK + qc, s.dSw + kr * LK + qc, s.S[kr * LK + qc],
					  s.dP[kr * LK + qc], s.row_max, s.row_inv, s.rowdot, qc,
					  t < T && k0 + 16 * w + kr <= t, scale);
		}
		__syncwarp();
		#pragma unroll
		for (int n = 0; n < D / 16; n++) {
			dV[n].template mma<false, false>(s.Pw, LK, s.dOs + 16 * n, D + PAD, ROWS);
			dK[n].template mma<false, false>(s.dSw, LK, s.Qs + 16 * n, D + PAD, ROWS);
		}
	}
	add_rows<P, D>(dqkv + (x.k - qkv), x.row3, dK, s.S, k0 + 16 * w, T, HS);
	add_rows<P, D>(dqkv + (x.v - qkv), x.row3, dV, s.S, k0 + 16 * w, T, HS);
}

/* dq of a block of query rows (a warp's 16 each): the sum over the key tiles up to the diagonal. */
template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	backward_q_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			  const float *rowdot, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	bwd_tiles<E> s = bwd_layout<E>(smem, D);
	int w = threadIdx.x / 32, lane = threadIdx.x % 32;
	int q0 = (gridDim.x - 1 - blockIdx.x) * ROWS, kend = min(T, q0 + ROWS);
	const E *Qw, *dOw;
	warp_tile<P> dQ[D / 16];
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	load_query_rows<D>(s, x, dout, stats, rowdot, q0, T, HS);
	Qw = s.Qs + 16 * w * (D + PAD);
	dOw = s.dOs + 16 * w * (D + PAD);
	#pragma unroll
	for (int n = 0; n < D / 16; n++)
		dQ[n].zero();
	for (int k0 = 0; k0 < kend; k0 += KEYS) {
		__syncthreads();
		load_rows<D>(s.Ks, x.k, x.row3, k0, T, HS);
		load_rows<D>(s.Vs, x.v, x.row3, k0, T, HS);
		__syncthreads();
		for (int n = 0; n < KEYS / 16; n++) {
			warp_tile<P> a;

			a.zero();
			a.template mma<false, true>(Qw, D + PAD, s.Ks + 16 * n * (D + PAD), D + PAD, D);
			a.store(s.S + 16 * n, LK);
			a.zero();
			a.template mma<false, true>(dOw, D + PAD, s.Vs + 16 * n * (D + PAD), D + PAD, D);
			a.store(s.dP + 16 * n, LK);
		}
		__syncwarp();
		for (int i = lane; i < 16 * KEYS; i += 32) {
			int r = i / KEYS, c = i % KEYS, t = q0 + 16 * w + r;

			weight_and_dscore((E *)nullptr, s.dSw + r * LK + c, s.S[r * LK + c],
					  s.dP[r * LK + c], s.row_max, s.row_inv, s.rowdot,
					  16 * w + r, t < T && k0 + c <= t, scale);
		}
		__syncwarp();
		#pragma unroll
		for (int n = 0; n < D / 16; n++)
			dQ[n].template mma<false, false>(s.dSw, LK, s.Ks + 16 * n, D + PAD, KEYS);
	}
	add_rows<P, D>(dqkv + (x.q - qkv), x.row3, dQ, s.S, q0 + 16 * w, T, HS);
}

/* registers: the register-tile kernels take bf16 heads up to 64 wide unless a thread says not */
static thread_local bool everywhere, registers = true;

extern "C" void kernels_cuda_fused_attention_everywhere(int on)
{
	everywhere = on;
}

extern "C" void kernels_cuda_attention_mma(int on)
{
	registers = on;
}

/* The tile width D of heads HS wide, or 0: too wide for the fused kernels. */
static int padded_width(int HS)
{
	return HS <= 32 ? 32 : HS <= 64 ? 64 : HS <= 128 ? 128 : 0;
}

/*
 * The precision the tiles run in: the thread's, where the GPU has tensor
 * cores for it (sm_80 and later for both bf16 and TF32 WMMA); fp32 else.
 */
static enum ops_precision tile_precision(void)
{
	int dev, major;

	cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
	cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
		   "compute capability");
	return major >= 8 ? cuda_precision() : OPS_FP32;
}

/* Whether the register-tile kernels (flash_attention_mma.cu) take heads HS wide now. */
static bool use_mma(int HS)
{
	return registers && tile_precision() == OPS_BF16 && cuda_attention_mma_takes(HS);
}

template <int P, int D>
static bool forward_with(float *out, float *stats, const float *qkv, int B, int T, int NH, int HS)
{
	size_t bytes = forward_smem<typename fa_elem<P>::type>(D);
	dim3 grid((T + ROWS - 1) / ROWS, B * NH);

	if (!allow_smem(forward_kernel<P, D>, bytes))
		return false;
	forward_kernel<P, D><<<grid, FA_THREADS, bytes>>>(out, stats, qkv, T, NH, HS,
							  1.0f / sqrtf((float)HS));
	LAUNCHED("flash attention forward");
	return true;
}

/* rowsum(dout * out) of every (batch, head, row), in the thread's scratch. */
static const float *rowdot_of(const float *dout, const float *out, int B, int T, int NH, int HS)
{
	size_t rows = (size_t)B * NH * T;
	float *rowdot = (float *)cuda_scratch(SCRATCH_ATT_ROWDOT, rows * sizeof(float));

	rowdot_kernel<<<(unsigned)((rows + 7) / 8), 256>>>(rowdot, dout, out, B, T, NH, HS);
	LAUNCHED("flash attention rowsum(dout * out)");
	return rowdot;
}

template <int P, int D>
static bool backward_with(float *dqkv, const float *dout, const float *out, const float *qkv,
			  const float *stats, int B, int T, int NH, int HS)
{
	typedef typename fa_elem<P>::type E;
	size_t bytes = backward_smem<E>(D);
	float scale = 1.0f / sqrtf((float)HS);
	const float *rowdot;

	if (!allow_smem(backward_kv_kernel<P, D>, bytes) ||
	    !allow_smem(backward_q_kernel<P, D>, bytes))
		return false;
	rowdot = rowdot_of(dout, out, B, T, NH, HS);
	backward_kv_kernel<P, D><<<dim3((T + ROWS - 1) / ROWS, B * NH), FA_THREADS, bytes>>>(
		dqkv, dout, qkv, stats, rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention backward dk dv");
	backward_q_kernel<P, D><<<dim3((T + ROWS - 1) / ROWS, B * NH), FA_THREADS, bytes>>>(
		dqkv, dout, qkv, stats, rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention backward dq");
	return true;
}

/* F<P, D>::run(args...) for the thread's tile precision and HS's padded width. */
#define FA_DISPATCH(fn, ...)                                                                  \
	do {                                                                                  \
		enum ops_precision p_ = tile_precision();                                     \
		int d_ = everywhere || p_ == OPS_BF16 ? padded_width(HS) : 0;                 \
		ok = false;                                                                   \
		if (d_ == 32)                                                                 \
			ok = p_ == OPS_BF16 ? fn<OPS_BF16, 32>(__VA_ARGS__) :                 \
			     p_ == OPS_TF32 ? fn<OPS_TF32, 32>(__VA_ARGS__) :                 \
					      fn<OPS_FP32, 32>(__VA_ARGS__);                  \
		else if (d_ == 64)                                                            \
			ok = p_ == OPS_BF16 ? fn<OPS_BF16, 64>(__VA_ARGS__) :                 \
			     p_ == OPS_TF32 ? fn<OPS_TF32, 64>(__VA_ARGS__) :                 \
					      fn<OPS_FP32, 64>(__VA_ARGS__);                  \
		else if (d_ == 128)                                                           \
			ok = p_ == OPS_BF16 ? fn<OPS_BF16, 128>(__VA_ARGS__) :                \
			     p_ == OPS_TF32 ? fn<OPS_TF32, 128>(__VA_ARGS__) :                \
					      fn<OPS_FP32, 128>(__VA_ARGS__);                 \
	} while (0)

void cuda_attention_fused_forward(float *out, float *stats, const float *qkv, int B, int T,
				  int NH, int HS)
{
	bool ok;

	if (!B || !T || !NH || !HS)
		return;
	if (use_mma(HS)) {
		cuda_attention_mma_forward(out, stats, qkv, B, T, NH, HS);
		return;
	}
	FA_DISPATCH(forward_with, out, stats, qkv, B, T, NH, HS);
	if (!ok)
		cuda_attention_forward(out, stats, qkv, B, T, NH, HS);
}

void cuda_attention_fused_backward(float *dqkv, const float *dout, const float *out,
				   const float *qkv, const float *stats, int B, int T, int NH,
				   int HS)
{
	bool ok;

	if (!B || !T || !NH || !HS)
		return;
	if (use_mma(HS)) {
		cuda_attention_mma_backward(dqkv, dout, qkv, stats,
					    rowdot_of(dout, out, B, T, NH, HS), B, T, NH, HS);
		return;
	}
	FA_DISPATCH(backward_with, dqkv, dout, out, qkv, stats, B, T, NH, HS);
	if (!ok)
		cuda_attention_backward(dqkv, dout, qkv, stats, B, T, NH, HS);
}
