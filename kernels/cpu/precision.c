/*
 * kernels/cpu/precision.c - the precision of the CPU backend's matrix
 * products (ops->set_precision), and bf16 emulation.
 *
 * A CPU has no bf16 tensor cores (OpenBLAS's sbgemm needs AVX-512 BF16
 * and rounds differently), so bf16 products are emulated exactly: the
 * inputs are rounded to bf16 (math_bf16_round, the rounding of the GPU's
 * conversion) into scratch copies, and sgemm multiplies the copies. Each
 * product of two bf16 values is exact in fp32, so the result is what a
 * bf16 product with fp32 accumulation gives, up to the order of the sum.
 * It is slower than fp32 (the copies), and is there so that a bf16 run's
 * numerics can be studied, tested and continued on CPUs.
 *
 * State is per calling thread (a rank's worker): its precision and its
 * scratch copies, freed with the thread.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <pthread.h>
#include <stdio.h>

struct precision_state {
	enum ops_precision p;
	float *copy[CPU_BF16_SLOTS];
	size_t cap[CPU_BF16_SLOTS]; /* floats */
};

static _Thread_local struct precision_state *my_state;
static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;

static void state_free(void *arg)
{
	struct precision_state *s = arg;

	for (int i = 0; i < CPU_BF16_SLOTS; i++)
		free(s->copy[i]);
	free(s);
}

static void state_key_create(void)
{
	pthread_key_create(&state_key, state_free);
}

/* The calling thread's state, made on first use (NULL only out of memory). */
static struct precision_state *state(void)
{
	if (!my_state) {
		pthread_once(&state_key_once, state_key_create);
		my_state = calloc(1, sizeof *my_state);
		if (my_state)
			pthread_setspecific(state_key, my_state);
	}
	return my_state;
}

void cpu_set_precision(enum ops_precision p)
{
	struct precision_state *s;

	if (p == OPS_FP32 && !my_state)
		return;
	if (!(s = state())) {
		fprintf(stderr, "stork cpu kernels: out of memory for the precision state\n");
		abort();
	}
	s->p = p;
}

int cpu_bf16_on(void)
{
	return my_state && my_state->p == OPS_BF16;
}

struct round_args {
	float *dst;
	const float *src;
	size_t n;
};

static SIMD_CLONES void round_part(void *p, int block, int count)
{
	struct round_args *a = p;
	size_t lo, hi;

	split_size(a->n, block, count, &lo, &hi);
	for (size_t i = lo; i < hi; i++)
		a->dst[i] = math_bf16_round(a->src[i]);
}

void cpu_round_bf16(float *p, size_t n)
{
	struct round_args a = { .dst = p, .src = p, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(4.0 * n), round_part, &a);
}

const float *cpu_bf16_rounded(int slot, const float *x, size_t n)
{
	struct precision_state *s = state();
	struct round_args a;

	if (s && n > s->cap[slot]) {
		free(s->copy[slot]);
		s->copy[slot] = malloc(n * sizeof(float));
		s->cap[slot] = s->copy[slot] ? n : 0;
	}
	if (!s || !s->copy[slot]) {
		/* a void kernel cannot report it; computing in fp32 instead would be a lie */
		fprintf(stderr, "stork cpu kernels: out of memory for a bf16 copy of %zu MiB\n",
			n * sizeof(float) >> 20);
		abort();
	}
	a = (struct round_args){ .dst = s->copy[slot], .src = x, .n = n };
	parallel_for(blocks_of(n, EW_BLOCK), threads_for(4.0 * n), round_part, &a);
	return s->copy[slot];
}
