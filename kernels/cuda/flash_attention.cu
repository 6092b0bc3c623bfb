/*
 * kernels/cuda/flash_attention.cu - causal self-attention fused: the T x T
 * scores live only in shared memory, a tile at a time.
 *
 * The forward pass (one block per tile of FWD_ROWS query rows of one
 * (batch, head) pair) walks the key tiles up to the diagonal with the
 * online softmax: each new tile of scores raises the rows' running max,
 * rescales what the output has summed so far, and adds its weights times
 * the values. What stays in global memory is the output and, per row, the
 * max and the exp-sum (ops.h's stats), as the unfused path keeps them.
 *
 * The backward pass needs D = rowsum(dout * out) per row (the softmax
 * backward's rowsum(p * dp), which equals it), computed first; then two
 * kernels compute the weights again from the stats with the formula both
 * passes share (math_attention_weight):
 *   by key tile:   dv += p^T dout,  dk += ds^T q   over the query tiles below,
 *   by query tile: dq += ds k                      over the key tiles before,
 * with dp = dout v^T and ds = math_attention_dscore(p, dp, D, scale). Each
 * gradient element is summed by one block in a fixed order: no atomics,
 * so a run repeats its bits.
 *
 * The tile products run on the tensor cores (WMMA: bf16 or TF32 inputs,
 * fp32 sums) as the thread's precision says (ops->set_precision), or as
 * plain fp32 multiply-adds under fp32, the reference the other two are
 * measured against. Heads up to 128 wide are padded with zeros to 32, 64
 * or 128 columns; wider heads, or a GPU whose shared memory is too small,
 * take the unfused path (attention.cu).
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/math.h"

#include <cfloat>
#include <cstdint>
#include <cuda_bf16.h>
#include <mma.h>
#include <type_traits>

#define FA_THREADS 256
#define FA_WARPS (FA_THREADS / 32)
#define FWD_ROWS 64 /* query rows of a forward block */
#define BWD_ROWS 32 /* query rows a backward block takes at a time */
#define KEYS 64     /* keys of a tile, in every kernel */
#define PAD 8       /* elements after each shared row: fewer bank conflicts, WMMA alignment kept */

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

/* bf16 as the matmul file and the CPU emulation round it (math_bf16_bits). */
__device__ static inline void put(__nv_bfloat16 *dst, float x)
{
	__nv_bfloat16_raw r;

	r.x = math_bf16_bits(x);
	*dst = __nv_bfloat16(r);
}

/*
 * C (M x N fp32, row-major, leading dimension ldc) = or += op(A) op(B), every
 * operand in shared memory. op(A) is M x K: A[m * lda + k], or with TA
 * A[k * lda + m]; op(B) is K x N: B[k * ldb + n], or with TB B[n * ldb + k].
 * M and N are multiples of 16, K of 16. The block's threads all call it.
 */
