/*
 * kernels/cuda/flash_attention_mma.cu - the bf16 fused attention with its
 * tiles in registers: the same passes as flash_attention.cu (forward with
 * the online softmax; backward as a dk/dv kernel per key tile and a dq
 * kernel per query tile, each gradient summed by one warp in a fixed order),
 * but every product is an mma.sync m16n8k16 whose operands and sums stay in
 * the warp's registers.
 *
 * Why: the WMMA kernels hand every tile of scores through shared memory
 * (store the scores, read them for the softmax, write the weights, load
 * and store the output's sums around each product); on an H100 they took
 * 34 ms of a 100 ms GPT-2 124M step in bf16. Here the scores of a product
 * are already laid out as the next product's operand: the accumulator
 * fragment of S (16 x 8, rows g and g + 8, columns 2t and 2t + 1 of lane
 * 4g + t) is, two n-tiles at a time, the A fragment of P (16 x 16), so the
 * weights go from one product to the next without leaving the registers.
 * Shared memory holds only the bf16 tiles of q, k, v, dout that the warps
 * share, each once, as rows: ldmatrix reads a B operand from them either
 * way round (.trans where the product wants pairs along the rows), so no
 * tile is stored transposed (the transposed stores, 16 bits at a time and
 * eight to a bank, were what the first version of these kernels spent
 * most of its shared-memory time on). The next tile's floats are copied
 * into shared memory (cp.async) while the warps work on this one, so the
 * loads' latency hides behind the products: with two blocks an SM (their
 * registers allow no more), the warps had nothing else to do while a tile
 * came in.
 *
 * Same formulas as flash_attention.cu (fused_weight, math_attention_dscore,
 * the stats kept per row), so the unfused kernels and the CPU are the
 * reference here too (t/gpu/check_ops_cuda.c). sm_80 and later, bf16,
 * heads up to 64 wide; kernels_cuda_attention_mma chooses these kernels.
 *
 * Where there is no GPU, t/unit/check_attention_mma.cc runs the kernels
 * themselves on the CPU (t/unit/warp_emulation.h: a block's threads as
 * host threads, the mma from its documented fragment layout), so their
 * tiles, masks and index arithmetic are checked in every CUDA build; the
 * places that know of it are marked WARP_EMULATION.
 */
#include "config.h"
#ifndef WARP_EMULATION /* WARP_EMULATION: the test brings its own CUDA */
#include "kernels/cuda/common.cuh"
#endif
#include "kernels/cuda/attention_head.cuh"
#include "kernels/cuda/warp_mma.cuh"
#include "kernels/math.h"
#include "kernels/ops.h"

#include <cfloat>
#include <cstdint>

#define MW 4             /* warps of a block */
#define MT (32 * MW)     /* threads of a block */
#define MR (16 * MW)     /* query rows (or keys) of a block: 16 a warp */
#define MK 64            /* keys (or query rows) of a tile the warps walk */
#define MPAD 8           /* bf16 after each shared row: rows 4 banks apart, pairs 4-byte aligned */
static_assert(MR == MK, "a dk/dv block's keys are a tile of the dq kernel");

/* The block's dynamic shared memory (WARP_EMULATION: the emulated block's). */
#ifndef BLOCK_SHARED
#define BLOCK_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

/*
 * The B fragments (16 x 8 each) of two n-tiles, n0.. and n0 + 8.., rows
 * k0.. of B[k][n] = Y[n][k], Y a shared tile with n as its rows: b[0], b[1]
 * for the first, b[2], b[3] for the second (lane 4g + t: k 2t, 2t + 1 and
 * 2t + 8, 2t + 9 of column g).
 */
__device__ static inline void frags_b_of_rows(uint32_t b[4], const bf16 *Y, int ld, int n0, int k0)
{
	int l = threadIdx.x % 32, j = l / 8;

	ldsm4<false>(b, Y + (size_t)(n0 + l % 8 + (j >> 1) * 8) * ld + k0 + (j & 1) * 8);
}

/* The same of B[k][n] = Z[k][n], Z a shared tile with k as its rows (read transposed). */
__device__ static inline void frags_b_of_columns(uint32_t b[4], const bf16 *Z, int ld, int n0,
						 int k0)
{
	int l = threadIdx.x % 32, j = l / 8;

	ldsm4<true>(b, Z + (size_t)(k0 + l % 8 + (j & 1) * 8) * ld + n0 + (j >> 1) * 8);
}

