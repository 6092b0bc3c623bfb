/*
 * t/gpu/check_nvml_gpu.c - the real libnvidia-ml through daemon/node/nvml:
 * the GPU the CUDA backend uses is found by the bus id CUDA gives, and a
 * sample taken while the GPU multiplies matrices has figures in their
 * units and ranges (t/unit/check_nvml covers the loading and every field
 * against a fake library). Prints the sample, the figures a GPU run's
 * metrics carry. Exits 77 without a GPU.
 */
#include "config.h"
#include "daemon/node/nvml.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/clock.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Products of n x n matrices for about seconds s, waited for. */
static void keep_busy(double s)
{
	const int n = 2048;
	float *a = ops_cuda.alloc((size_t)n * n * sizeof(float));
	float *out = ops_cuda.alloc((size_t)n * n * sizeof(float));
	double end = clock_monotonic() + s;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(out);
	ops_cuda.zero(a, (size_t)n * n);
	while (clock_monotonic() < end) {
		for (int i = 0; i < 8; i++)
			ops_cuda.matmul_forward(out, a, a, NULL, n, n, n);
		ops_cuda.sync();
	}
	ops_cuda.free(out);
	ops_cuda.free(a);
}

START_TEST(test_a_busy_gpu_sampled)
{
	char desc[160], err[512], names[160];
	struct nvml_sample s;
	struct nvml *n;
	void *dev = NULL;

	ck_assert_msg(kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) == 0, "%s", err);
	ops_cuda.set_precision(OPS_FP32);
	n = nvml_open(NULL, err, sizeof err);
	ck_assert_msg(n != NULL, "%s", err);
	/* desc is "NAME, BUS", as the engine reads it (train_device.c) */
	ck_assert_ptr_nonnull(strrchr(desc, ' '));
	ck_assert_msg(nvml_device(n, strrchr(desc, ' ') + 1, &dev, err, sizeof err) == 0, "%s: %s",
		      desc, err);
	keep_busy(1.5);
	ck_assert_msg(nvml_sample(n, dev, &s, err, sizeof err) == 0, "%s", err);
	nvml_throttle_names(s.throttle, names, sizeof names);
	printf("check_nvml_gpu: %s: utilisation %.0f%%, memory %.0f of %.0f MiB, power %.1f W, "
	       "SM clock %.0f MHz, %.0f C, throttle %s\n",
	       desc, s.util_pct, s.mem_used / 1048576, s.mem_total / 1048576, s.power_w,
	       s.sm_clock_mhz, s.temp_c, names);
	/* the sample period (1/6 s to 1 s) ended inside the products */
	ck_assert_msg(s.util_pct > 0 && s.util_pct <= 100, "utilisation %g%%", s.util_pct);
	/* this process holds the two 16 MiB matrices' worth at least, freed or not */
	ck_assert_msg(s.mem_total > 1e9 && s.mem_used > 32e6 && s.mem_used <= s.mem_total,
		      "memory %g of %g bytes", s.mem_used, s.mem_total);
	ck_assert_msg(isnan(s.power_w) || (s.power_w > 1 && s.power_w < 2000), "power %g W", s.power_w);
	ck_assert_msg(s.sm_clock_mhz > 100 && s.sm_clock_mhz < 5000, "SM clock %g MHz", s.sm_clock_mhz);
	ck_assert_msg(s.temp_c > 5 && s.temp_c < 120, "temperature %g C", s.temp_c);
	nvml_close(n);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	if (kernels_cuda_device_count() == 0) {
		printf("check_nvml_gpu: skipped: no CUDA device visible (%s)\n", kernels_cuda_versions());
		return 77;
	}
	s = suite_create("nvml_gpu");
	tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a_busy_gpu_sampled);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	/* CUDA was initialised above: no child may use it (see check_ops_cuda) */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
