/*
 * kernels/cuda/memory.cu - the CUDA backend's memory, its per-thread state
 * (cuBLAS handle, scratch buffers, TF32 switch) and the choice of device.
 *
 * Device memory is plain cudaMalloc (never managed memory: oversubscribing
 * managed memory can hang a GPU); host buffers for transfers are pinned
 * (cudaMallocHost), so copies run at the link's speed. Each host thread
 * (a rank) has its own handle and scratch, made on first use on the device
 * current for that thread.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/device.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

void cuda_check(cudaError_t err, const char *what)
{
	if (err != cudaSuccess) {
		fprintf(stderr, "stork cuda: %s: %s\n", what, cudaGetErrorString(err));
		abort();
	}
}

void cublas_check(cublasStatus_t st, const char *what)
{
	if (st != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "stork cublas: %s failed (status %d)\n", what, (int)st);
		abort();
	}
}

/*
 * What the engine holds on each device, and the most it held since the
 * process started (kernels_cuda_engine_bytes): cudaFree does not say how
 * much it gave back, so each allocation's size and device are kept until
 * its free. A few hundred allocations a run: a map under one lock.
 */
namespace {
struct held_block {
	size_t bytes;
	int dev;
};
constexpr int HELD_DEVICES = 64;
std::mutex held_lock;
std::unordered_map<void *, held_block> held;
size_t held_now[HELD_DEVICES], held_peak[HELD_DEVICES];
} // namespace

static void note_alloc(void *p, size_t bytes)
{
	int dev = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= HELD_DEVICES)
		return;
	std::lock_guard<std::mutex> hold(held_lock);
	held[p] = held_block{ bytes, dev };
	held_now[dev] += bytes;
	if (held_now[dev] > held_peak[dev])
		held_peak[dev] = held_now[dev];
}

static void note_free(void *p)
{
	std::lock_guard<std::mutex> hold(held_lock);
	auto it = held.find(p);

	if (it == held.end())
		return;
	held_now[it->second.dev] -= it->second.bytes;
	held.erase(it);
}

extern "C" void kernels_cuda_engine_bytes(int dev, double *now, double *peak)
{
	std::lock_guard<std::mutex> hold(held_lock);

	*now = dev >= 0 && dev < HELD_DEVICES ? (double)held_now[dev] : 0.0;
	*peak = dev >= 0 && dev < HELD_DEVICES ? (double)held_peak[dev] : 0.0;
}

static thread_local cublasHandle_t blas;
static thread_local cublasLtHandle_t blas_lt;
static thread_local enum ops_precision precision;
static thread_local void *scratch[SCRATCH_NUM];
static thread_local size_t scratch_bytes[SCRATCH_NUM];

cublasHandle_t cuda_blas(void)
{
	if (!blas) {
		cublas_check(cublasCreate(&blas), "cublasCreate");
		cublas_check(cublasSetStream(blas, cudaStreamPerThread), "cublasSetStream");
		cuda_set_precision(precision);
	}
	return blas;
}

cublasLtHandle_t cuda_blas_lt(void)
{
	if (!blas_lt)
		cublas_check(cublasLtCreate(&blas_lt), "cublasLtCreate");
	return blas_lt;
}

/*
 * TF32 is a math mode of the handle (cuBLAS rounds fp32 inputs on the
 * tensor cores). bf16 is the matmul file's own path (bf16 copies of the
 * operands, cublasGemmEx); the handle is then in TF32 mode too, for the
 * fp32 products that remain (attention's), which would otherwise run
 * without tensor cores at a fraction of their speed.
 */
void cuda_set_precision(enum ops_precision p)
{
	precision = p;
	if (blas)
		cublas_check(cublasSetMathMode(blas, p != OPS_FP32 ? CUBLAS_TF32_TENSOR_OP_MATH :
								     CUBLAS_DEFAULT_MATH),
			     "cublasSetMathMode");
}

enum ops_precision cuda_precision(void)
{
	return precision;
}

