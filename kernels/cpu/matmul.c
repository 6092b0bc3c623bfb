/*
 * kernels/cpu/matmul.c - the linear layers on CBLAS sgemm, cut into column
 * blocks of single-threaded calls (CPU backend). Under bf16 precision the
 * operands are bf16-rounded copies (precision.c); bias and sums stay fp32.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <cblas.h>

/*
 * sgemm blocks of a dimension of a matrix product: at least 6 (even
 * C = 768 then balances over 2 or 3 threads), else about 512 columns each
 * (a single-core sgemm of 512 columns runs as fast as one of thousands;
 * 128 loses about 5%).
 */
static int mm_blocks(int dim)
{
	int n = blocks_of(dim, 512);

	return n < 6 ? 6 : n;
}


struct mm_args {
	float *out, *dinp, *dweight, *dbias;
	const float *inp, *weight, *bias, *dout;
	const float *dout_fp32; /* dbias sums the unrounded gradient */
	int N, C, OC;
	int dinp_blocks, dweight_blocks; /* matmul_backward's two kinds of block */
};

/*
 * out[:, o0:o1] = inp @ weight[o0:o1]^T (+ bias[o0:o1]): the bias is
 * written first and sgemm adds to it (beta = 1), which costs no more than
 * the zeroing sgemm does for beta = 0.
 */
static void mm_forward_part(void *p, int block, int count)
{
	struct mm_args *a = p;
	int lo, hi;

	split_range(a->OC, 16, block, count, &lo, &hi);
	if (hi <= lo)
		return;
	if (a->bias)
		for (int r = 0; r < a->N; r++)
			memcpy(a->out + (size_t)r * a->OC + lo, a->bias + lo,
			       (size_t)(hi - lo) * sizeof(float));
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->N, hi - lo, a->C, 1.0f, a->inp,
		    a->C, a->weight + (size_t)lo * a->C, a->C, a->bias ? 1.0f : 0.0f, a->out + lo,
		    a->OC);
}

void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			   int N, int C, int OC)
{
	struct mm_args a = { .out = out, .inp = inp, .weight = weight, .bias = bias, .N = N,
			     .C = C, .OC = OC };

	if (cpu_bf16_on()) {
		a.inp = cpu_bf16_rounded(CPU_BF16_INP, inp, (size_t)N * C);
		a.weight = cpu_bf16_rounded(CPU_BF16_WEIGHT, weight, (size_t)OC * C);
	}

	parallel_for(mm_blocks(OC), threads_for(2.0 * N * C * OC), mm_forward_part,
		     &a);
}

/*
 * Blocks [0, dinp_blocks) are column blocks [c0, c1) of dinp, the others
 * row blocks [o0, o1) of dweight and dbias:
 *   dinp[:, c0:c1]    += dout @ weight[:, c0:c1]
 *   dweight[o0:o1, :] += dout[:, o0:o1]^T @ inp
 *   dbias[o0:o1]      += sum over rows of dout[:, o0:o1] (in row order)
 */
static void mm_backward_part(void *p, int block, int count)
{
	struct mm_args *a = p;
	int lo, hi;

	(void)count;
	if (block < a->dinp_blocks) {
		split_range(a->C, 16, block, a->dinp_blocks, &lo, &hi);
		if (hi > lo)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->N, hi - lo, a->OC,
				    1.0f, a->dout, a->OC, a->weight + lo, a->C, 1.0f, a->dinp + lo,
				    a->C);
		return;
	}
	split_range(a->OC, 16, block - a->dinp_blocks, a->dweight_blocks, &lo, &hi);
	if (hi <= lo)
		return;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, a->C, a->N, 1.0f,
		    a->dout + lo, a->OC, a->inp, a->C, 1.0f, a->dweight + (size_t)lo * a->C, a->C);
	if (a->dbias)
		for (int r = 0; r < a->N; r++)
			for (int o = lo; o < hi; o++)
				a->dbias[o] += a->dout_fp32[(size_t)r * a->OC + o];
}

void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			    const float *inp, const float *weight, int N, int C, int OC)
{
	struct mm_args a = { .dinp = dinp, .dweight = dweight, .dbias = dbias, .inp = inp,
			     .weight = weight, .dout = dout, .dout_fp32 = dout, .N = N, .C = C, .OC = OC,
			     .dinp_blocks = dinp ? mm_blocks(C) : 0,
			     .dweight_blocks = mm_blocks(OC) };

	if (cpu_bf16_on()) {
		a.inp = cpu_bf16_rounded(CPU_BF16_INP, inp, (size_t)N * C);
		a.weight = cpu_bf16_rounded(CPU_BF16_WEIGHT, weight, (size_t)OC * C);
		a.dout = cpu_bf16_rounded(CPU_BF16_DOUT, dout, (size_t)N * OC);
	}

	parallel_for(a.dinp_blocks + a.dweight_blocks, threads_for(4.0 * N * C * OC),
		     mm_backward_part, &a);
}
