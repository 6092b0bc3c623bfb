/*
 * t/unit/check_exit_info.c - exit_info files between nodes: node 0 reads
 * what the other nodes' launchers wrote, and a file another node left
 * damaged (cut short, fields of the wrong type) is named in the summary,
 * never half used and never a crash. And the notice one node gives the
 * others of how an attempt ends: the first wins, whole.
 */
#include "config.h"
#include "lib/exit_codes.h"
#include "lib/run/end_notice.h"
#include "lib/run/exit_info.h"
#include "lib/run/membership.h"
#include "lib/formats/stork_json.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], err[1024];
static const struct exit_attempt first_attempt; /* requeue 0, attempt 0, no restarts */

static void make_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_exit_info.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Node n's record of attempt 0, written as its launcher does. */
static void write_node(int n, int code, const char *message)
{
	struct exit_info e;

	exit_info_init(&e, code, n);
	e.restart_count = 0;
	snprintf(e.message, sizeof e.message, "%s", message);
	ck_assert_msg(exit_info_write_node(dir, &e, err, sizeof err) == 0, "%s", err);
}

static void node_path(int n, char *path, size_t len)
{
	snprintf(path, len, "%s/exit_info.node-%03d.requeue-0.json", dir, n);
}

static void overwrite(int n, const char *text)
{
	char path[256];
	FILE *f;

	node_path(n, path, sizeof path);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(two_nodes_summarise_to_the_worse_reason)
{
	struct exit_info sum;
	json_t *v;
	char path[256];

	make_dir();
	write_node(0, STORK_EXIT_OK, "completed 20 steps");
	write_node(1, STORK_EXIT_CHECKPOINT_FAILED, "cannot write shard-00003.bin");
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_CHECKPOINT_FAILED);
	snprintf(path, sizeof path, "%s/exit_info.json", dir);
	v = sj_load_file(path, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_str_eq(json_string_value(json_object_get(v, "reason")), "checkpoint_failed");
	ck_assert_int_eq(sj_int(v, "exit_code", -1), STORK_EXIT_CHECKPOINT_FAILED);
	ck_assert_int_eq(sj_int(v, "nodes", -1), 2);
	ck_assert_str_eq(json_string_value(json_object_get(v, "message")),
			 "cannot write shard-00003.bin");
	json_decref(v);
	remove_dir();
}
END_TEST

/*
 * A rank killed for memory on node 1 while node 0's ranks failed in
 * consequence: the run is out_of_memory, and the cgroup, its limit and
 * what the rank held come through node 1's record into the summary.
 */
START_TEST(an_out_of_memory_node_sets_the_reason_with_its_figures)
{
	struct exit_info sum, e;
	const json_t *oom;
	json_t *v;
	char path[256];

	make_dir();
	exit_info_init(&e, STORK_EXIT_RANK_FAILED, 0);
	e.first_failure = (struct exit_failure){ .valid = 1, .rank = 0, .secondary = 1,
						 .time = 20, .last_step = -1 };
	snprintf(e.message, sizeof e.message, "rank 0 ended: a peer went away");
	ck_assert_msg(exit_info_write_node(dir, &e, err, sizeof err) == 0, "%s", err);
	exit_info_init(&e, STORK_EXIT_OUT_OF_MEMORY, 1);
	e.first_failure = (struct exit_failure){ .valid = 1, .rank = 3, .time = 10, .oom = 1,
						 .oom_limit = 104857600, .oom_held = 5e7,
						 .last_step = 7 };
	snprintf(e.first_failure.oom_cgroup, sizeof e.first_failure.oom_cgroup, "/sys/fs/cgroup/x");
	snprintf(e.message, sizeof e.message, "rank 3 on n2 was killed by the out-of-memory killer");
	ck_assert_msg(exit_info_write_node(dir, &e, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_OUT_OF_MEMORY);
	snprintf(path, sizeof path, "%s/exit_info.json", dir);
	v = sj_load_file(path, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_str_eq(json_string_value(json_object_get(v, "reason")), "out_of_memory");
	oom = json_object_get(json_object_get(v, "first_failure"), "out_of_memory");
	ck_assert_str_eq(json_string_value(json_object_get(oom, "cgroup")), "/sys/fs/cgroup/x");
	ck_assert_double_eq(json_number_value(json_object_get(oom, "limit_bytes")), 104857600);
	ck_assert_double_eq(json_number_value(json_object_get(oom, "held_bytes")), 5e7);
	json_decref(v);
	remove_dir();
}
END_TEST

/* scancel during a preemption's checkpoint: only rank 0, about to requeue,
 * learns of it; its node's cancellation is the run's reason. */
START_TEST(a_cancellation_outranks_a_requeue)
{
	struct exit_info sum;

	make_dir();
	write_node(0, STORK_EXIT_CANCELLED, "cancelled after step 40: checkpoint committed");
	write_node(1, STORK_EXIT_PREEMPTED, "stopped after step 40 (preempted)");
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_CANCELLED);
	ck_assert_str_eq(sum.reason, "cancelled");
	ck_assert_str_eq(sum.message, "cancelled after step 40: checkpoint committed");
	write_node(0, STORK_EXIT_PREEMPTED, "stopped after step 40 (preempted)");
	write_node(1, STORK_EXIT_CANCELLED, "cancelled after step 40: checkpoint committed");
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_CANCELLED);
	remove_dir();
}
END_TEST

START_TEST(a_node_that_failed_in_consequence_does_not_set_the_reason)
{
	struct exit_info a, b, sum;

	make_dir();
	/* Node 0: the cause, a failed stop checkpoint. */
	exit_info_init(&a, STORK_EXIT_CHECKPOINT_FAILED, 0);
	a.first_failure = (struct exit_failure){ .valid = 1, .rank = 0, .exit_code = 13,
						 .time = 100, .last_step = 8 };
	snprintf(a.message, sizeof a.message, "checkpoint step_00000008 failed");
	ck_assert_int_eq(exit_info_write_node(dir, &a, err, sizeof err), 0);
	/* Node 1: its ranks' collective broken by node 0's abort. */
	exit_info_init(&b, STORK_EXIT_RANK_FAILED, 1);
	b.first_failure = (struct exit_failure){ .valid = 1, .rank = 2, .exit_code = 20,
						 .time = 99, .last_step = 8, .secondary = 1 };
	snprintf(b.message, sizeof b.message, "a peer aborted");
	ck_assert_int_eq(exit_info_write_node(dir, &b, err, sizeof err), 0);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_CHECKPOINT_FAILED);
	ck_assert_int_eq(sum.first_failure.rank, 0);
	ck_assert_str_eq(sum.message, "checkpoint step_00000008 failed");
	remove_dir();
}
END_TEST

