/*
 * kernels/cuda/device_cuda.cu - the CUDA backend's device discovery.
 *
 * A machine without a GPU (or without a driver) is not an error here: the
 * daemon then runs the CPU backend. Errors are reported as zero devices.
 */
#include "config.h"
#include "kernels/device.h"

#include <cstdio>
#include <cuda_runtime.h>
#include <nccl.h>

extern "C" int kernels_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

extern "C" const char *kernels_cuda_versions(void)
{
	static char buf[96];
	int rt = 0, nccl = 0;
	cudaRuntimeGetVersion(&rt);
	ncclGetVersion(&nccl);
	/* NCCL >= 2.9 encodes the version as major*10000 + minor*100 + patch. */
	snprintf(buf, sizeof buf, "cuda %d.%d, nccl %d.%d.%d", rt / 1000, (rt % 1000) / 10,
		 nccl / 10000, (nccl % 10000) / 100, nccl % 100);
	return buf;
}
