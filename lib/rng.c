/*
 * lib/rng.c - jumping a generator of lib/rng.h ahead without drawing.
 *
 * One xorshift step (the three shift-xors of rng_u32) is linear over the
 * bits of the state: state' = M state, M a 64 x 64 matrix over GF(2). So n
 * steps are M^n, the product of the powers M^(2^i) of n's set bits. The 64
 * powers are computed once; a jump then costs at most 64 matrix-vector
 * products of 64 xors each, whatever n is. This lets many threads fill one
 * long array from one stream, each from where its part begins, and write
 * the very bits one thread drawing in order would.
 */
#include "config.h"
#include "lib/rng.h"

#include <pthread.h>

/* A matrix over GF(2) as its 64 columns: col[j] is the image of bit j. */
struct gf2_matrix {
	uint64_t col[64];
};

static struct gf2_matrix step_power[64]; /* M^(2^i) */
static pthread_once_t powers_once = PTHREAD_ONCE_INIT;

static uint64_t apply(const struct gf2_matrix *a, uint64_t v)
{
	uint64_t r = 0;

	for (int j = 0; v; j++, v >>= 1)
		if (v & 1)
			r ^= a->col[j];
	return r;
}

/* One step of rng_u32 on the state alone (its output is not needed here). */
static uint64_t one_step(uint64_t s)
{
	s ^= s >> 12;
	s ^= s << 25;
	s ^= s >> 27;
	return s;
}

static void compute_powers(void)
{
	for (int j = 0; j < 64; j++)
		step_power[0].col[j] = one_step(1ULL << j);
	for (int i = 1; i < 64; i++) /* M^(2^i) = M^(2^(i-1)) squared: apply it to each column */
		for (int j = 0; j < 64; j++)
			step_power[i].col[j] =
				apply(&step_power[i - 1], step_power[i - 1].col[j]);
}

void rng_skip(uint64_t *state, uint64_t draws)
{
	pthread_once(&powers_once, compute_powers);
	for (int i = 0; draws; i++, draws >>= 1)
		if (draws & 1)
			*state = apply(&step_power[i], *state);
}