template <int P, bool TA, bool TB, typename E>
__device__ static void tile_fma(float *C, int ldc, const E *A, int lda, const E *B, int ldb,
				int M, int N, int K, bool add)
{
	for (int i = threadIdx.x; i < M * N; i += FA_THREADS) {
		int m = i / N, n = i % N;
		float s = add ? C[m * ldc + n] : 0.0f;

		for (int k = 0; k < K; k++)
			s += (float)(TA ? A[k * lda + m] : A[m * lda + k]) *
			     (float)(TB ? B[n * ldb + k] : B[k * ldb + n]);
		C[m * ldc + n] = s;
	}
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <int P, bool TA, bool TB, typename E>
__device__ static void tile_wmma(float *C, int ldc, const E *A, int lda, const E *B, int ldb,
				 int M, int N, int K, bool add)
{
	using namespace nvcuda;
	typedef typename std::conditional<P == OPS_BF16, __nv_bfloat16, wmma::precision::tf32>::type W;
	typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
	typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;
	constexpr int KS = P == OPS_BF16 ? 16 : 8;
	int tiles_n = N / 16;

	for (int t = threadIdx.x / 32; t < (M / 16) * tiles_n; t += FA_WARPS) {
		int tm = t / tiles_n * 16, tn = t % tiles_n * 16;
		wmma::fragment<wmma::accumulator, 16, 16, KS, float> acc;

		if (add)
			wmma::load_matrix_sync(acc, C + tm * ldc + tn, ldc, wmma::mem_row_major);
		else
			wmma::fill_fragment(acc, 0.0f);
		for (int k = 0; k < K; k += KS) {
			wmma::fragment<wmma::matrix_a, 16, 16, KS, W, LA> a;
			wmma::fragment<wmma::matrix_b, 16, 16, KS, W, LB> b;

			wmma::load_matrix_sync(a, TA ? A + k * lda + tm : A + tm * lda + k, lda);
			wmma::load_matrix_sync(b, TB ? B + tn * ldb + k : B + k * ldb + tn, ldb);
			if constexpr (P == OPS_TF32) {
				for (int e = 0; e < a.num_elements; e++)
					a.x[e] = wmma::__float_to_tf32(a.x[e]);
				for (int e = 0; e < b.num_elements; e++)
					b.x[e] = wmma::__float_to_tf32(b.x[e]);
			}
			wmma::mma_sync(acc, a, b, acc);
		}
		wmma::store_matrix_sync(C + tm * ldc + tn, acc, ldc, wmma::mem_row_major);
	}
}
#endif

/* The tile product of precision P: tensor cores for tf32 and bf16 where the GPU has them. */
template <int P, bool TA, bool TB, typename E>
__device__ static void tile_product(float *C, int ldc, const E *A, int lda, const E *B, int ldb,
				    int M, int N, int K, bool add)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	if constexpr (P != OPS_FP32) {
		tile_wmma<P, TA, TB>(C, ldc, A, lda, B, ldb, M, N, K, add);
		return;
	}
#endif
	tile_fma<P, TA, TB>(C, ldc, A, lda, B, ldb, M, N, K, add);
}

/*
 * Rows t0 .. t0+R-1 of one head's (T, HS) slice of src (row t at src + t *
 * stride) into dst (R x D, leading dimension D + PAD); rows past T and
 * columns past HS are zeros, so the padded products are the true ones.
 */
template <typename E>
__device__ static void load_rows(E *dst, const float *src, size_t stride, int t0, int R, int D,
				 int T, int HS)
{
	for (int i = threadIdx.x; i < R * D; i += FA_THREADS) {
		int r = i / D, d = i % D, t = t0 + r;

		put(dst + r * (D + PAD) + d, t < T && d < HS ? src[(size_t)t * stride + d] : 0.0f);
	}
}

/* Where one (batch, head) pair's rows start in qkv (B, T, 3, NH, HS) and in (B, T, NH, HS). */
struct fa_head {
	const float *q, *k, *v; /* row t at + t * 3C */
	size_t row3, row;       /* 3C and C */
	size_t off;             /* the pair's offset in a (B, T, NH, HS) array */
	size_t bh;              /* b * NH + h: the pair's rows in stats and D */
};

__device__ static fa_head head_at(const float *qkv, int T, int NH, int HS, int bh)
{
	int b = bh / NH, h = bh % NH;
	size_t C = (size_t)NH * HS;
	fa_head x;

	x.row = C;
	x.row3 = 3 * C;
	x.q = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
	x.k = x.q + C;
	x.v = x.q + 2 * C;
	x.off = (size_t)b * T * C + (size_t)h * HS;
	x.bh = (size_t)bh;
	return x;
}

/* Shared memory of the forward kernel, in bytes, for head width D and storage E. */
template <typename E> static size_t forward_smem(int D)
{
	return (size_t)(FWD_ROWS + 2 * KEYS) * (D + PAD) * sizeof(E) +
	       (size_t)FWD_ROWS * (KEYS + PAD) * (sizeof(E) + sizeof(float)) +
	       (size_t)FWD_ROWS * (D + PAD) * sizeof(float) + 2 * FWD_ROWS * sizeof(float);
}