/*
 * The A fragment of P (16 x 16: keys 16j..16j+15) from two accumulator
 * tiles of S (keys 16j.. and 16j + 8..): the layouts agree element for element.
 */
__device__ static inline void frag_a_of(uint32_t a[4], const float lo[4], const float hi[4])
{
	a[0] = pack2(lo[0], lo[1]);
	a[1] = pack2(lo[2], lo[3]);
	a[2] = pack2(hi[0], hi[1]);
	a[3] = pack2(hi[2], hi[3]);
}

/* Four floats of row r, columns c.. (c a multiple of 4) into X, 8 bytes at once. */
template <int D>
__device__ static inline void store4(bf16 *X, int r, int c, float4 v)
{
	uint2 *p = (uint2 *)(X + r * (D + MPAD) + c);

	*p = make_uint2(pack2(v.x, v.y), pack2(v.z, v.w));
}

/*
 * Rows t0 .. t0 + MR - 1 of one head's (T, HS) slice of src (row t at src
 * + t * stride) as bf16 into X (MR x D, leading dimension D + MPAD), here
 * and now, for the tiles not fetched ahead (fetch_tile); zeros past T and
 * past HS, so padded products are the true ones. Where the rows are whole
 * float4s, each thread issues all its loads before it stores any, so that
 * a tile's loads are in flight together.
 */
template <int D>
__device__ static void load_tile(bf16 *X, const float *src, size_t stride, int t0, int T, int HS)
{
	constexpr int V = D / 4, PER = MR * V / MT;
	static_assert(MR * V % MT == 0, "a tile is whole float4s per thread");

	if (HS % 4 == 0 && stride % 4 == 0 && (uintptr_t)src % 16 == 0) {
		float4 buf[PER];

#pragma unroll
		for (int j = 0; j < PER; j++) {
			int i = threadIdx.x + j * MT, t = t0 + i / V, c = i % V * 4;

			buf[j] = t < T && c < HS ? *(const float4 *)(src + (size_t)t * stride + c) :
						   make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int j = 0; j < PER; j++) {
			int i = threadIdx.x + j * MT;

			store4<D>(X, i / V, i % V * 4, buf[j]);
		}
		return;
	}
	for (int i = threadIdx.x; i < MR * D; i += MT) {
		int r = i / D, d = i % D, t = t0 + r;
		float v = t < T && d < HS ? src[(size_t)t * stride + d] : 0.0f;

		X[r * (D + MPAD) + d] = __float2bfloat16_rn(v);
	}
}

/* Whether a head's rows in src can be copied a float4 at a time (else load_tile). */
__device__ static inline bool whole_float4s(const float *src, size_t stride, int HS)
{
	return HS % 4 == 0 && stride % 4 == 0 && (uintptr_t)src % 16 == 0;
}

/*
 * Start copying rows t0 .. t0 + MR - 1 of one head's slice of src (as
 * load_tile, whole float4s only) into F, fp32, D floats a row; zeros past
 * T and past HS.
 */
template <int D>
__device__ static void fetch_tile(float *F, const float *src, size_t stride, int t0, int T, int HS)
{
	constexpr int V = D / 4, PER = MR * V / MT;

#pragma unroll
	for (int j = 0; j < PER; j++) {
		int i = threadIdx.x + j * MT, r = i / V, c = i % V * 4, t = t0 + r;
		bool in = t < T && c < HS;

		cp_async(F + r * D + c, in ? src + (size_t)t * stride + c : src, 16, in ? 16 : 0);
	}
}

/* A tile fetched into F (and waited for) as bf16 rows into X. */
template <int D>
__device__ static void convert_tile(bf16 *X, const float *F)
{
	constexpr int V = D / 4, PER = MR * V / MT;

#pragma unroll
	for (int j = 0; j < PER; j++) {
		int i = threadIdx.x + j * MT;

		store4<D>(X, i / V, i % V * 4, *(const float4 *)(F + i / V * D + i % V * 4));
	}
}

/*
 * Two tiles of one head, rows t0.. of a and of b, into X and Y: from what
 * was fetched into Fa and Fb if `async` (then the next tile's fetch may
 * start once the block has met after this), else loaded here. Either way
 * what the block fetched has landed.
 */
template <int D>
__device__ static void tiles_in(bool async, bf16 *X, const float *Fa, const float *a, size_t sa,
				bf16 *Y, const float *Fb, const float *b, size_t sb, int t0, int T,
				int HS)
{
	cp_async_wait_all();
	__syncthreads();
	if (async) {
		convert_tile<D>(X, Fa);
		convert_tile<D>(Y, Fb);
	} else {
		load_tile<D>(X, a, sa, t0, T, HS);
		load_tile<D>(Y, b, sb, t0, T, HS);
	}
}

