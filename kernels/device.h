/*
 * kernels/device.h - which compute devices this build can use.
 *
 * Both backends provide these; the CPU one always exists, the CUDA one only in
 * builds configured with CUDA (HAVE_CUDA). On a machine without a GPU the CUDA
 * backend reports zero devices instead of failing.
 */
#ifndef STORK_KERNELS_DEVICE_H
#define STORK_KERNELS_DEVICE_H

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

#ifdef __cplusplus
}
#endif
#endif