/*
 * One tile of scores into the running softmax of its rows: S (scores q.k,
 * unscaled) becomes the weights exp(s - max) in Pt (as E), the rows' max
 * and sum are updated and O's rows rescaled to the new max. Rows past T
 * and keys after a row's own position are masked.
 */
template <typename E>
__device__ static void online_softmax(E *Pt, const float *S, float *O, float *row_max,
				      float *row_sum, int q0, int k0, int T, int D, float scale)
{
	constexpr int per_row = FA_THREADS / FWD_ROWS; /* threads a row, adjacent lanes */
	int r = threadIdx.x / per_row, sub = threadIdx.x % per_row, t = q0 + r;
	float m_old = row_max[r], m_new = m_old, sum = 0.0f;

	for (int c = sub; c < KEYS; c += per_row)
		if (t < T && k0 + c <= t)
			m_new = fmaxf(m_new, S[r * (KEYS + PAD) + c] * scale);
	for (int o = per_row / 2; o > 0; o >>= 1)
		m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, o));
	for (int c = sub; c < KEYS; c += per_row) {
		float p = t < T && k0 + c <= t ?
				  math_softmax_exp(S[r * (KEYS + PAD) + c] * scale, m_new) :
				  0.0f;

		put(Pt + r * (KEYS + PAD) + c, p);
		sum += p;
	}
	for (int o = per_row / 2; o > 0; o >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, o);
	float alpha = math_softmax_exp(m_old, m_new);

	for (int d = sub; d < D; d += per_row)
		O[r * (D + PAD) + d] *= alpha;
	__syncwarp();
	if (sub == 0) {
		row_max[r] = m_new;
		row_sum[r] = row_sum[r] * alpha + sum;
	}
}