/* A warp's 16 rows r0.. of src (fp32, global) as the A fragments of its D columns. */
template <int D>
__device__ static void frags_from_global(uint32_t a[D / 16][4], const float *src, size_t stride,
					 int r0, int T, int HS)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;

#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int r = r0 + g + (e & 1) * 8, c = kk * 16 + 2 * t + (e >> 1) * 8;
			float x0 = r < T && c < HS ? src[(size_t)r * stride + c] : 0.0f;
			float x1 = r < T && c + 1 < HS ? src[(size_t)r * stride + c + 1] : 0.0f;

			a[kk][e] = pack2(x0, x1);
		}
}

/* s (16 x 64: 8 tiles) = A (16 x D, fragments) times the 64 rows of Y, transposed. */
template <int D>
__device__ static void scores(float s[8][4], const uint32_t a[D / 16][4], const bf16 *Y)
{
#pragma unroll
	for (int n = 0; n < 8; n++)
		s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
		for (int n = 0; n < 8; n += 2) {
			uint32_t b[4];

			frags_b_of_rows(b, Y, D + MPAD, 8 * n, 16 * kk);
			mma16816(s[n], a[kk], b[0], b[1]);
			mma16816(s[n + 1], a[kk], b[2], b[3]);
		}
}

/* acc (16 x D: D / 8 tiles) += P (16 x 64, from 8 score tiles) times the 64 rows of Z. */
template <int D>
__device__ static void accumulate(float acc[D / 8][4], const float p[8][4], const bf16 *Z)
{
#pragma unroll
	for (int j = 0; j < 4; j++) {
		uint32_t a[4];

		frag_a_of(a, p[2 * j], p[2 * j + 1]);
#pragma unroll
		for (int n = 0; n < D / 8; n += 2) {
			uint32_t b[4];

			frags_b_of_columns(b, Z, D + MPAD, 8 * n, 16 * j);
			mma16816(acc[n], a, b[0], b[1]);
			mma16816(acc[n + 1], a, b[2], b[3]);
		}
	}
}

/* dst rows r0.. (+=) a warp's 16 x D sums (D / 8 tiles), columns below HS, rows below T. */
template <int D>
__device__ static void add_sums(float *dst, size_t stride, const float acc[D / 8][4], int r0, int T,
				int HS)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;

#pragma unroll
	for (int n = 0; n < D / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int r = r0 + g + (e >> 1) * 8, c = 8 * n + 2 * t + (e & 1);

			if (r < T && c < HS)
				dst[(size_t)r * stride + c] += acc[n][e];
		}
}

/* Accumulator element e of tile n of lane 4g + t: its row (0..15) and column (0..8n+7). */
__device__ static inline int acc_row(int e)
{
	return threadIdx.x % 32 / 4 + (e >> 1) * 8;
}

__device__ static inline int acc_col(int n, int e)
{
	return 8 * n + 2 * (threadIdx.x % 4) + (e & 1);
}

/* One tile of MK rows of bf16 in shared memory. */
template <int D>
static constexpr size_t tile_bytes()
{
	return (size_t)MK * (D + MPAD) * sizeof(bf16);
}

/* The fp32 tiles fetched ahead: MR rows of D floats. */
template <int D>
static constexpr size_t fetch_bytes()
{
	return (size_t)MR * D * sizeof(float);
}

template <int D>
static size_t forward_bytes()
{
	return 2 * tile_bytes<D>() + 2 * fetch_bytes<D>();
}

/*
 * A block per 64 query rows of one (batch, head): each warp keeps its 16
 * rows of q as fragments and walks the key tiles up to the diagonal; the
 * scores, their running max and sum and the output's sums never leave its
 * registers.
 */
template <int D>
__global__ static void __launch_bounds__(MT)
	mma_forward_kernel(float *out, float *stats, const float *qkv, int T, int NH, int HS,
			   float scale)
{
	BLOCK_SHARED(smem);
	bf16 *Ks = (bf16 *)smem, *Vs = Ks + MK * (D + MPAD);
	float *Fk = (float *)(Vs + MK * (D + MPAD)), *Fv = Fk + MR * D;
	int w = threadIdx.x / 32, t4 = threadIdx.x % 4;
	int q0 = (gridDim.x - 1 - blockIdx.x) * MR, r0 = q0 + 16 * w, kend = min(T, q0 + MR);
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);
	bool async = whole_float4s(x.k, x.row3, HS) && whole_float4s(x.v, x.row3, HS);
	uint32_t qa[D / 16][4];
	float o[D / 8][4], m[2] = { -FLT_MAX, -FLT_MAX }, l[2] = { 0.0f, 0.0f };

	frags_from_global<D>(qa, x.q, x.row3, r0, T, HS);
