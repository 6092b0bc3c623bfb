/*
 * kernels/cuda/warp_mma.cuh - what a warp does together in the register-tile
 * kernels (flash_attention_mma.cu): the bf16 tensor-core product
 * mma.sync m16n8k16 with fp32 sums, ldmatrix to read its operands from
 * shared memory, cp.async to fetch the next tile while it runs, and the
 * sums and maxima over the four lanes that hold one row of a product.
 * sm_80 and later (MMA_OK); built for an older GPU a call traps.
 *
 * Fragments, as the PTX ISA lays them out (g = lane / 4, t = lane % 4): A
 * (16 x 16, rows) in four registers, (g, 2t), (g + 8, 2t), (g, 2t + 8),
 * (g + 8, 2t + 8), each with the next column in its high half; B (16 x 8,
 * columns) in two, rows (2t, 2t + 1) and (2t + 8, 2t + 9) of column g; the
 * sums C (16 x 8, fp32) in four, (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8,
 * 2t + 1).
 *
 * WARP_EMULATION (t/unit/warp_emulation.h, included before this): the same
 * calls on the CPU, a block's threads as host threads.
 */
#ifndef STORK_KERNELS_CUDA_WARP_MMA_CUH
#define STORK_KERNELS_CUDA_WARP_MMA_CUH

#include <cstdint>
#include <cstring>
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MMA_OK 1
#else
#define MMA_OK 0
#endif

typedef __nv_bfloat16 bf16;

/* Two floats as the bf16 pair of one register: lo in the low half (the lower column). */
__device__ static inline uint32_t pack2(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	uint32_t bits;

	memcpy(&bits, &v, sizeof bits);
	return bits;
}

/* c (16 x 8, fp32) += a (16 x 16, bf16, rows) b (16 x 8, bf16, columns). */
__device__ static inline void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
#if MMA_OK
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(WARP_EMULATION) /* WARP_EMULATION: the warp's product on the host */
	warp_emulated_mma(c, a, b0, b1);
#else
	(void)c, (void)a, (void)b0, (void)b1;
	__trap();
#endif
}

/*
 * Four 8 x 8 bf16 matrices of shared memory into four registers
 * (ldmatrix.x4): lane l names row l % 8 of matrix l / 8, and register j of
 * lane 4g + t gets matrix j's row g, columns 2t and 2t + 1; transposed
 * (TRANS), its column g, rows 2t and 2t + 1. Either way the lower in the
 * low half, as a B fragment wants it.
 */
template <bool TRANS> __device__ static inline void ldsm4(uint32_t r[4], const bf16 *row)
{
#if MMA_OK
	unsigned at = (unsigned)__cvta_generic_to_shared(row);

	if (TRANS)
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(at));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(at));
#elif defined(WARP_EMULATION)
	warp_emulated_ldmatrix_x4(r, row, TRANS);
#else
	(void)r, (void)row;
	__trap();
#endif
}

/*
 * Asynchronous copies into shared memory (cp.async, sm_80 and later): n
 * bytes (4 or 16) to dst, of which the first `valid` come from src and the
 * rest are zeros; they land once the thread has waited for them
 * (cp_async_wait_all) and the block has met at a barrier.
 */
__device__ static inline void cp_async(void *dst, const void *src, int n, int valid)
{
#if MMA_OK
	unsigned at = (unsigned)__cvta_generic_to_shared(dst);

	if (n == 16)
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src),
			     "r"(valid));
	else
		asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(at), "l"(src),
			     "r"(valid));
#elif defined(WARP_EMULATION) /* WARP_EMULATION: copied at once */
	memcpy(dst, src, valid);
	memset((char *)dst + valid, 0, n - valid);
#else
	(void)dst, (void)src, (void)n, (void)valid;
	__trap();
#endif
}

__device__ static inline void cp_async_commit()
{
#if MMA_OK
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ static inline void cp_async_wait_all()
{
#if MMA_OK
	asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

/* The sum or max of a row's value over the 4 lanes that hold the row (lanes 4g .. 4g + 3). */
__device__ static inline float quad_sum(float v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

__device__ static inline float quad_max(float v)
{
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

#endif
