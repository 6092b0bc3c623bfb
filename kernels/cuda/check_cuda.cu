/*
 * kernels/cuda/check_cuda.cu - what `stork check` reports about the GPUs:
 * each device's name, memory, PCI address and compute capability, the
 * driver, runtime and NCCL versions, and a tiny NCCL all-reduce over every
 * visible GPU, so that a broken driver, a missing NCCL or a GPU NCCL cannot
 * use shows up before a job is submitted.
 */
#include "config.h"
#include "kernels/device.h"

#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <nccl.h>
#include <vector>

/* One line per visible device; returns how many. */
static int list_devices(FILE *out)
{
	int n = 0, drv = 0;

	/* no driver installed: the runtime says version 0 */
	if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0)
		fprintf(out, "cuda: no driver, %s\n", kernels_cuda_versions());
	else
		fprintf(out, "cuda: driver %d.%d, %s\n", drv / 1000, (drv % 1000) / 10,
			kernels_cuda_versions());
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		fprintf(out, "gpus: none usable (%s)\n", "no CUDA device");
		return 0;
	}
	for (int d = 0; d < n; d++) {
		cudaDeviceProp p;
		char bus[32] = "?";

		if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
			continue;
		cudaDeviceGetPCIBusId(bus, sizeof bus, d);
		fprintf(out, "gpu %d: %s, %.1f GiB, sm_%d%d, %d SMs, %s\n", d, p.name,
			(double)p.totalGlobalMem / (1 << 30), p.major, p.minor,
			p.multiProcessorCount, bus);
	}
	return n;
}

/*
 * Every GPU adds its ordinal + 1 into one float: the sum must be n(n+1)/2.
 * ncclCommInitAll makes one communicator per device in this process.
 */
static int nccl_allreduce_test(int n, char *msg, size_t len)
{
	std::vector<ncclComm_t> comms(n);
	std::vector<float *> bufs(n, nullptr);
	float want, got[64] = { 0 };
	ncclResult_t r;
	int ok = 1;

	if (n > 64)
		n = 64;
	want = n * (n + 1) / 2.0f;
	if ((r = ncclCommInitAll(comms.data(), n, nullptr)) != ncclSuccess) {
		snprintf(msg, len, "ncclCommInitAll: %s (%s)", ncclGetErrorString(r),
			 ncclGetLastError(nullptr));
		return -1;
	}
	for (int d = 0; d < n; d++) {
		float v = (float)(d + 1);

		cudaSetDevice(d);
		cudaMalloc(&bufs[d], sizeof(float));
		cudaMemcpy(bufs[d], &v, sizeof v, cudaMemcpyHostToDevice);
	}
	ncclGroupStart();
	for (int d = 0; d < n; d++)
		ncclAllReduce(bufs[d], bufs[d], 1, ncclFloat32, ncclSum, comms[d],
			      cudaStreamLegacy);
	r = ncclGroupEnd();
	for (int d = 0; d < n; d++) {
		cudaSetDevice(d);
		cudaMemcpy(&got[d], bufs[d], sizeof(float), cudaMemcpyDeviceToHost);
		ok &= got[d] == want;
		cudaFree(bufs[d]);
		ncclCommDestroy(comms[d]);
	}
	if (r != ncclSuccess) {
		snprintf(msg, len, "ncclAllReduce: %s", ncclGetErrorString(r));
		return -1;
	}
	snprintf(msg, len, "%s: %d GPU(s), sum %.0f (expected %.0f)", ok ? "ok" : "WRONG", n,
		 got[0], want);
	return ok ? 0 : -1;
}

extern "C" int kernels_cuda_check(FILE *out)
{
	char msg[256];
	int n = list_devices(out), rc;

	if (n == 0)
		return 1;
	rc = nccl_allreduce_test(n, msg, sizeof msg);
	fprintf(out, "nccl all-reduce: %s\n", msg);
	return rc < 0 ? -1 : 0;
}
