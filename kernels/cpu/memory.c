/*
 * kernels/cpu/memory.c - the CPU backend's memory: host memory, copies
 * are memcpy.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "lib/io/big_alloc.h"

/*
 * Host memory aligned to a cache line (64-byte aligned rows let the
 * element-wise loops use aligned AVX-512 loads), large arrays on huge
 * pages (lib/io/big_alloc.h).
 */
void *cpu_host_alloc(size_t bytes)
{
	return big_alloc(bytes);
}

void cpu_host_free(void *p)
{
	free(p);
}

/* Every copy of the CPU backend is a plain memcpy: its memory is the host's. */
void cpu_host_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memcpy(dst, src, bytes);
}

void cpu_host_sync(void)
{
}

void cpu_host_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	*free_bytes = 0;
	*total_bytes = 0;
}