#pragma unroll
	for (int n = 0; n < D / 8; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
	if (async) {
		fetch_tile<D>(Fk, x.k, x.row3, 0, T, HS);
		fetch_tile<D>(Fv, x.v, x.row3, 0, T, HS);
		cp_async_commit();
	}
	for (int k0 = 0; k0 < kend; k0 += MK) {
		float s[8][4], mx[2], sum[2] = { 0.0f, 0.0f }, alpha[2];

		__syncthreads();
		tiles_in<D>(async, Ks, Fk, x.k, x.row3, Vs, Fv, x.v, x.row3, k0, T, HS);
		__syncthreads();
		if (async && k0 + MK < kend) {
			fetch_tile<D>(Fk, x.k, x.row3, k0 + MK, T, HS);
			fetch_tile<D>(Fv, x.v, x.row3, k0 + MK, T, HS);
			cp_async_commit();
		}
		if (k0 > r0 + 15) /* every key of the tile is after this warp's rows */
			continue;
		scores<D>(s, qa, Ks);
		mx[0] = mx[1] = -FLT_MAX;
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int row = r0 + acc_row(e), key = k0 + acc_col(n, e);

				s[n][e] = key <= row && key < T ? s[n][e] * scale : -FLT_MAX;
				mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
			}
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float m_new = fmaxf(m[h], quad_max(mx[h]));

			alpha[h] = __expf(m[h] - m_new);
			m[h] = m_new;
		}
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float p = s[n][e] == -FLT_MAX ? 0.0f : __expf(s[n][e] - m[e >> 1]);

				s[n][e] = p;
				sum[e >> 1] += p;
			}
#pragma unroll
		for (int h = 0; h < 2; h++)
			l[h] = l[h] * alpha[h] + quad_sum(sum[h]);
#pragma unroll
		for (int n = 0; n < D / 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				o[n][e] *= alpha[e >> 1];
		accumulate<D>(o, s, Vs);
	}
#pragma unroll
	for (int n = 0; n < D / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int row = r0 + acc_row(e), c = acc_col(n, e);

			if (row < T && c < HS)
				out[x.off + (size_t)row * x.row + c] = o[n][e] / l[e >> 1];
		}
	if (t4 == 0)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			int row = r0 + threadIdx.x % 32 / 4 + 8 * h;

			if (row < T) {
				stats[(x.bh * T + row) * OPS_ATT_STATS] = m[h];
				stats[(x.bh * T + row) * OPS_ATT_STATS + 1] = l[h];
			}
		}
}

template <int D>
static size_t backward_kv_bytes()
{
	return 2 * tile_bytes<D>() + 2 * fetch_bytes<D>() + 6 * MK * sizeof(float);
}

/* Start copying the max, exp-sum and rowdot of rows t0.. (the last row's past T) into raw. */
__device__ static void fetch_row_stats(float *raw, const float *stats, const float *rowdot,
				       size_t bh, int t0, int T)
{
	for (int r = threadIdx.x; r < MK; r += MT) {
		int t = t0 + r < T ? t0 + r : T - 1;

		cp_async(raw + r, stats + (bh * T + t) * OPS_ATT_STATS, 4, 4);
		cp_async(raw + MK + r, stats + (bh * T + t) * OPS_ATT_STATS + 1, 4, 4);
		cp_async(raw + 2 * MK + r, rowdot + bh * T + t, 4, 4);
	}
}

/*
 * dk, dv of a block of keys (a warp's 16 each, kept as fragments of k and
 * v): the sums over every query row at or after them. The warp computes
 * its keys' scores transposed (k q^T, v dout^T: 16 keys x 64 query rows),
 * whose tiles are the A operands of dv += p^T dout and dk += ds^T q.
 */
