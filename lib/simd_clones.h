/*
 * lib/simd_clones.h - SIMD_CLONES_OF("avx512f", ..., "default") before a
 * function compiles it once per listed x86 ISA, and the loader picks the
 * best the CPU has (an ifunc). Elsewhere (other CPUs, clang) it is nothing,
 * and under ThreadSanitizer too: the loader runs a clone's resolver before
 * the sanitizer's runtime is up, and the instrumented resolver crashes.
 */
#ifndef STORK_LIB_SIMD_CLONES_H
#define STORK_LIB_SIMD_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_THREAD__)
#define SIMD_CLONES_OF(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define SIMD_CLONES_OF(...)
#endif

#endif
