/*
 * t/unit/check_spike.c - the loss-spike detector of train.on_spike
 * (daemon/engine/train/spike.c): what it judges and when, which steps enter its window,
 * its floor under a flat window, a new level after spikes in a row; and
 * its window's trip through a checkpoint's state.json, bit for bit.
 */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/train/spike.h"
#include "lib/io/atomic_file.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct spike_params params = { .window = 50, .min_steps = 20, .zscore = 6.0,
					    .max_in_row = 3 };
static struct spike_window w;

static void setup(void)
{
	spike_init(&w);
}

/* n steps whose loss alternates 1 and 3 (mean 2) and whose norm is 0.5 + 0.1 (i % 2). */
static void fill(int n)
{
	struct spike_verdict v;

	for (int i = 0; i < n; i++)
		ck_assert_int_eq(spike_observe(&w, &params, i % 2 ? 3.0f : 1.0f,
					       i % 2 ? 0.6f : 0.5f, &v), 0);
}

/* The sample standard deviation of 1, 3, 1, 3, ... (n values, n even). */
static double alternating_sd(int n)
{
	return sqrt((double)n / (n - 1));
}

START_TEST(nothing_is_judged_before_min_steps)
{
	struct spike_verdict v;

	fill(19);
	ck_assert_int_eq(spike_observe(&w, &params, 1000.0f, 1000.0f, &v), 0);
	ck_assert(!v.judged);
	ck_assert(isnan(v.loss_z));
	/* it was no spike, so it entered the window: the 20th value */
	ck_assert_int_eq(w.n, 20);
}
END_TEST

START_TEST(a_loss_above_the_threshold_is_a_spike_and_stays_out_of_the_window)
{
	struct spike_verdict v;
	double sd = alternating_sd(20);
	float below = (float)(2.0 + 5.9 * sd), above = (float)(2.0 + 6.1 * sd);

	fill(20);
	ck_assert_int_eq(spike_judge(&w, &params, below, 0.55f, &v), 0);
	ck_assert(v.judged);
	ck_assert_double_eq_tol(v.loss_z, 5.9, 1e-5);
	ck_assert_double_eq_tol(v.loss_mean, 2.0, 1e-12);
	ck_assert_int_eq(spike_observe(&w, &params, above, 0.55f, &v), 1);
	ck_assert_double_eq_tol(v.loss_z, 6.1, 1e-5);
	ck_assert_int_eq(v.window, 20);
	ck_assert_int_eq(w.n, 20);
	ck_assert_int_eq(w.in_row, 1);
	/* the next ordinary step enters, and the count of spikes in a row ends */
	ck_assert_int_eq(spike_observe(&w, &params, 2.0f, 0.55f, &v), 0);
	ck_assert_int_eq(w.n, 21);
	ck_assert_int_eq(w.in_row, 0);
	ck_assert(w.loss[20] == 2.0f);
}
END_TEST

START_TEST(a_gradient_norm_spike_alone_is_a_spike)
{
	struct spike_verdict v;

	fill(20);
	ck_assert_int_eq(spike_observe(&w, &params, 2.0f, 5.0f, &v), 1);
	ck_assert(v.loss_z < 1);
	ck_assert(v.norm_z > 6);
}
END_TEST

START_TEST(a_drop_is_no_spike)
{
	struct spike_verdict v;

	fill(20);
	ck_assert_int_eq(spike_observe(&w, &params, -1000.0f, 0.0f, &v), 0);
	ck_assert(v.loss_z < -6);
}
END_TEST

START_TEST(the_window_keeps_the_newest_steps)
{
	struct spike_verdict v;

	/* slowly rising values: none is a spike */
	for (int i = 0; i < 60; i++)
		ck_assert_int_eq(spike_observe(&w, &params, 10.0f + 0.01f * (float)i, 1.0f, &v), 0);
	ck_assert_int_eq(w.n, 50);
	ck_assert(w.loss[0] == 10.0f + 0.01f * 10.0f);
	ck_assert(w.loss[49] == 10.0f + 0.01f * 59.0f);
	spike_trim(&w, 30);
	ck_assert_int_eq(w.n, 30);
	ck_assert(w.loss[0] == 10.0f + 0.01f * 30.0f);
	ck_assert(w.loss[29] == 10.0f + 0.01f * 59.0f);
}
END_TEST

START_TEST(a_flat_window_counts_one_percent_of_its_mean)
{
	struct spike_verdict v;

	for (int i = 0; i < 20; i++)
		spike_observe(&w, &params, 2.0f, 1.0f, &v);
	/* 5% above a flat 2.0: 5 floors (0.02 each), no spike; 13% above: one */
	ck_assert_int_eq(spike_judge(&w, &params, 2.1f, 1.0f, &v), 0);
	ck_assert_double_eq_tol(v.loss_z, 5.0, 1e-4);
	ck_assert_int_eq(spike_judge(&w, &params, 2.26f, 1.0f, &v), 1);
	ck_assert_double_eq_tol(v.loss_z, 13.0, 1e-4);
}
END_TEST