template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	forward_kernel(float *out, float *stats, const float *qkv, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	E *Qs = (E *)smem, *Ks = Qs + FWD_ROWS * (D + PAD), *Vs = Ks + KEYS * (D + PAD);
	E *Pt = Vs + KEYS * (D + PAD);
	float *S = (float *)(Pt + FWD_ROWS * (KEYS + PAD)), *O = S + FWD_ROWS * (KEYS + PAD);
	float *row_max = O + FWD_ROWS * (D + PAD), *row_sum = row_max + FWD_ROWS;
	/* the longest rows (last tiles) first: the short ones fill in behind them */
	int q0 = (gridDim.x - 1 - blockIdx.x) * FWD_ROWS, kend = min(T, q0 + FWD_ROWS);
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	load_rows(Qs, x.q, x.row3, q0, FWD_ROWS, D, T, HS);
	for (int i = threadIdx.x; i < FWD_ROWS * (D + PAD); i += FA_THREADS)
		O[i] = 0.0f;
	for (int r = threadIdx.x; r < FWD_ROWS; r += FA_THREADS)
		row_max[r] = -FLT_MAX, row_sum[r] = 0.0f;
	for (int k0 = 0; k0 < kend; k0 += KEYS) {
		__syncthreads();
		load_rows(Ks, x.k, x.row3, k0, KEYS, D, T, HS);
		load_rows(Vs, x.v, x.row3, k0, KEYS, D, T, HS);
		__syncthreads();
		tile_product<P, false, true>(S, KEYS + PAD, Qs, D + PAD, Ks, D + PAD, FWD_ROWS, KEYS,
					     D, false);
		__syncthreads();
		online_softmax(Pt, S, O, row_max, row_sum, q0, k0, T, D, scale);
		__syncthreads();
		tile_product<P, false, false>(O, D + PAD, Pt, KEYS + PAD, Vs, D + PAD, FWD_ROWS, D,
					      KEYS, true);
	}
	__syncthreads();
	for (int i = threadIdx.x; i < FWD_ROWS * HS; i += FA_THREADS) {
		int r = i / HS, d = i % HS, t = q0 + r;

		if (t < T)
			out[x.off + (size_t)t * x.row + d] = O[r * (D + PAD) + d] / row_sum[r];
	}
	for (int r = threadIdx.x; r < FWD_ROWS; r += FA_THREADS)
		if (q0 + r < T) {
			stats[(x.bh * T + q0 + r) * OPS_ATT_STATS] = row_max[r];
			stats[(x.bh * T + q0 + r) * OPS_ATT_STATS + 1] = row_sum[r];
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
 * The shared memory of a backward block: q and dout of BWD_ROWS query rows,
 * k and v of a key tile, the weights and their score gradients as E (for
 * the products) and as fp32, and the rows' stats.
 */
template <typename E> struct bwd_tiles {
	E *Qs, *dOs, *Ks, *Vs, *Pt, *dSt;
	float *S, *dP, *row_max, *row_sum, *rowdot;
	float *acc; /* the block's sums: dk and dv (2 x KEYS rows), or dq (BWD_ROWS rows) */
};

template <typename E> static size_t backward_smem(int D, int acc_rows)
{
	return (size_t)(2 * BWD_ROWS + 2 * KEYS) * (D + PAD) * sizeof(E) +
	       (size_t)2 * BWD_ROWS * (KEYS + PAD) * (sizeof(E) + sizeof(float)) +
	       3 * BWD_ROWS * sizeof(float) + (size_t)acc_rows * (D + PAD) * sizeof(float);
}

template <typename E> __device__ static bwd_tiles<E> bwd_layout(unsigned char *smem, int D)
{
	bwd_tiles<E> s;

	s.Qs = (E *)smem;
	s.dOs = s.Qs + BWD_ROWS * (D + PAD);
	s.Ks = s.dOs + BWD_ROWS * (D + PAD);
	s.Vs = s.Ks + KEYS * (D + PAD);
	s.Pt = s.Vs + KEYS * (D + PAD);
	s.dSt = s.Pt + BWD_ROWS * (KEYS + PAD);
	s.S = (float *)(s.dSt + BWD_ROWS * (KEYS + PAD));
	s.dP = s.S + BWD_ROWS * (KEYS + PAD);
	s.acc = s.dP + BWD_ROWS * (KEYS + PAD);
	return s;
}

/* The query rows' q, dout, stats and D; the caller syncs after. */
template <typename E>
__device__ static void load_query_rows(bwd_tiles<E> &s, const fa_head &x, const float *dout,
				       const float *stats, const float *rowdot, int q0, int T, int D,
				       int HS)
{
	load_rows(s.Qs, x.q, x.row3, q0, BWD_ROWS, D, T, HS);
	load_rows(s.dOs, dout + x.off, x.row, q0, BWD_ROWS, D, T, HS);
	for (int r = threadIdx.x; r < BWD_ROWS; r += FA_THREADS) {
		int t = q0 + r < T ? q0 + r : T - 1;

		s.row_max[r] = stats[(x.bh * T + t) * OPS_ATT_STATS];
		s.row_sum[r] = stats[(x.bh * T + t) * OPS_ATT_STATS + 1];
		s.rowdot[r] = rowdot[x.bh * T + t];
	}
}

/*
 * The weights p of the query rows against the key tile at k0, computed again
 * from the stats, and their score gradients ds, into Pt and dSt (masked
 * entries 0). Between two syncs of the caller's.
 */
template <int P, int D, typename E>
__device__ static void weights_and_dscores(bwd_tiles<E> &s, int q0, int k0, int T, float scale)
{
	tile_product<P, false, true>(s.S, KEYS + PAD, s.Qs, D + PAD, s.Ks, D + PAD, BWD_ROWS, KEYS,
				     D, false);
	tile_product<P, false, true>(s.dP, KEYS + PAD, s.dOs, D + PAD, s.Vs, D + PAD, BWD_ROWS, KEYS,
				     D, false);
	__syncthreads();
	for (int i = threadIdx.x; i < BWD_ROWS * KEYS; i += FA_THREADS) {
		int r = i / KEYS, c = i % KEYS, t = q0 + r, at = r * (KEYS + PAD) + c;
		float p = 0.0f, ds = 0.0f;

		if (t < T && k0 + c <= t) {
			p = math_attention_weight(s.S[at] * scale, s.row_max[r], s.row_sum[r]);
			ds = math_attention_dscore(p, s.dP[at], s.rowdot[r], scale);
		}
		put(s.Pt + at, p);
		put(s.dSt + at, ds);
	}
}

/* dk, dv of one key tile: the sums over every query row at or after it. */
template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	backward_kv_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			   const float *rowdot, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	bwd_tiles<E> s = bwd_layout<E>(smem, D);
	float *dK = s.acc, *dV = s.acc + KEYS * (D + PAD);
	int k0 = blockIdx.x * KEYS;
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	s.row_max = dV + KEYS * (D + PAD);
	s.row_sum = s.row_max + BWD_ROWS;
	s.rowdot = s.row_sum + BWD_ROWS;
	load_rows(s.Ks, x.k, x.row3, k0, KEYS, D, T, HS);
	load_rows(s.Vs, x.v, x.row3, k0, KEYS, D, T, HS);
	for (int i = threadIdx.x; i < 2 * KEYS * (D + PAD); i += FA_THREADS)
		s.acc[i] = 0.0f;
	for (int q0 = k0; q0 < T; q0 += BWD_ROWS) {
		__syncthreads();
		load_query_rows(s, x, dout, stats, rowdot, q0, T, D, HS);
		__syncthreads();
		weights_and_dscores<P, D>(s, q0, k0, T, scale);
		__syncthreads();
		tile_product<P, true, false>(dV, D + PAD, s.Pt, KEYS + PAD, s.dOs, D + PAD, KEYS, D,
					     BWD_ROWS, true);
		tile_product<P, true, false>(dK, D + PAD, s.dSt, KEYS + PAD, s.Qs, D + PAD, KEYS, D,
					     BWD_ROWS, true);
	}
	__syncthreads();
	for (int i = threadIdx.x; i < KEYS * HS; i += FA_THREADS) {
		int r = i / HS, d = i % HS, t = k0 + r;
		size_t at = (x.k - qkv) + (size_t)t * x.row3 + d;

		if (t < T) {
			dqkv[at] += dK[r * (D + PAD) + d];
			dqkv[at + x.row] += dV[r * (D + PAD) + d];
		}
	}
}

/* dq of BWD_ROWS query rows: the sum over the key tiles up to the diagonal. */
template <int P, int D>
__global__ static void __launch_bounds__(FA_THREADS)
	backward_q_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			  const float *rowdot, int T, int NH, int HS, float scale)
{
	typedef typename fa_elem<P>::type E;
	extern __shared__ __align__(128) unsigned char smem[];
	bwd_tiles<E> s = bwd_layout<E>(smem, D);
	float *dQ = s.acc;
	int q0 = (gridDim.x - 1 - blockIdx.x) * BWD_ROWS, kend = min(T, q0 + BWD_ROWS);
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);

	s.row_max = dQ + BWD_ROWS * (D + PAD);
	s.row_sum = s.row_max + BWD_ROWS;
	s.rowdot = s.row_sum + BWD_ROWS;
	load_query_rows(s, x, dout, stats, rowdot, q0, T, D, HS);
	for (int i = threadIdx.x; i < BWD_ROWS * (D + PAD); i += FA_THREADS)
		dQ[i] = 0.0f;
	for (int k0 = 0; k0 < kend; k0 += KEYS) {
		__syncthreads();
		load_rows(s.Ks, x.k, x.row3, k0, KEYS, D, T, HS);
		load_rows(s.Vs, x.v, x.row3, k0, KEYS, D, T, HS);
		__syncthreads();
		weights_and_dscores<P, D>(s, q0, k0, T, scale);
		__syncthreads();
		tile_product<P, false, false>(dQ, D + PAD, s.dSt, KEYS + PAD, s.Ks, D + PAD, BWD_ROWS,
					      D, KEYS, true);
	}
	__syncthreads();
	for (int i = threadIdx.x; i < BWD_ROWS * HS; i += FA_THREADS) {
		int r = i / HS, d = i % HS, t = q0 + r;

		if (t < T)
			dqkv[(x.q - qkv) + (size_t)t * x.row3 + d] += dQ[r * (D + PAD) + d];
	}
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

