/*
 * t/unit/check_preflight.c - the preflight's verdict on a node
 * (daemon/preflight_probe.c: preflight_judge) from every rank's figures.
 */
#include "config.h"
#include "daemon/preflight_probe.h"

#include <check.h>
#include <string.h>

/* Rank figures: two ranks a node, node k's ranks 2k and 2k+1. */
static void fill(struct probe_figures *f, int nodes, float matmul, float memory)
{
	for (int i = 0; i < 2 * nodes; i++)
		f[i] = (struct probe_figures){ .node = (float)(i / 2), .matmul_gflops = matmul,
					       .memory_gbs = memory, .dp_gbs = 1 };
}

START_TEST(equal_nodes_are_kept)
{
	struct probe_figures f[8];
	char why[256];

	fill(f, 4, 50, 10);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(preflight_judge(f, 8, 4, k, 0.25, why, sizeof why), 0);
}
END_TEST

START_TEST(a_node_is_judged_on_its_slowest_rank_against_the_others_median)
{
	struct probe_figures f[6];
	char why[256];

	fill(f, 3, 60, 10);
	f[5].matmul_gflops = 40; /* node 2's second rank: 67% of 60 */
	ck_assert_int_eq(preflight_judge(f, 6, 3, 2, 0.25, why, sizeof why), 1);
	ck_assert_msg(strstr(why, "matrix product 40.0 GFLOP/s, 67% of the other nodes' median 60.0 "
				  "(preflight.tolerance 0.25)"), "%s", why);
	/* the others are measured against medians that include node 2's 40: still kept */
	ck_assert_int_eq(preflight_judge(f, 6, 3, 0, 0.25, why, sizeof why), 0);
	ck_assert_int_eq(preflight_judge(f, 6, 3, 1, 0.25, why, sizeof why), 0);
	/* within the tolerance it is kept */
	ck_assert_int_eq(preflight_judge(f, 6, 3, 2, 0.4, why, sizeof why), 0);
}
END_TEST

START_TEST(two_nodes_each_against_the_other_and_memory_counts_too)
{
	struct probe_figures f[4];
	char why[256];

	fill(f, 2, 50, 20);
	f[2].memory_gbs = f[3].memory_gbs = 5;
	ck_assert_int_eq(preflight_judge(f, 4, 2, 1, 0.25, why, sizeof why), 1);
	ck_assert_msg(strstr(why, "memory bandwidth 5.0 GB/s, 25% of the other nodes' median 20.0"),
		      "%s", why);
	ck_assert_int_eq(preflight_judge(f, 4, 2, 0, 0.25, why, sizeof why), 0);
}
END_TEST

START_TEST(a_failed_probe_leaves_its_node_out_and_out_of_the_median)
{
	struct probe_figures f[6];
	char why[256];

	fill(f, 3, 50, 10);
	f[1].failed = 1;
	f[1].matmul_gflops = 0;
	ck_assert_int_eq(preflight_judge(f, 6, 3, 0, 0.25, why, sizeof why), 1);
	ck_assert_str_eq(why, "a probe failed on it");
	ck_assert_int_eq(preflight_judge(f, 6, 3, 1, 0.25, why, sizeof why), 0);
	ck_assert_int_eq(preflight_judge(f, 6, 3, 2, 0.25, why, sizeof why), 0);
}
END_TEST

START_TEST(one_node_has_no_peers)
{
	struct probe_figures f[2];
	char why[256];

	fill(f, 1, 50, 10);
	f[1].matmul_gflops = 1;
	ck_assert_int_eq(preflight_judge(f, 2, 1, 0, 0.25, why, sizeof why), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("preflight");
	TCase *tc = tcase_create("judge");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, equal_nodes_are_kept);
	tcase_add_test(tc, a_node_is_judged_on_its_slowest_rank_against_the_others_median);
	tcase_add_test(tc, two_nodes_each_against_the_other_and_memory_counts_too);
	tcase_add_test(tc, a_failed_probe_leaves_its_node_out_and_out_of_the_median);
	tcase_add_test(tc, one_node_has_no_peers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
