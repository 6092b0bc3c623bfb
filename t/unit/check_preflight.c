/*
 * t/unit/check_preflight.c - the preflight's verdict on every node
 * (daemon/engine/train/preflight_verdict.c) from every rank's figures: who keeps up,
 * who is only named, who is left out.
 */
#include "config.h"
#include "daemon/engine/train/preflight_verdict.h"

#include <check.h>
#include <string.h>

/* Rank figures: two ranks a node, node k's ranks 2k and 2k+1. */
static void fill(struct probe_figures *f, int nodes, float matmul, float memory)
{
	for (int i = 0; i < 2 * nodes; i++)
		f[i] = (struct probe_figures){ .node = (float)(i / 2), .matmul_gflops = matmul,
					       .memory_gbs = memory, .dp_gbs = 1 };
}

static enum preflight_kind kind[8];
static preflight_text text[8];

START_TEST(equal_nodes_are_kept)
{
	struct probe_figures f[8];

	fill(f, 4, 50, 10);
	ck_assert_int_eq(preflight_verdicts(f, 8, 4, 0.5, kind, text), 0);
	for (int k = 0; k < 4; k++) {
		ck_assert_int_eq(kind[k], PREFLIGHT_KEPT);
		ck_assert_str_eq(text[k], "ok");
	}
}
END_TEST

START_TEST(a_majority_leaves_out_a_node_judged_on_its_slowest_rank)
{
	struct probe_figures f[6];

	fill(f, 3, 60, 10);
	f[5].matmul_gflops = 24; /* node 2's second rank: 40% of 60 */
	ck_assert_int_eq(preflight_verdicts(f, 6, 3, 0.5, kind, text), 1);
	ck_assert_int_eq(kind[2], PREFLIGHT_LEFT_OUT);
	ck_assert_msg(strstr(text[2], "matrix product 24.0 GFLOP/s, 40% of the other nodes' median "
				      "60.0 (preflight.tolerance 0.50)"), "%s", text[2]);
	/* the others are measured against medians that include node 2's 24: still kept */
	ck_assert_int_eq(kind[0], PREFLIGHT_KEPT);
	ck_assert_int_eq(kind[1], PREFLIGHT_KEPT);
	/* within the tolerance it is kept */
	ck_assert_int_eq(preflight_verdicts(f, 6, 3, 0.7, kind, text), 0);
	ck_assert_int_eq(kind[2], PREFLIGHT_KEPT);
}
END_TEST

START_TEST(two_nodes_have_no_majority_the_slower_is_only_named)
{
	struct probe_figures f[4];

	fill(f, 2, 50, 20);
	f[2].matmul_gflops = f[3].matmul_gflops = 5; /* a tenth: slowed, not broken */
	ck_assert_int_eq(preflight_verdicts(f, 4, 2, 0.5, kind, text), 0);
	ck_assert_int_eq(kind[0], PREFLIGHT_KEPT);
	ck_assert_int_eq(kind[1], PREFLIGHT_WARNED);
	ck_assert_msg(strstr(text[1], "matrix product 5.0 GFLOP/s, 10% of the other nodes' median "
				      "50.0 (preflight.tolerance 0.50); kept: two nodes have no "
				      "majority to say which one is slow"), "%s", text[1]);
	/* each a little short on one figure: both named, neither left out */
	fill(f, 2, 50, 20);
	f[0].memory_gbs = f[1].memory_gbs = 9;
	f[2].matmul_gflops = 24;
	ck_assert_int_eq(preflight_verdicts(f, 4, 2, 0.5, kind, text), 0);
	ck_assert_int_eq(kind[0], PREFLIGHT_WARNED);
	ck_assert_int_eq(kind[1], PREFLIGHT_WARNED);
}
END_TEST

START_TEST(a_figure_under_the_floor_is_a_broken_device_even_on_two_nodes)
{
	struct probe_figures f[4];

	fill(f, 2, 50, 20);
	f[2].memory_gbs = 0.5; /* 2.5%: under a twentieth */
	ck_assert_int_eq(preflight_verdicts(f, 4, 2, 0.5, kind, text), 1);
	ck_assert_int_eq(kind[1], PREFLIGHT_LEFT_OUT);
	ck_assert_msg(strstr(text[1], "memory bandwidth 0.5 GB/s, 2% of the other nodes' median 20.0 "
				      "(under a twentieth of it: a broken device)"), "%s", text[1]);
	ck_assert_int_eq(kind[0], PREFLIGHT_KEPT);
	/* a broken figure counts even when the other one is only short */
	f[2].matmul_gflops = 20;
	ck_assert_int_eq(preflight_verdicts(f, 4, 2, 0.5, kind, text), 1);
	ck_assert_int_eq(kind[1], PREFLIGHT_LEFT_OUT);
}
END_TEST

START_TEST(no_majority_when_half_the_nodes_are_short)
{
	struct probe_figures f[8];

	fill(f, 4, 50, 20);
	f[4].matmul_gflops = f[6].matmul_gflops = 20;
	ck_assert_int_eq(preflight_verdicts(f, 8, 4, 0.5, kind, text), 0);
	ck_assert_int_eq(kind[2], PREFLIGHT_WARNED);
	ck_assert_int_eq(kind[3], PREFLIGHT_WARNED);
	ck_assert_msg(strstr(text[3], "kept: too many nodes are short"), "%s", text[3]);
	/* one short of four: the three others are a majority */
	f[6].matmul_gflops = 50;
	ck_assert_int_eq(preflight_verdicts(f, 8, 4, 0.5, kind, text), 1);
	ck_assert_int_eq(kind[2], PREFLIGHT_LEFT_OUT);
}
END_TEST

START_TEST(a_failed_probe_leaves_its_node_out_and_out_of_the_median)
{
	struct probe_figures f[6];

	fill(f, 3, 50, 10);
	f[1].failed = 1;
	f[1].matmul_gflops = 0;
	ck_assert_int_eq(preflight_verdicts(f, 6, 3, 0.5, kind, text), 1);
	ck_assert_int_eq(kind[0], PREFLIGHT_LEFT_OUT);
	ck_assert_str_eq(text[0], "a probe failed on it");
	ck_assert_int_eq(kind[1], PREFLIGHT_KEPT);
	ck_assert_int_eq(kind[2], PREFLIGHT_KEPT);
}
END_TEST

START_TEST(one_node_has_no_peers)
{
	struct probe_figures f[2];

	fill(f, 1, 50, 10);
	f[1].matmul_gflops = 1;
	ck_assert_int_eq(preflight_verdicts(f, 2, 1, 0.5, kind, text), 0);
	ck_assert_int_eq(kind[0], PREFLIGHT_KEPT);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("preflight");
	TCase *tc = tcase_create("verdict");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, equal_nodes_are_kept);
	tcase_add_test(tc, a_majority_leaves_out_a_node_judged_on_its_slowest_rank);
	tcase_add_test(tc, two_nodes_have_no_majority_the_slower_is_only_named);
	tcase_add_test(tc, a_figure_under_the_floor_is_a_broken_device_even_on_two_nodes);
	tcase_add_test(tc, no_majority_when_half_the_nodes_are_short);
	tcase_add_test(tc, a_failed_probe_leaves_its_node_out_and_out_of_the_median);
	tcase_add_test(tc, one_node_has_no_peers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
