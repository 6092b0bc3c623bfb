/*
 * lib/rng.h - the one random number generator of Stork.
 *
 * A 64-bit xorshift* generator: tiny, fast, and its whole state is one
 * uint64_t, so checkpoints save and restore it exactly and a resumed run
 * draws the same numbers as an uninterrupted one. Model initialisation, data
 * shuffling and dropout-free sampling all draw from explicit states; there is
 * no hidden global generator. Callable from host and device code.
 */
#ifndef STORK_RNG_H
#define STORK_RNG_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define RNG_HD __host__ __device__
#else
#define RNG_HD
#endif

/* Next 32 random bits; advances *state (which must not be 0). */
static inline RNG_HD uint32_t rng_u32(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (uint32_t)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}

/* Uniform float in [0, 1): the top 24 bits, exactly representable. */
static inline RNG_HD float rng_f32(uint64_t *state)
{
	return (float)(rng_u32(state) >> 8) / 16777216.0f;
}

/* Uniform integer in [0, n) for n > 0 (modulo bias is below 2^-32 * n). */
static inline RNG_HD uint32_t rng_below(uint64_t *state, uint32_t n)
{
	return (uint32_t)(((uint64_t)rng_u32(state) * n) >> 32);
}

/* A normally distributed float (Box-Muller, one value per call). */
static inline RNG_HD float rng_normal(uint64_t *state, float mean, float std)
{
	float u1 = rng_f32(state), u2 = rng_f32(state);

	if (u1 < 1e-30f)
		u1 = 1e-30f;
	return mean + std * sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

/*
 * Advance *state as `draws` calls of rng_u32 would, in at most 64 small
 * steps (lib/rng.c; host code only). A normal from rng_normal is 2 draws.
 */
#ifdef __cplusplus
extern "C"
#endif
void rng_skip(uint64_t *state, uint64_t draws);

/* A non-zero state derived from a seed and a stream id (e.g. rank). */
static inline RNG_HD uint64_t rng_seed(uint64_t seed, uint64_t stream)
{
	/* splitmix64 of (seed, stream) spreads nearby seeds apart. */
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 0x9E3779B97F4A7C15ULL;
}

#endif
