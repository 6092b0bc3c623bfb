/*
 * kernels/cuda/device_cuda.cu - the CUDA backend's device discovery.
 *
 * A machine without a GPU (or without a driver) is not an error here: the
 * daemon then runs the CPU backend. Errors are reported as zero devices,
 * and kernels_cuda_why_none says which cause it was.
 */
#include "config.h"
#include "kernels/device.h"

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

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

/*
 * Why a node has no usable CUDA device, from the runtime's error e: CUDA's
 * own words ("CUDA driver version is insufficient for CUDA runtime
 * version") hide the usual causes, which are no driver at all, a driver
 * older than this build's runtime, or CUDA_VISIBLE_DEVICES hiding every
 * device.
 */
extern "C" void kernels_cuda_why_none(int e, char *buf, size_t len)
{
	int drv = 0, rt = 0, n = 0;
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");

	if (e < 0) /* ask the runtime again */
		e = (int)cudaGetDeviceCount(&n);

	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	if (e == cudaErrorInsufficientDriver && drv == 0)
		snprintf(buf, len, "no CUDA device: no NVIDIA driver on this node%s",
			 access("/proc/driver/nvidia/version", F_OK) == 0 ?
				 " that this process can load (libcuda.so.1)" :
				 " (no /proc/driver/nvidia/version)");
	else if (e == cudaErrorInsufficientDriver)
		snprintf(buf, len, "no CUDA device: the NVIDIA driver supports CUDA %d.%d, older "
			 "than the CUDA %d.%d this build needs: update the driver",
			 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
	else if (e == cudaErrorNoDevice && visible)
		snprintf(buf, len, "no CUDA device: CUDA_VISIBLE_DEVICES=%s hides every GPU of "
			 "this node from this process", visible);
	else if (e == cudaErrorNoDevice || e == cudaSuccess)
		snprintf(buf, len, "no CUDA device on this node (driver for CUDA %d.%d present)",
			 drv / 1000, drv % 1000 / 10);
	else
		snprintf(buf, len, "no CUDA device: %s", cudaGetErrorString((cudaError_t)e));
}