START_TEST(spikes_in_a_row_make_a_new_level)
{
	struct spike_verdict v;

	fill(20);
	ck_assert_int_eq(spike_observe(&w, &params, 50.0f, 0.55f, &v), 1);
	ck_assert(!v.restarted);
	ck_assert_int_eq(spike_observe(&w, &params, 50.0f, 0.55f, &v), 1);
	ck_assert(!v.restarted);
	ck_assert_int_eq(spike_observe(&w, &params, 50.0f, 0.55f, &v), 1);
	ck_assert(v.restarted);
	ck_assert_int_eq(w.n, 0);
	/* the window fills again from the new level, judging nothing meanwhile */
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(spike_observe(&w, &params, 50.0f + (float)(i % 2), 0.55f, &v), 0);
		ck_assert(!v.judged);
	}
	ck_assert_int_eq(spike_observe(&w, &params, 50.0f, 0.55f, &v), 0);
	ck_assert(v.judged);
}
END_TEST

START_TEST(non_finite_values_are_neither_judged_nor_kept)
{
	struct spike_verdict v;

	fill(20);
	ck_assert_int_eq(spike_observe(&w, &params, NAN, 0.5f, &v), 0);
	ck_assert(!v.judged);
	ck_assert_int_eq(spike_observe(&w, &params, 2.0f, INFINITY, &v), 0);
	ck_assert_int_eq(w.n, 20);
}
END_TEST

/* A window through ckpt_commit's state.json and ckpt_read_state: the same bits. */
START_TEST(the_window_survives_a_checkpoint_bit_for_bit)
{
	static const float odd[] = { 0.1f, 1e-30f, 3.4e38f, 1.17549435e-38f / 3, 2.7182817f,
				     5.60519386e-45f, 123456.79f, 0.33333334f };
	char root[] = "/tmp/check_spike.XXXXXX", dir[4200], err[1024];
	struct ckpt_state st = { .step = 7, .train = { .rng = 1 } }, back;
	struct ckpt_layout l = { .world = 1, .dp = 1, .tp = 1, .pp = 1, .sharded = 1 };
	uint64_t sum = 0, size = 0;
	size_t n = sizeof odd / sizeof *odd;

	ck_assert_ptr_nonnull(mkdtemp(root));
	for (size_t i = 0; i < n; i++) {
		st.spike.loss[i] = odd[i];
		st.spike.norm[i] = -odd[n - 1 - i];
	}
	st.spike.n = (int)n;
	st.spike.in_row = 2;
	ck_assert_msg(ckpt_prepare(root, st.step, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(ckpt_commit(root, &st, &l, &sum, &size, (struct ckpt_keep){ 0 }, err,
				  sizeof err) == 0, "%s", err);
	snprintf(dir, sizeof dir, "%s/step_00000007", root);
	ck_assert_msg(ckpt_read_state(dir, &back, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(back.spike.n, (int)n);
	ck_assert_int_eq(back.spike.in_row, 2);
	ck_assert(!memcmp(back.spike.loss, st.spike.loss, n * sizeof(float)));
	ck_assert(!memcmp(back.spike.norm, st.spike.norm, n * sizeof(float)));
	/* a checkpoint without a window (an empty one, or an earlier version's) reads as empty */
	st.step = 8;
	spike_init(&st.spike);
	ck_assert_msg(ckpt_prepare(root, st.step, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(ckpt_commit(root, &st, &l, &sum, &size, (struct ckpt_keep){ 0 }, err,
				  sizeof err) == 0, "%s", err);
	snprintf(dir, sizeof dir, "%s/step_00000008", root);
	ck_assert_msg(ckpt_read_state(dir, &back, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(back.spike.n, 0);
	ck_assert_int_eq(remove_tree(root), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spike");
	TCase *tc = tcase_create("detector");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, nothing_is_judged_before_min_steps);
	tcase_add_test(tc, a_loss_above_the_threshold_is_a_spike_and_stays_out_of_the_window);
	tcase_add_test(tc, a_gradient_norm_spike_alone_is_a_spike);
	tcase_add_test(tc, a_drop_is_no_spike);
	tcase_add_test(tc, the_window_keeps_the_newest_steps);
	tcase_add_test(tc, a_flat_window_counts_one_percent_of_its_mean);
	tcase_add_test(tc, spikes_in_a_row_make_a_new_level);
	tcase_add_test(tc, non_finite_values_are_neither_judged_nor_kept);
	tcase_add_test(tc, the_window_survives_a_checkpoint_bit_for_bit);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
