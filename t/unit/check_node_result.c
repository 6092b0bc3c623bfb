/*
 * t/unit/check_node_result.c - what storkd tells its launcher about the
 * node: the first failure among the ranks that returned, and nothing read
 * from a rank that has not (on the watchdog's path a stuck rank may still
 * be writing its result when the report is made).
 */
#include "config.h"
#include "daemon/node/node_result.h"
#include "lib/exit_codes.h"

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static struct train_rank_result results[3];
static struct rank_progress progress[3];
static struct node_rank_view ranks[3];

static void setup(void)
{
	memset(results, 0, sizeof results);
	for (int i = 0; i < 3; i++) {
		atomic_store(&progress[i].step, 0);
		atomic_store(&progress[i].done, 0);
		ranks[i] = (struct node_rank_view){ &results[i], &progress[i], 4 + i };
	}
}

/* Rank i returned after steps, with code, failing at t (0: did not fail). */
static void returned(int i, int64_t steps, int code, double t, int secondary, const char *msg)
{
	results[i] = (struct train_rank_result){ .exit_code = code, .last_step = steps,
						 .fail_time = t, .secondary = secondary };
	snprintf(results[i].message, sizeof results[i].message, "%s", msg);
	atomic_store(&progress[i].step, steps);
	atomic_store(&progress[i].done, 1);
}

static json_int_t int_of(json_t *v, const char *key)
{
	json_t *m = json_object_get(v, key);

	ck_assert_msg(json_is_integer(m), "%s is not an integer", key);
	return json_integer_value(m);
}

static const char *text_of(json_t *v, const char *key)
{
	json_t *m = json_object_get(v, key);

	ck_assert_msg(json_is_string(m), "%s is not a string", key);
	return json_string_value(m);
}

START_TEST(primary_failure_before_earlier_secondary)
{
	json_t *v;

	returned(0, 7, STORK_EXIT_RANK_FAILED, 100.0, 1, "rank 4: a peer failed");
	returned(1, 6, STORK_EXIT_DATA, 100.5, 0, "rank 5: shard unreadable");
	returned(2, 7, STORK_EXIT_RANK_FAILED, 100.2, 1, "rank 6: a peer failed");
	v = node_result_json(STORK_EXIT_DATA, ranks, 3, NULL);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(int_of(v, "failed_rank"), 5);
	ck_assert_int_eq(int_of(v, "failed_rank_code"), STORK_EXIT_DATA);
	ck_assert_int_eq(int_of(v, "failed_rank_step"), 6);
	ck_assert_int_eq(int_of(v, "last_step"), 6);
	ck_assert_str_eq(text_of(v, "message"), "rank 5: shard unreadable");
	json_decref(v);
}
END_TEST

/*
 * The watchdog's report: rank 1 is stuck at step 3 by its heartbeat and
 * its result holds whatever it was writing. None of that may appear: not
 * its failure, not its checkpoint, not its step.
 */
START_TEST(rank_not_done_counts_only_by_heartbeat)
{
	json_t *v;

	returned(0, 5, STORK_EXIT_PREEMPTED, 0, 0, "");
	snprintf(results[0].checkpoint, sizeof results[0].checkpoint, "/run/checkpoints/step-00000004");
	results[0].checkpoint_step = 4;
	returned(2, 5, STORK_EXIT_PREEMPTED, 0, 0, "");
	results[1] = (struct train_rank_result){ .exit_code = STORK_EXIT_INTERNAL, .last_step = 999,
						 .fail_time = 1.0, .checkpoint_step = 999 };
	snprintf(results[1].message, sizeof results[1].message, "half-written");
	snprintf(results[1].checkpoint, sizeof results[1].checkpoint, "/run/checkpoints/step-00000999");
	atomic_store(&progress[1].step, 3);
	v = node_result_json(STORK_EXIT_HANG, ranks, 3, NULL);
	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_null(json_object_get(v, "failed_rank"));
	ck_assert_int_eq(int_of(v, "last_step"), 3);
	ck_assert_int_eq(int_of(v, "checkpoint_step"), 4);
	ck_assert_str_eq(text_of(v, "checkpoint"), "/run/checkpoints/step-00000004");
	ck_assert_ptr_null(json_object_get(v, "message"));
	json_decref(v);

	/* the watchdog's verdict is the message */
	v = node_result_json(STORK_EXIT_HANG, ranks, 3, "no progress for 60 s on node1: rank 5 at step 3");
	ck_assert_str_eq(text_of(v, "message"), "no progress for 60 s on node1: rank 5 at step 3");
	json_decref(v);
}
END_TEST

/* Without a failure the message is that of a rank that returned the code. */
START_TEST(message_from_a_rank_with_the_code)
{
	json_t *v;

	results[0].exit_code = STORK_EXIT_PREEMPTED;
	snprintf(results[0].message, sizeof results[0].message, "not done yet");
	atomic_store(&progress[0].step, 2);
	returned(1, 2, STORK_EXIT_PREEMPTED, 0, 0, "stopped by SIGUSR1 at step 2");
	returned(2, 2, STORK_EXIT_PREEMPTED, 0, 0, "stopped by SIGUSR1 at step 2 (rank 6)");
	v = node_result_json(STORK_EXIT_PREEMPTED, ranks, 3, NULL);
	ck_assert_str_eq(text_of(v, "message"), "stopped by SIGUSR1 at step 2");
	ck_assert_int_eq(int_of(v, "last_step"), 2);
	json_decref(v);
}
END_TEST

START_TEST(no_ranks)
{
	json_t *v = node_result_json(STORK_EXIT_CONFIG, ranks, 0, "rendezvous failed");

	ck_assert_int_eq(int_of(v, "exit_code"), STORK_EXIT_CONFIG);
	ck_assert_int_eq(int_of(v, "last_step"), -1);
	ck_assert_str_eq(text_of(v, "message"), "rendezvous failed");
	json_decref(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_result");
	TCase *tc = tcase_create("report");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, primary_failure_before_earlier_secondary);
	tcase_add_test(tc, rank_not_done_counts_only_by_heartbeat);
	tcase_add_test(tc, message_from_a_rank_with_the_code);
	tcase_add_test(tc, no_ranks);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
