/*
 * kernels/cuda/attention_head.cuh - where one (batch, head) pair's rows
 * are, for the fused attention kernels (flash_attention.cu and
 * flash_attention_mma.cu): q, k and v in qkv (B, T, 3, NH, HS), the output
 * and its gradient in (B, T, NH, HS), the rows' stats in (B, NH, T).
 */
#ifndef STORK_KERNELS_CUDA_ATTENTION_HEAD_CUH
#define STORK_KERNELS_CUDA_ATTENTION_HEAD_CUH

#include <cstddef>

struct fa_head {
	const float *q, *k, *v; /* row t at + t * 3C */
	size_t row3, row;       /* 3C and C */
	size_t off;             /* the pair's offset in a (B, T, NH, HS) array */
	size_t bh;              /* b * NH + h: the pair's rows in stats and D */
};

__device__ static inline fa_head head_at(const float *qkv, int T, int NH, int HS, int bh)
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

#endif
