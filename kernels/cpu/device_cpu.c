/*
 * kernels/cpu/device_cpu.c - the CPU backend's identity, the precision
 * check of the current GPU, and the CUDA entry points of builds configured
 * without CUDA.
 */
#include "config.h"
#include "kernels/device.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

const char *kernels_cpu_backend_name(void)
{
	static char name[128];
#ifdef OPENBLAS_VERSION
	/* OPENBLAS_VERSION is " OpenBLAS 0.3.21 ": drop the padding. */
	const char *v = OPENBLAS_VERSION;
	size_t len;

	while (*v == ' ')
		v++;
	len = strlen(v);
	while (len > 0 && v[len - 1] == ' ')
		len--;
	snprintf(name, sizeof name, "cpu (%.*s, %s kernels)", (int)len, v, openblas_get_corename());
#else
	snprintf(name, sizeof name, "cpu (cblas)");
#endif
	return name;
}

int kernels_cuda_check_precision(enum ops_precision p, char *err, size_t errlen)
{
	int cc = kernels_cuda_compute_capability();

	if (p != OPS_BF16 || cc >= 80)
		return 0;
	snprintf(err, errlen,
		 "bf16 needs bf16 tensor cores (compute capability 8.0 or newer); this GPU has %d.%d",
		 cc / 10, cc % 10);
	return -1;
}

#ifndef HAVE_CUDA
int kernels_cuda_device_count(void)
{
	return 0;
}

const char *kernels_cuda_versions(void)
{
	return "none (built without CUDA)";
}

int kernels_cuda_use_device(int dev, char *desc, size_t desclen, char *err, size_t errlen)
{
	(void)dev;
	if (desclen)
		desc[0] = '\0';
	snprintf(err, errlen, "this build has no CUDA backend");
	return -1;
}

int kernels_cuda_compute_capability(void)
{
	return 0;
}

double kernels_cuda_peak_flops(const char *precision)
{
	(void)precision;
	return 0.0;
}

int kernels_cuda_check(FILE *out)
{
	fprintf(out, "cuda: none (this build has no CUDA backend)\n");
	return 1;
}

void kernels_cuda_engine_bytes(int dev, double *now, double *peak)
{
	(void)dev;
	*now = *peak = 0.0;
}

int kernels_cuda_is_device_ptr(const void *p)
{
	(void)p;
	return 0;
}

void kernels_cuda_why_none(int e, char *buf, size_t len)
{
	(void)e;
	snprintf(buf, len, "this build has no CUDA backend");
}

void kernels_cuda_fused_attention_everywhere(int on)
{
	(void)on;
}

void kernels_cuda_attention_mma(int on)
{
	(void)on;
}
#endif
