/*
 * kernels/cpu/reduce.c - the sum of squares (the gradient norm), in a
 * fixed order (CPU backend).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

/*
 * Sum of squares: fixed chunks of SUMSQ_CHUNK elements, each summed in
 * double over SUM_LANES partial sums, the chunk sums then added in chunk
 * order by the caller: one block per chunk, so the result is the same for
 * any thread count.
 */
#define SUMSQ_CHUNK 65536

struct sumsq_args {
	const float *x;
	size_t n;
	double *chunk;
};

SIMD_CLONES
static double sumsq_chunk(const float *restrict x, size_t n)
{
	double acc[SUM_LANES] = { 0 }, s = 0.0;
	size_t i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += (double)x[i + j] * x[i + j];
	for (; i < n; i++)
		acc[i % SUM_LANES] += (double)x[i] * x[i];
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

/* One block per chunk. */
static void sumsq_part(void *p, int block, int count)
{
	struct sumsq_args *a = p;
	size_t lo = (size_t)block * SUMSQ_CHUNK;
	size_t hi = lo + SUMSQ_CHUNK < a->n ? lo + SUMSQ_CHUNK : a->n;

	(void)count;
	a->chunk[block] = sumsq_chunk(a->x + lo, hi - lo);
}

double cpu_sumsq(const float *x, size_t n)
{
	size_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
	double small[64], *chunk = chunks <= 64 ? small : malloc(chunks * sizeof(double)), s = 0.0;
	struct sumsq_args a = { x, n, chunk };

	if (!chunk) { /* no memory for the partial sums: one thread, same order */
		for (size_t c = 0; c < chunks; c++)
			s += sumsq_chunk(x + c * SUMSQ_CHUNK,
					 c + 1 < chunks ? SUMSQ_CHUNK : n - c * SUMSQ_CHUNK);
		return s;
	}
	parallel_for((int)chunks, threads_for(2.0 * n), sumsq_part, &a);
	for (size_t c = 0; c < chunks; c++)
		s += chunk[c];
	if (chunk != small)
		free(chunk);
	return s;
}