template <int D>
__global__ static void __launch_bounds__(MT)
	mma_backward_kv_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			       const float *rowdot, int T, int NH, int HS, float scale)
{
	BLOCK_SHARED(smem);
	bf16 *Qs = (bf16 *)smem, *dOs = Qs + MK * (D + MPAD);
	float *Fq = (float *)(dOs + MK * (D + MPAD)), *Fo = Fq + MR * D;
	float *row_max = Fo + MR * D, *row_inv = row_max + MK, *row_dot = row_inv + MK;
	float *raw = row_dot + MK;
	int w = threadIdx.x / 32, k0 = blockIdx.x * MR, kr0 = k0 + 16 * w;
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);
	const float *o = dout + x.off;
	bool async = whole_float4s(x.q, x.row3, HS) && whole_float4s(o, x.row, HS);
	uint32_t ka[D / 16][4], va[D / 16][4];
	float dk[D / 8][4], dv[D / 8][4];

	frags_from_global<D>(ka, x.k, x.row3, kr0, T, HS);
	frags_from_global<D>(va, x.v, x.row3, kr0, T, HS);
#pragma unroll
	for (int n = 0; n < D / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			dk[n][e] = dv[n][e] = 0.0f;
	fetch_row_stats(raw, stats, rowdot, x.bh, k0, T);
	if (async) {
		fetch_tile<D>(Fq, x.q, x.row3, k0, T, HS);
		fetch_tile<D>(Fo, o, x.row, k0, T, HS);
	}
	cp_async_commit();
	for (int q0 = k0; q0 < T; q0 += MK) {
		float st[8][4], dpt[8][4];

		__syncthreads();
		tiles_in<D>(async, Qs, Fq, x.q, x.row3, dOs, Fo, o, x.row, q0, T, HS);
		for (int r = threadIdx.x; r < MK; r += MT) {
			row_max[r] = raw[r];
			row_inv[r] = 1.0f / raw[MK + r];
			row_dot[r] = raw[2 * MK + r];
		}
		__syncthreads();
		if (q0 + MK < T) {
			fetch_row_stats(raw, stats, rowdot, x.bh, q0 + MK, T);
			if (async) {
				fetch_tile<D>(Fq, x.q, x.row3, q0 + MK, T, HS);
				fetch_tile<D>(Fo, o, x.row, q0 + MK, T, HS);
			}
			cp_async_commit();
		}
		scores<D>(st, ka, Qs);
		scores<D>(dpt, va, dOs);
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int key = kr0 + acc_row(e), qc = acc_col(n, e), q = q0 + qc;
				float p = 0.0f, ds = 0.0f;

				if (q < T && key <= q) {
					p = __expf(st[n][e] * scale - row_max[qc]) * row_inv[qc];
					ds = math_attention_dscore(p, dpt[n][e], row_dot[qc], scale);
				}
				st[n][e] = p;
				dpt[n][e] = ds;
			}
		accumulate<D>(dv, st, dOs);
		accumulate<D>(dk, dpt, Qs);
	}
	add_sums<D>(dqkv + (x.k - qkv), x.row3, dk, kr0, T, HS);
	add_sums<D>(dqkv + (x.v - qkv), x.row3, dv, kr0, T, HS);
}

template <int D>
static size_t backward_q_bytes()
{
	return 2 * tile_bytes<D>() + 2 * fetch_bytes<D>();
}

/* dq of a block of query rows (a warp's 16 each): the sum over the key tiles up to the diagonal. */
template <int D>
__global__ static void __launch_bounds__(MT)
	mma_backward_q_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats,
			      const float *rowdot, int T, int NH, int HS, float scale)
{
	BLOCK_SHARED(smem);
	bf16 *Ks = (bf16 *)smem, *Vs = Ks + MK * (D + MPAD);
	float *Fk = (float *)(Vs + MK * (D + MPAD)), *Fv = Fk + MR * D;
	int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
	int q0 = (gridDim.x - 1 - blockIdx.x) * MR, r0 = q0 + 16 * w, kend = min(T, q0 + MR);
	fa_head x = head_at(qkv, T, NH, HS, blockIdx.y);
	bool async = whole_float4s(x.k, x.row3, HS) && whole_float4s(x.v, x.row3, HS);
	uint32_t qa[D / 16][4], oa[D / 16][4];
	float dq[D / 8][4], rmax[2], rinv[2], rdot[2];

	frags_from_global<D>(qa, x.q, x.row3, r0, T, HS);
	frags_from_global<D>(oa, dout + x.off, x.row, r0, T, HS);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int t = r0 + g + 8 * h < T ? r0 + g + 8 * h : T - 1;

		rmax[h] = stats[(x.bh * T + t) * OPS_ATT_STATS];
		rinv[h] = 1.0f / stats[(x.bh * T + t) * OPS_ATT_STATS + 1];
		rdot[h] = rowdot[x.bh * T + t];
	}