START_TEST(a_truncated_node_file_is_named)
{
	struct exit_info sum;
	char path[256];

	make_dir();
	write_node(0, STORK_EXIT_OK, "completed 20 steps");
	overwrite(1, "{\n  \"reason\": \"compl");
	node_path(1, path, sizeof path);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_RANK_FAILED);
	ck_assert_msg(strstr(sum.message, "node(s) 1 wrote no readable exit_info file"), "%s",
		      sum.message);
	/* The file, with the line of the fault. */
	ck_assert_msg(strstr(sum.message, path) && strstr(sum.message, ".json:2:"), "%s",
		      sum.message);
	remove_dir();
}
END_TEST

START_TEST(a_node_file_of_wrong_types_is_named)
{
	struct exit_info sum;
	char path[256];

	make_dir();
	write_node(0, STORK_EXIT_OK, "completed 20 steps");
	overwrite(1, "{\"reason\": \"completed\", \"exit_code\": \"0\"}");
	node_path(1, path, sizeof path);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_RANK_FAILED);
	ck_assert_msg(strstr(sum.message, path) && strstr(sum.message, "not an exit_info record"),
		      "%s", sum.message);
	/* An array where an object belongs. */
	overwrite(1, "[1, 2, 3]");
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_RANK_FAILED);
	ck_assert_msg(strstr(sum.message, "not an exit_info record"), "%s", sum.message);
	remove_dir();
}
END_TEST

