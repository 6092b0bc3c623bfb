/*
 * t/unit/warp_emulation.h - enough of CUDA, on the CPU, to run a kernel
 * written for warps: every thread of a block is a host thread, with its
 * threadIdx and blockIdx; __syncthreads is a barrier of the block's
 * threads; a warp's shuffles, its ldmatrix.x4 and its mma.sync m16n8k16
 * (bf16 in, fp32 sums) go through a barrier of its 32 threads and a table
 * each lane writes its registers (or its row's address) into. The mma
 * reads the registers as the PTX ISA lays out the fragments (groupID =
 * lane / 4, threadID_in_group = lane % 4): A's four registers hold (g,
 * 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8), each with the next
 * column, the lower in the low half; B's two hold rows (2t, 2t + 1) and
 * (2t + 8, 2t + 9) of column g; C's four (g, 2t), (g, 2t + 1), (g + 8,
 * 2t), (g + 8, 2t + 1). cp.async copies at once (its waits are no-ops).
 *
 * Include this, then the kernel's .cu file (which marks what it does
 * differently as WARP_EMULATION), then launch with warp_emulated_launch.
 * Slow, and only as faithful as this description: a test of a kernel's
 * arithmetic and indices, not of its speed or of the GPU.
 */
#ifndef STORK_T_UNIT_WARP_EMULATION_H
#define STORK_T_UNIT_WARP_EMULATION_H

#include <cuda_bf16.h> /* the bf16 types and their host conversions */

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <pthread.h>
#include <vector>

#define WARP_EMULATION 1
#undef __global__
#undef __device__
#undef __launch_bounds__
#define __global__
#define __device__
#define __launch_bounds__(n)
#define __syncthreads() pthread_barrier_wait(&warp_emu_self.block->bar)
#define __expf(x) expf(x)
#define BLOCK_SHARED(name) unsigned char *name = warp_emu_self.block->shared.data()
using std::min;

struct warp_emu_dim3 {
	unsigned x, y, z;
};

struct warp_emu_warp {
	pthread_barrier_t bar;
	float value[32];
	uint32_t a[32][4], b[32][2];
	const uint16_t *row[32];
};

struct warp_emu_block {
	pthread_barrier_t bar;
	std::vector<unsigned char> shared;
	std::vector<warp_emu_warp> warps;
};

struct warp_emu_thread {
	warp_emu_block *block;
	warp_emu_warp *warp;
};

static thread_local warp_emu_thread warp_emu_self;
static thread_local warp_emu_dim3 threadIdx, blockIdx;
static warp_emu_dim3 gridDim;

static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
	warp_emu_warp *w = warp_emu_self.warp;
	int lane = threadIdx.x % 32;
	float r;

	(void)mask;
	w->value[lane] = v;
	pthread_barrier_wait(&w->bar);
	r = w->value[lane ^ lane_mask];
	pthread_barrier_wait(&w->bar);
	return r;
}

static inline float warp_emu_bf16(uint32_t half)
{
	uint32_t bits = half << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

/*
 * r = ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 [row]: lane l
 * names row l % 8 of matrix l / 8 (8 bf16 at row); register j of lane
 * 4g + t is matrix j's row g, columns 2t and 2t + 1 (trans: column g, rows
 * 2t and 2t + 1), the first in the low half.
 */
static inline void warp_emulated_ldmatrix_x4(uint32_t r[4], const void *row, bool trans)
{
	warp_emu_warp *w = warp_emu_self.warp;
	int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

	w->row[lane] = (const uint16_t *)row;
	pthread_barrier_wait(&w->bar);
	for (int j = 0; j < 4; j++) {
		const uint16_t *const *m = w->row + 8 * j;
		uint32_t lo = trans ? m[2 * t][g] : m[g][2 * t];
		uint32_t hi = trans ? m[2 * t + 1][g] : m[g][2 * t + 1];

		r[j] = lo | hi << 16;
	}
	pthread_barrier_wait(&w->bar);
}

/* c += a b as mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, fragments as above. */
static inline void warp_emulated_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	warp_emu_warp *w = warp_emu_self.warp;
	int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	float A[16][16], B[16][8];

	memcpy(w->a[lane], a, sizeof w->a[lane]);
	w->b[lane][0] = b0;
	w->b[lane][1] = b1;
	pthread_barrier_wait(&w->bar);
	for (int l = 0; l < 32; l++) {
		int lg = l / 4, lt = l % 4;

		for (int e = 0; e < 4; e++)
			for (int h = 0; h < 2; h++)
				A[lg + (e & 1) * 8][2 * lt + (e >> 1) * 8 + h] =
					warp_emu_bf16(h ? w->a[l][e] >> 16 : w->a[l][e] & 0xffff);
		for (int r = 0; r < 2; r++)
			for (int h = 0; h < 2; h++)
				B[2 * lt + r * 8 + h][lg] =
					warp_emu_bf16(h ? w->b[l][r] >> 16 : w->b[l][r] & 0xffff);
	}
	pthread_barrier_wait(&w->bar);
	for (int e = 0; e < 4; e++) {
		int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
		float sum = c[e];

		for (int k = 0; k < 16; k++)
			sum += A[row][k] * B[k][col];
		c[e] = sum;
	}
}

struct warp_emu_start {
	warp_emu_block *block;
	unsigned thread, bx, by;
	const std::function<void()> *kernel;
};

static void *warp_emu_thread_main(void *arg)
{
	warp_emu_start *s = (warp_emu_start *)arg;

	threadIdx = { s->thread, 0, 0 };
	blockIdx = { s->bx, s->by, 0 };
	warp_emu_self.block = s->block;
	warp_emu_self.warp = &s->block->warps[s->thread / 32];
	(*s->kernel)();
	return nullptr;
}

/*
 * kernel() on a grid of gx x gy blocks of `threads` threads (a multiple of
 * 32) with `shared` bytes of shared memory each, one block after another.
 * The shared memory starts as garbage, as a GPU's does. A thread that
 * cannot be made stops the program (the others would wait for it forever).
 */
static void warp_emulated_launch(unsigned gx, unsigned gy, unsigned threads, size_t shared,
				 const std::function<void()> &kernel)
{
	gridDim = { gx, gy, 1 };
	for (unsigned by = 0; by < gy; by++)
		for (unsigned bx = 0; bx < gx; bx++) {
			warp_emu_block block;
			std::vector<pthread_t> th(threads);
			std::vector<warp_emu_start> start(threads);
			unsigned made = 0;

			block.shared.assign(shared + 16, 0xA5);
			block.warps.resize(threads / 32);
			pthread_barrier_init(&block.bar, nullptr, threads);
			for (auto &w : block.warps)
				pthread_barrier_init(&w.bar, nullptr, 32);
			for (; made < threads; made++) {
				start[made] = { &block, made, bx, by, &kernel };
				if (pthread_create(&th[made], nullptr, warp_emu_thread_main, &start[made]))
					break;
			}
			if (made < threads) {
				fprintf(stderr, "warp emulation: cannot make thread %u of %u\n", made,
					threads);
				abort();
			}
			for (auto &t : th)
				pthread_join(t, nullptr);
			for (auto &w : block.warps)
				pthread_barrier_destroy(&w.bar);
			pthread_barrier_destroy(&block.bar);
		}
}

#endif
