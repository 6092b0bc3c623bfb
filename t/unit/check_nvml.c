/*
 * t/unit/check_nvml.c - daemon/node/nvml.c against a fake libnvidia-ml
 * (t/unit/fake_nvml.c, built as a shared object beside this test): the
 * loading, an absent library, a driver that does not start, every figure,
 * a figure the board does not report, an unknown GPU.
 */
#include "config.h"
#include "daemon/node/nvml.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

START_TEST(an_absent_library_is_named)
{
	ck_assert_ptr_null(nvml_open("/nonexistent/libnvidia-ml.so.1", err, sizeof err));
	ck_assert_msg(strstr(err, "/nonexistent/libnvidia-ml.so.1"), "%s", err);
}
END_TEST

START_TEST(a_driver_that_does_not_start_is_said)
{
	setenv("FAKE_NVML_FAIL", "init", 1);
	ck_assert_ptr_null(nvml_open(FAKE_NVML, err, sizeof err));
	unsetenv("FAKE_NVML_FAIL");
	ck_assert_msg(strstr(err, "nvmlInit: Driver Not Loaded"), "%s", err);
}
END_TEST

START_TEST(every_figure_of_the_gpu)
{
	struct nvml *n = nvml_open(FAKE_NVML, err, sizeof err);
	struct nvml_sample s;
	char names[128];
	void *dev;

	ck_assert_msg(n != NULL, "%s", err);
	/* CUDA writes the bus id in capitals, NVML compares without case */
	ck_assert_int_eq(nvml_device(n, "0000:3b:00.0", &dev, err, sizeof err), 0);
	ck_assert_int_eq(nvml_sample(n, dev, &s, err, sizeof err), 0);
	ck_assert_double_eq(s.util_pct, 87);
	ck_assert_double_eq(s.mem_used, (double)(61ULL << 30));
	ck_assert_double_eq(s.mem_total, (double)(80ULL << 30));
	ck_assert_double_eq_tol(s.power_w, 612.345, 1e-9);
	ck_assert_double_eq(s.sm_clock_mhz, 1980);
	ck_assert_double_eq(s.temp_c, 64);
	ck_assert_uint_eq(s.throttle, 0x24);
	nvml_throttle_names(s.throttle, names, sizeof names);
	ck_assert_str_eq(names, "sw_power_cap, sw_thermal");
	nvml_throttle_names(0, names, sizeof names);
	ck_assert_str_eq(names, "none");
	/* a board that does not report its power: that figure alone is missing */
	setenv("FAKE_NVML_FAIL", "power", 1);
	ck_assert_int_eq(nvml_sample(n, dev, &s, err, sizeof err), 0);
	unsetenv("FAKE_NVML_FAIL");
	ck_assert(isnan(s.power_w));
	ck_assert_double_eq(s.temp_c, 64);
	nvml_close(n);
}
END_TEST

START_TEST(an_unknown_gpu_is_named_with_nvmls_reason)
{
	struct nvml *n = nvml_open(FAKE_NVML, err, sizeof err);
	void *dev;

	ck_assert_msg(n != NULL, "%s", err);
	ck_assert_int_eq(nvml_device(n, "0000:AF:00.0", &dev, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "0000:AF:00.0") && strstr(err, "Not Found"), "%s", err);
	nvml_close(n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvml");
	TCase *tc = tcase_create("nvml");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, an_absent_library_is_named);
	tcase_add_test(tc, a_driver_that_does_not_start_is_said);
	tcase_add_test(tc, every_figure_of_the_gpu);
	tcase_add_test(tc, an_unknown_gpu_is_named_with_nvmls_reason);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