/* Allow kernel the dynamic shared memory it needs; false where the GPU has less. */
template <typename K> static bool allow_smem(K kernel, size_t bytes)
{
	int dev, most;

	cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
	cuda_check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
		   "shared memory per block");
	if (bytes > (size_t)most)
		return false;
	cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					(int)bytes),
		   "flash attention shared memory");
	return true;
}

template <int P, int D>
static bool forward_with(float *out, float *stats, const float *qkv, int B, int T, int NH, int HS)
{
	size_t bytes = forward_smem<typename fa_elem<P>::type>(D);
	dim3 grid((T + FWD_ROWS - 1) / FWD_ROWS, B * NH);

	if (!allow_smem(forward_kernel<P, D>, bytes))
		return false;
	forward_kernel<P, D><<<grid, FA_THREADS, bytes>>>(out, stats, qkv, T, NH, HS,
							  1.0f / sqrtf((float)HS));
	LAUNCHED("flash attention forward");
	return true;
}

template <int P, int D>
static bool backward_with(float *dqkv, const float *dout, const float *qkv, const float *stats,
			  const float *rowdot, int B, int T, int NH, int HS)
{
	typedef typename fa_elem<P>::type E;
	size_t kv_bytes = backward_smem<E>(D, 2 * KEYS), q_bytes = backward_smem<E>(D, BWD_ROWS);
	float scale = 1.0f / sqrtf((float)HS);

	if (!allow_smem(backward_kv_kernel<P, D>, kv_bytes) ||
	    !allow_smem(backward_q_kernel<P, D>, q_bytes))
		return false;
	backward_kv_kernel<P, D><<<dim3((T + KEYS - 1) / KEYS, B * NH), FA_THREADS, kv_bytes>>>(
		dqkv, dout, qkv, stats, rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention backward dk dv");
	backward_q_kernel<P, D><<<dim3((T + BWD_ROWS - 1) / BWD_ROWS, B * NH), FA_THREADS,
				  q_bytes>>>(dqkv, dout, qkv, stats, rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention backward dq");
	return true;
}

/* F<P, D>::run(args...) for the thread's tile precision and HS's padded width. */
#define FA_DISPATCH(fn, ...)                                                                  \
	do {                                                                                  \
		enum ops_precision p_ = tile_precision();                                     \
		int d_ = padded_width(HS);                                                    \
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
	FA_DISPATCH(forward_with, out, stats, qkv, B, T, NH, HS);
	if (!ok)
		cuda_attention_forward(out, stats, qkv, B, T, NH, HS);
}

void cuda_attention_fused_backward(float *dqkv, const float *dout, const float *out,
				   const float *qkv, const float *stats, int B, int T, int NH,
				   int HS)
{
	size_t rows = (size_t)B * NH * T;
	float *rowdot;
	bool ok;

	if (!rows || !HS)
		return;
	rowdot = (float *)cuda_scratch(SCRATCH_ATT_ROWDOT, rows * sizeof(float));
	rowdot_kernel<<<(unsigned)((rows + 7) / 8), 256>>>(rowdot, dout, out, B, T, NH, HS);
	LAUNCHED("flash attention rowsum(dout * out)");
	FA_DISPATCH(backward_with, dqkv, dout, qkv, stats, rowdot, B, T, NH, HS);
	if (!ok)
		cuda_attention_backward(dqkv, dout, qkv, stats, B, T, NH, HS);
}