void *cuda_scratch(int slot, size_t bytes)
{
	if (bytes > scratch_bytes[slot]) {
		if (scratch[slot]) {
			note_free(scratch[slot]);
			cuda_check(cudaFree(scratch[slot]), "cudaFree scratch");
		}
		scratch[slot] = nullptr;
		scratch_bytes[slot] = 0;
		cuda_check(cudaMalloc(&scratch[slot], bytes), "cudaMalloc scratch");
		note_alloc(scratch[slot], bytes);
		scratch_bytes[slot] = bytes;
	}
	return scratch[slot];
}

void *cuda_alloc(size_t bytes)
{
	void *p = nullptr;
	cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);

	if (e == cudaErrorMemoryAllocation) {
		cudaGetLastError(); /* not sticky: clear it, the caller reports */
		return nullptr;
	}
	cuda_check(e, "cudaMalloc");
	note_alloc(p, bytes ? bytes : 1);
	return p;
}

void cuda_free(void *p)
{
	if (p) {
		note_free(p);
		cuda_check(cudaFree(p), "cudaFree");
	}
}

void cuda_upload(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
}

void cuda_download(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "download");
}

void cuda_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
					   cudaStreamPerThread),
			   "device copy");
}

void *cuda_host_alloc(size_t bytes)
{
	void *p = nullptr;

	if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError();
		return nullptr;
	}
	return p;
}

void cuda_host_free(void *p)
{
	if (p)
		cuda_check(cudaFreeHost(p), "cudaFreeHost");
}

void cuda_sync(void)
{
	cuda_check(cudaStreamSynchronize(cudaStreamPerThread), "sync");
}

void cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
		cudaGetLastError();
		*free_bytes = *total_bytes = 0;
	}
}

extern "C" int kernels_cuda_use_device(int dev, char *desc, size_t desclen, char *err,
				       size_t errlen)
{
	cudaDeviceProp p;
	char bus[32] = "?";
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (desclen)
		desc[0] = '\0';
	if (e != cudaSuccess || n == 0) {
		kernels_cuda_why_none(e, err, errlen);
		cudaGetLastError();
		return -1;
	}
	if (dev < 0 || dev >= n) {
		snprintf(err, errlen, "device %d of %d", dev, n);
		return -1;
	}
	if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaFree(nullptr)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&p, dev)) != cudaSuccess) {
		snprintf(err, errlen, "device %d: %s", dev, cudaGetErrorString(e));
		cudaGetLastError();
		return -1;
	}
	cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
	snprintf(desc, desclen, "%s, %s", p.name, bus);
	return 0;
}

extern "C" int kernels_cuda_compute_capability(void)
{
	int dev = 0, major = 0, minor = 0;

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return 10 * major + minor;
}

/*
 * Dense FLOPs per SM per clock by architecture (NVIDIA's whitepapers: A100
 * 312 TFLOP/s bf16 = 108 SMs x 1.41 GHz x 2048; H100 SXM 989 = 132 x 1.83
 * x 4096), times the SMs and the clock the driver reports.
 */
extern "C" double kernels_cuda_peak_flops(const char *precision)
{
	int dev = 0, sms = 0, khz = 0, major = 0;
	double per_clock;
	int tf32 = precision && precision[0] == 't', bf16 = precision && precision[0] == 'b';

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
		cudaGetLastError();
		return 0.0;
	}
	if (major >= 9)
		per_clock = tf32 ? 2048 : bf16 ? 4096 : 256;
	else if (major == 8)
		per_clock = tf32 ? 1024 : bf16 ? 2048 : 128;
	else
		per_clock = tf32 || bf16 ? 0 : 128;
	return per_clock * sms * (double)khz * 1e3;
}

extern "C" int kernels_cuda_is_device_ptr(const void *p)
{
	cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError(); /* a host pointer the driver never saw: not an error */
		return 0;
	}
	return a.type == cudaMemoryTypeDevice;
}
