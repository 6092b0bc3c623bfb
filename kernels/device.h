/*
 * kernels/device.h - which compute devices this build can use.
 *
 * Both backends provide these; the CPU one always exists, the CUDA one only in
 * builds configured with CUDA (HAVE_CUDA). On a machine without a GPU the CUDA
 * backend reports zero devices instead of failing.
 */
#ifndef STORK_KERNELS_DEVICE_H
#define STORK_KERNELS_DEVICE_H

#include <stddef.h>
#include <stdio.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices visible to this process; 0 without CUDA or GPUs. */
int kernels_cuda_device_count(void);

/*
 * Human-readable backend summary with the BLAS kernels in use, e.g.
 * "cpu (OpenBLAS 0.3.21, Cooperlake kernels)". Static storage.
 */
const char *kernels_cpu_backend_name(void);

/* CUDA runtime and NCCL versions as "cuda 13.0, nccl 2.27.3", or "none". */
const char *kernels_cuda_versions(void);

/*
 * Make CUDA device dev current for the calling thread (and create its
 * context). Fills desc with e.g. "NVIDIA H100 80GB HBM3, 0000:9d:00.0".
 * Returns 0, or -1 with CUDA's message in err (e.g. "no CUDA device").
 */
int kernels_cuda_use_device(int dev, char *desc, size_t desclen, char *err, size_t errlen);

/* Compute capability of the current device as 10 * major + minor (90 for an H100); 0 without one. */
int kernels_cuda_compute_capability(void);

/*
 * Whether the current device computes matrix products in precision p:
 * 0, or -1 with the reason in err (bf16 needs the bf16 tensor cores of
 * compute capability 8.0 or newer).
 */
int kernels_cuda_check_precision(enum ops_precision p, char *err, size_t errlen);

/*
 * Dense peak of the current device in FLOP/s for "fp32", "tf32" or "bf16",
 * from its SM count, clock and compute capability; 0 if unknown.
 */
double kernels_cuda_peak_flops(const char *precision);

/*
 * For `stork check`: print the driver, CUDA and NCCL versions and one line
 * per GPU, then run a one-float NCCL all-reduce over every visible GPU.
 * Returns 0 (all well), 1 (no GPU: nothing to test), -1 (the all-reduce
 * failed or gave a wrong sum; the line says how).
 */
int kernels_cuda_check(FILE *out);

/*
 * Why this node has no usable CUDA device, given the CUDA runtime's error
 * code e (0 when it counted none; -1: ask the runtime): no driver, a
 * driver too old for this build, CUDA_VISIBLE_DEVICES hiding every device,
 * or no device; into buf.
 */
void kernels_cuda_why_none(int e, char *buf, size_t len);

/*
 * The device memory this process's engine holds on GPU dev (its
 * allocations and the backend's scratch), now and at most since the
 * process started, in bytes; both 0 without CUDA.
 */
void kernels_cuda_engine_bytes(int dev, double *now, double *peak);

/* Whether p points into device memory (cudaMalloc); 0 for host memory and without CUDA. */
int kernels_cuda_is_device_ptr(const void *p);

/*
 * Where the calling thread's fused attention runs its own kernels
 * (kernels/cuda/flash_attention.cu). By default only in bf16: in fp32 and
 * TF32, cuBLAS's unfused products measured faster on an H100, so the
 * fused entries run those there. On (1), the fused kernels run in every
 * precision: the tests compare them with the unfused ones, and they keep
 * the T x T scores out of memory. Nothing without CUDA.
 */
void kernels_cuda_fused_attention_everywhere(int on);

/*
 * Where the calling thread's bf16 fused attention runs the register-tile
 * kernels (kernels/cuda/flash_attention_mma.cu: mma.sync, the scores
 * never leaving the registers; heads up to 64 wide, sm_80 and later)
 * instead of the WMMA ones. On by default (on an H200, GPT-2 124M at
 * B=16, T=1024 in bf16: 18.2 ms of attention a step against the WMMA
 * kernels' 34.2, within the same tolerance of the unfused path); 0 keeps
 * the WMMA kernels (bench-train --attention wmma). Nothing without CUDA.
 */
void kernels_cuda_attention_mma(int on);

#ifdef __cplusplus
}
#endif
#endif