START_TEST(a_message_that_is_not_utf8_still_makes_a_valid_file)
{
	struct exit_info sum;
	char path[256];
	json_t *v;

	make_dir();
	write_node(0, STORK_EXIT_RANK_FAILED, "cannot open /data/m\xe9t\xe9o.bin");
	ck_assert_int_eq(exit_info_summarise(dir, 1, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_RANK_FAILED);
	snprintf(path, sizeof path, "%s/exit_info.json", dir);
	v = sj_load_file(path, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_str_eq(json_string_value(json_object_get(v, "message")),
			 "cannot open /data/m\xef\xbf\xbdt\xef\xbf\xbdo.bin");
	json_decref(v);
	remove_dir();
}
END_TEST

/* Two nodes post at once, many times: exactly one wins each time, and the
 * other reads the winner's notice whole. */
START_TEST(the_first_end_notice_wins_and_the_second_reads_it)
{
	struct end_notice hang = { .kind = END_NOTICE_HANG, .at = 1234.5 }, first, got;
	struct end_notice failed = { .kind = END_NOTICE_FAILED, .at = 1 };
	char logs[128], path[256];

	make_dir();
	snprintf(logs, sizeof logs, "%s/logs", dir);
	ck_assert_int_eq(mkdir(logs, 0700), 0);
	ck_assert_int_eq(end_notice_path(path, sizeof path, dir, "77", 2, 1), 0);
	ck_assert_str_eq(path + strlen(dir), "/logs/.end.77.2.1");
	ck_assert_int_eq(end_notice_read(path, &got), 0);
	snprintf(failed.message, sizeof failed.message, "rank 3 on n2 exited with 1: RuntimeError: boom");
	snprintf(hang.message, sizeof hang.message, "no heartbeat");
	for (int round = 0; round < 50; round++) {
		pid_t child = fork();
		int st, mine;

		ck_assert_int_ge(child, 0);
		if (child == 0) {
			int rc = end_notice_post(path, &hang, &first);

			_exit(rc == 1 ? 10 : rc == 0 ? 11 : 12);
		}
		mine = end_notice_post(path, &failed, &first);
		ck_assert_int_eq(waitpid(child, &st, 0), child);
		ck_assert(WIFEXITED(st));
		/* exactly one of the two is first */
		ck_assert_msg((mine == 1) != (WEXITSTATUS(st) == 10), "round %d: %d and %d", round,
			      mine, WEXITSTATUS(st));
		ck_assert_int_ne(WEXITSTATUS(st), 12);
		ck_assert_int_eq(end_notice_read(path, &got), 1);
		if (mine == 0) {
			ck_assert_int_eq(first.kind, END_NOTICE_HANG);
			ck_assert_str_eq(first.message, "no heartbeat");
			ck_assert(first.at == 1234.5);
		} else {
			ck_assert_int_eq(got.kind, END_NOTICE_FAILED);
			ck_assert_str_eq(got.message, failed.message);
		}
		end_notice_remove_all(dir);
		ck_assert_int_eq(end_notice_read(path, &got), 0);
	}
	/* nothing of the posts is left behind */
	ck_assert_int_eq(rmdir(logs), 0);
	remove_dir();
}
END_TEST

/* restart.in_place: node 1 died and node 0 went on to the end without it. */
START_TEST(a_node_that_left_does_not_end_the_run)
{
	struct exit_info a, b, sum;
	json_t *left = json_pack("[{s:i, s:s, s:i, s:f, s:s}]", "node", 1, "host", "n2",
				 "after_step", 19, "seconds", 0.25, "why", "storkd died of SIGKILL");
	json_t *v;
	char path[256];

	make_dir();
	exit_info_init(&a, STORK_EXIT_OK, 0);
	snprintf(a.message, sizeof a.message, "completed 50 steps");
	exit_info_set_left(&a, left);
	ck_assert_int_eq(exit_info_write_node(dir, &a, err, sizeof err), 0);
	exit_info_init(&b, STORK_EXIT_RANK_FAILED, 1);
	b.first_failure = (struct exit_failure){ .valid = 1, .rank = -1, .exit_code = -1,
						 .signal = "SIGKILL", .time = 99, .last_step = 19 };
	snprintf(b.message, sizeof b.message, "storkd (pid 7) on n2 died of SIGKILL");
	ck_assert_int_eq(exit_info_write_node(dir, &b, err, sizeof err), 0);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_OK);
	ck_assert_int_eq(sum.first_failure.valid, 0);
	snprintf(path, sizeof path, "%s/exit_info.json", dir);
	v = sj_load_file(path, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_str_eq(json_string_value(json_object_get(v, "reason")), "completed");
	ck_assert_int_eq(json_array_size(json_object_get(v, "nodes_left")), 1);
	ck_assert_int_eq(sj_int(json_array_get(json_object_get(v, "nodes_left"), 0), "after_step", -1),
			 19);
	json_decref(v);
	/* its record may be gone with its node: not missing, since it left */
	node_path(1, path, sizeof path);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(exit_info_summarise(dir, 2, &first_attempt, 0, &sum, err, sizeof err),
			 STORK_EXIT_OK);
	json_decref(left);
	remove_dir();
}
END_TEST

/* restart.rejoin: the place the lead hands the launcher it starts again (node 0's too) */
START_TEST(a_rejoin_reads_its_place_and_refuses_a_wrong_one)
{
	static const char *const wrong[] = { "1 2 0", "-1 2 0 1", "2 2 0 1", "1 2 -1 0",
					     "1 2 0 1 x", "one two" };
	struct membership_rejoin r;
	char why[256];

	unsetenv(MEMBERSHIP_REJOIN_ENV);
	ck_assert_int_eq(membership_rejoin_from_env(&r, why, sizeof why), 0);
	setenv(MEMBERSHIP_REJOIN_ENV, "1 3 2 5", 1);
	ck_assert_int_eq(membership_rejoin_from_env(&r, why, sizeof why), 1);
	ck_assert_int_eq(r.node, 1);
	ck_assert_int_eq(r.nnodes, 3);
	ck_assert_int_eq(r.attempt, 2);
	ck_assert_int_eq(r.epoch, 5);
	setenv(MEMBERSHIP_REJOIN_ENV, "0 2 0 1", 1);
	ck_assert_int_eq(membership_rejoin_from_env(&r, why, sizeof why), 1);
	ck_assert_int_eq(r.node, 0);
	for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
		setenv(MEMBERSHIP_REJOIN_ENV, wrong[i], 1);
		ck_assert_msg(membership_rejoin_from_env(&r, why, sizeof why) == -1, "%s", wrong[i]);
		ck_assert_msg(strstr(why, wrong[i]) && strstr(why, "NODE NODES ATTEMPT EPOCH"), "%s",
			      why);
	}
	unsetenv(MEMBERSHIP_REJOIN_ENV);
}
END_TEST

static Suite *exit_info_suite(void)
{
	Suite *s = suite_create("exit_info");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, two_nodes_summarise_to_the_worse_reason);
	tcase_add_test(tc, a_cancellation_outranks_a_requeue);
	tcase_add_test(tc, an_out_of_memory_node_sets_the_reason_with_its_figures);
	tcase_add_test(tc, a_node_that_failed_in_consequence_does_not_set_the_reason);
	tcase_add_test(tc, a_node_that_left_does_not_end_the_run);
	tcase_add_test(tc, a_truncated_node_file_is_named);
	tcase_add_test(tc, a_node_file_of_wrong_types_is_named);
	tcase_add_test(tc, a_message_that_is_not_utf8_still_makes_a_valid_file);
	tcase_add_test(tc, the_first_end_notice_wins_and_the_second_reads_it);
	tcase_add_test(tc, a_rejoin_reads_its_place_and_refuses_a_wrong_one);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(exit_info_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