#pragma unroll
	for (int n = 0; n < D / 8; n++)
		dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
	if (async) {
		fetch_tile<D>(Fk, x.k, x.row3, 0, T, HS);
		fetch_tile<D>(Fv, x.v, x.row3, 0, T, HS);
		cp_async_commit();
	}
	for (int k0 = 0; k0 < kend; k0 += MK) {
		float s[8][4], dp[8][4];

		__syncthreads();
		tiles_in<D>(async, Ks, Fk, x.k, x.row3, Vs, Fv, x.v, x.row3, k0, T, HS);
		__syncthreads();
		if (async && k0 + MK < kend) {
			fetch_tile<D>(Fk, x.k, x.row3, k0 + MK, T, HS);
			fetch_tile<D>(Fv, x.v, x.row3, k0 + MK, T, HS);
			cp_async_commit();
		}
		if (k0 > r0 + 15) /* every key of the tile is after this warp's rows */
			continue;
		scores<D>(s, qa, Ks);
		scores<D>(dp, oa, Vs);
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int row = r0 + acc_row(e), key = k0 + acc_col(n, e), h = e >> 1;
				float ds = 0.0f;

				if (row < T && key <= row) {
					float p = __expf(s[n][e] * scale - rmax[h]) * rinv[h];

					ds = math_attention_dscore(p, dp[n][e], rdot[h], scale);
				}
				s[n][e] = ds;
			}
		accumulate<D>(dq, s, Ks);
	}
	add_sums<D>(dqkv + (x.q - qkv), x.row3, dq, r0, T, HS);
}

#ifndef WARP_EMULATION /* WARP_EMULATION: the test launches the kernels itself */
/* The tile width of heads HS wide for these kernels, or 0 (wider heads keep the WMMA ones). */
static int mma_width(int HS)
{
	return HS <= 32 ? 32 : HS <= 64 ? 64 : 0;
}

/* Every GPU these kernels run on (sm_80 and later) has at least 99 KiB a block for them. */
template <typename K> static void allow_or_stop(K kernel, size_t bytes)
{
	if (!allow_smem(kernel, bytes))
		cuda_check(cudaErrorInvalidConfiguration, "flash attention (mma): shared memory");
}

template <int D>
static void mma_forward_with(float *out, float *stats, const float *qkv, int B, int T, int NH,
			     int HS)
{
	dim3 grid((T + MR - 1) / MR, B * NH);

	allow_or_stop(mma_forward_kernel<D>, forward_bytes<D>());
	mma_forward_kernel<D><<<grid, MT, forward_bytes<D>()>>>(out, stats, qkv, T, NH, HS,
							       1.0f / sqrtf((float)HS));
	LAUNCHED("flash attention (mma) forward");
}

template <int D>
static void mma_backward_with(float *dqkv, const float *dout, const float *qkv,
			      const float *stats, const float *rowdot, int B, int T, int NH, int HS)
{
	dim3 grid((T + MR - 1) / MR, B * NH);
	float scale = 1.0f / sqrtf((float)HS);

	allow_or_stop(mma_backward_kv_kernel<D>, backward_kv_bytes<D>());
	allow_or_stop(mma_backward_q_kernel<D>, backward_q_bytes<D>());
	mma_backward_kv_kernel<D><<<grid, MT, backward_kv_bytes<D>()>>>(dqkv, dout, qkv, stats,
									 rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention (mma) backward dk dv");
	mma_backward_q_kernel<D><<<grid, MT, backward_q_bytes<D>()>>>(dqkv, dout, qkv, stats,
								       rowdot, T, NH, HS, scale);
	LAUNCHED("flash attention (mma) backward dq");
}

bool cuda_attention_mma_takes(int HS)
{
	return mma_width(HS) != 0;
}

void cuda_attention_mma_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
				int HS)
{
	if (mma_width(HS) == 32)
		mma_forward_with<32>(out, stats, qkv, B, T, NH, HS);
	else
		mma_forward_with<64>(out, stats, qkv, B, T, NH, HS);
}

void cuda_attention_mma_backward(float *dqkv, const float *dout, const float *qkv,
				 const float *stats, const float *rowdot, int B, int T, int NH,
				 int HS)
{
	if (mma_width(HS) == 32)
		mma_backward_with<32>(dqkv, dout, qkv, stats, rowdot, B, T, NH, HS);
	else
		mma_backward_with<64>(dqkv, dout, qkv, stats, rowdot, B, T, NH, HS);
}
#endif
