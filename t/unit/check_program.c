/*
 * t/unit/check_program.c - the pieces of `stork run -- PROGRAM` that need
 * no cluster: what a failed rank said (a Python traceback on stderr, or
 * PyTorch's error file), a rank's environment, the engine's keys a
 * program run refuses, metrics lines a program writes itself, and the
 * memory a rank's process group holds.
 */
#include "config.h"
#include "daemon/program/program_env.h"
#include "daemon/program/program_error.h"
#include "lib/env_number.h"
#include "lib/oom_watch.h"
#include "lib/run/metrics_file.h"
#include "lib/config/stork_config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char chained[] =
	"warming up\n"
	"Traceback (most recent call last):\n"
	"  File \"/x/data.py\", line 3, in load\n"
	"    open(p)\n"
	"FileNotFoundError: [Errno 2] No such file or directory: 'p'\n"
	"\n"
	"During handling of the above exception, another exception occurred:\n"
	"\n"
	"Traceback (most recent call last):\n"
	"  File \"/x/train.py\", line 40, in <module>\n"
	"    main()\n"
	"  File \"/x/train.py\", line 31, in main\n"
	"    raise RuntimeError(\"no data\")\n"
	"    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
	"RuntimeError: no data\n"
	"[W ProcessGroupGloo.cpp] a later line\n";

START_TEST(traceback_last_exception_and_frame)
{
	struct program_error e = { 0 };

	program_error_from_traceback(chained, &e);
	ck_assert_str_eq(e.message, "RuntimeError: no data");
	ck_assert_str_eq(e.frame, "File \"/x/train.py\", line 31, in main");
	ck_assert_str_eq(e.source, "stderr");
}
END_TEST

START_TEST(no_traceback_no_error)
{
	struct program_error e = { 0 };

	program_error_from_traceback("Segmentation fault\n", &e);
	ck_assert_str_eq(e.message, "");
	ck_assert_ptr_null(e.source);
}
END_TEST

/* Open MPI's report of a segfault: the signal, its code and address, the
 * frame below the handler's; a gloo complaint is a lost peer's, a plain
 * error is not. */
START_TEST(mpi_signal_report_and_lost_peers)
{
	static const char *const report[] = {
		"rank 1: writing through a null pointer",
		"[n2:123] *** Process received signal ***",
		"[n2:123] Signal: Segmentation fault (11)",
		"[n2:123] Signal code: Address not mapped (1)",
		"[n2:123] Failing at address: (nil)",
		"[n2:123] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7f]",
		"[n2:123] [ 1] ./mpi_check(+0x1a8d)[0x55]",
		"[n2:123] *** End of error message ***",
	};
	struct stderr_tail t = { 0 };
	struct program_error e = { 0 }, gloo = { 0 }, plain = { 0 };

	for (size_t i = 0; i < sizeof report / sizeof report[0]; i++)
		stderr_tail_add(&t, report[i]);
	program_error_from_tail(&t, &e);
	ck_assert_str_eq(e.message, "Segmentation fault (11), Address not mapped (1) at (nil)");
	ck_assert_str_eq(e.frame, "./mpi_check(+0x1a8d)[0x55]");
	ck_assert_int_eq(program_error_lost_peer(&e), 0);
	snprintf(gloo.message, sizeof gloo.message, "RuntimeError: [../gloo/transport/tcp/pair.cc:598] "
		 "Connection closed by peer [127.0.0.1]:51612");
	ck_assert_int_eq(program_error_lost_peer(&gloo), 1);
	snprintf(plain.message, sizeof plain.message, "RuntimeError: injected failure");
	ck_assert_int_eq(program_error_lost_peer(&plain), 0);
}
END_TEST

/* The tail keeps the newest whole lines when older ones no longer fit. */
START_TEST(tail_keeps_the_newest_lines)
{
	static struct stderr_tail t;
	struct program_error e = { 0 };
	char line[200];

	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof line, "noise line %d", i);
		stderr_tail_add(&t, line);
	}
	for (const char *p = chained, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
		stderr_tail_add(&t, line);
	}
	ck_assert_uint_lt(t.used, sizeof t.text);
	ck_assert_ptr_null(strstr(t.text, "noise line 0\n"));
	ck_assert_ptr_nonnull(strstr(t.text, "noise line 1999\n"));
	program_error_from_tail(&t, &e);
	ck_assert_str_eq(e.message, "RuntimeError: no data");
}
END_TEST

/* torch.distributed.elastic's @record writes this for an uncaught exception. */
START_TEST(error_file_of_record)
{
	char path[] = "/tmp/check_program.XXXXXX";
	int fd = mkstemp(path);
	struct program_error e = { 0 };
	const char *json =
		"{\"message\": {\"message\": \"ValueError: bad shape\", \"extraInfo\": "
		"{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"/t.py\\\", "
		"line 9, in step\\n    f()\\nValueError: bad shape\\n\", \"timestamp\": \"1\"}}}";

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	program_error_from_file(path, &e);
	unlink(path);
	ck_assert_str_eq(e.message, "ValueError: bad shape");
	ck_assert_str_eq(e.frame, "File \"/t.py\", line 9, in step");
	ck_assert_str_eq(e.source, "error_file");
	memset(&e, 0, sizeof e);
	program_error_from_file(path, &e); /* gone: nothing */
	ck_assert_ptr_null(e.source);

	/* a C++ error's message carries its own frames: its first line only */
	json = "{\"message\": {\"message\": \"RuntimeError: Connection closed by peer\\n\\nAt:\\n"
	       "  /x.py(9): f\"}}";
	fd = mkstemp(strcpy(path, "/tmp/check_program.XXXXXX"));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	program_error_from_file(path, &e);
	unlink(path);
	ck_assert_str_eq(e.message, "RuntimeError: Connection closed by peer");
}
END_TEST

static const char *get(char **env, const char *name)
{
	size_t len = strlen(name);
	const char *found = NULL;

	for (int i = 0; env[i]; i++)
		if (!strncmp(env[i], name, len) && env[i][len] == '=') {
			ck_assert_msg(!found, "%s twice", name);
			found = env[i] + len + 1;
		}
	return found;
}

START_TEST(rank_environment)
{
	char *base[] = { "PATH=/bin", "RANK=99", "PMIX_RANK=3", "OPENBLAS_NUM_THREADS=1",
			 "PYTHONUNBUFFERED=0", "KEEP=me", NULL };
	struct program_rank_place p = {
		.rank = 5, .local = 1, .local_ranks = 2, .world_size = 6, .node_rank = 2,
		.omp_threads = 3, .gpu = -1, .master_addr = "n1", .master_port = 29511,
		.attempt = 1, .max_restarts = 2, .requeues = 3, .run_id = "77",
		.run_dir = "/r", .signal_name = "USR2",
	};
	char **env;

	env_set_own("OPENBLAS_NUM_THREADS", "1"); /* storkd's own: not handed on */
	env = program_env_make(base, &p);
	ck_assert_ptr_nonnull(env);
	ck_assert_str_eq(get(env, "RANK"), "5");
	ck_assert_str_eq(get(env, "LOCAL_RANK"), "1");
	ck_assert_str_eq(get(env, "WORLD_SIZE"), "6");
	ck_assert_str_eq(get(env, "LOCAL_WORLD_SIZE"), "2");
	ck_assert_str_eq(get(env, "GROUP_RANK"), "2");
	ck_assert_str_eq(get(env, "NODE_RANK"), "2");
	ck_assert_str_eq(get(env, "ROLE_RANK"), "5");
	ck_assert_str_eq(get(env, "ROLE_WORLD_SIZE"), "6");
	ck_assert_str_eq(get(env, "MASTER_ADDR"), "n1");
	ck_assert_str_eq(get(env, "MASTER_PORT"), "29511");
	ck_assert_str_eq(get(env, "TORCHELASTIC_RESTART_COUNT"), "1");
	ck_assert_str_eq(get(env, "TORCHELASTIC_MAX_RESTARTS"), "2");
	ck_assert_str_eq(get(env, "TORCHELASTIC_RUN_ID"), "77");
	ck_assert_str_eq(get(env, "TORCHELASTIC_ERROR_FILE"), "/r/logs/rank-005.error.json");
	ck_assert_str_eq(get(env, "OMP_NUM_THREADS"), "3");
	ck_assert_ptr_null(get(env, "STORK_GPU"));
	ck_assert_str_eq(get(env, "STORK_CHECKPOINT_DIR"), "/r/checkpoints");
	ck_assert_str_eq(get(env, "STORK_RESTART_COUNT"), "4");
	ck_assert_str_eq(get(env, "STORK_METRICS_FILE"), "/r/logs/rank-005.metrics.jsonl");
	ck_assert_str_eq(get(env, "STORK_HEARTBEAT_FILE"), "/r/logs/rank-005.heartbeat");
	ck_assert_str_eq(get(env, "STORK_PREEMPT_SIGNAL"), "USR2");
	ck_assert_str_eq(get(env, "STORK_CHECKPOINTED_EXIT"), "10");
	ck_assert_str_eq(get(env, "PYTHONFAULTHANDLER"), "1");
	ck_assert_str_eq(get(env, "PYTHONUNBUFFERED"), "0"); /* the user's wins */
	ck_assert_str_eq(get(env, "KEEP"), "me");
	ck_assert_ptr_null(get(env, "PMIX_RANK"));
	ck_assert_ptr_null(get(env, "OPENBLAS_NUM_THREADS"));
	ck_assert_ptr_null(get(env, ENV_SET_OWN_LIST));
	program_env_free(env);
	unsetenv(ENV_SET_OWN_LIST);
}
END_TEST

START_TEST(engine_keys_named_with_their_origin)
{
	struct stork_config c;
	char err[512], keys[512];

	ck_assert_int_eq(config_load_string(&c, "run:\n  name: x\ntrain:\n  steps: 5\n", "t.yaml",
					    err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "parallel.tensor=2", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "parallel.local_ranks=2", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "program.tee=all", err, sizeof err), 0);
	ck_assert_int_eq(config_engine_keys_set(&c, keys, sizeof keys), 2);
	ck_assert_str_eq(keys, "train.steps (t.yaml:4:10), parallel.tensor (override "
			       "'parallel.tensor=2')");
	ck_assert_int_eq(c.program.tee, STORK_TEE_ALL);
	config_free(&c);
	config_init(&c);
	ck_assert_int_eq(config_engine_keys_set(&c, keys, sizeof keys), 0);
	ck_assert_uint_eq(c.program.command.n, 0);
	ck_assert_int_eq(config_set(&c, "program.signal=KILL", err, sizeof err), -1);
	config_free(&c);
}
END_TEST

static int count_step(const char *line, void *arg)
{
	*(int *)arg += metrics_line_is(line, "train_loss");
	return 0;
}

/* Python's json.dumps puts a blank after each colon. */
START_TEST(metrics_lines_with_blanks)
{
	char path[] = "/tmp/check_program.XXXXXX";
	int fd = mkstemp(path), n = 0;
	const char *text = "{\"step\": 7, \"metric\": \"train_loss\", \"value\": 1.5}\n"
			   "{\"step\":8,\"metric\":\"train_loss_ema\",\"value\":1}\n"
			   "{\"metric\" : \"lr\", \"step\" : 9}\n";

	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	metrics_file_lines(path, count_step, &n);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(metrics_file_last_step(path), 9);
	unlink(path);
	ck_assert_int_eq(metrics_file_last_step(path), -1);
}
END_TEST

/* What metrics_file_follow handed over: the lines, joined by '|'. */
static int join_line(char *line, size_t len, void *arg)
{
	char *seen = arg;

	ck_assert_uint_eq(strlen(line), len);
	strcat(seen, line);
	strcat(seen, "|");
	return strcmp(line, "stop") == 0;
}

/* Whole lines only, each once, as the file grows; a line past 64 KiB skipped; a device refused. */
START_TEST(metrics_file_followed_as_it_grows)
{
	char path[] = "/tmp/check_program.XXXXXX", seen[256] = "";
	int fd = mkstemp(path);
	long long at = 0;
	char *longline = malloc(70000);

	ck_assert_int_eq(write(fd, "a\nb\npart", 8), 8);
	ck_assert_int_eq(metrics_file_follow(path, &at, join_line, seen), 0);
	ck_assert_str_eq(seen, "a|b|");
	ck_assert_int_eq(at, 4);
	ck_assert_int_eq(write(fd, "ial\n", 4), 4);
	memset(longline, 'x', 70000);
	longline[69999] = '\n';
	ck_assert_int_eq(write(fd, longline, 70000), 70000);
	ck_assert_int_eq(write(fd, "c\nstop\nd\n", 9), 9);
	seen[0] = '\0';
	/* the callback's non-zero stops the reading after its line */
	ck_assert_int_eq(metrics_file_follow(path, &at, join_line, seen), 1);
	ck_assert_str_eq(seen, "partial|c|stop|");
	seen[0] = '\0';
	ck_assert_int_eq(metrics_file_follow(path, &at, join_line, seen), 0);
	ck_assert_str_eq(seen, "d|");
	close(fd);
	unlink(path);
	free(longline);
	at = 0;
	ck_assert_int_eq(metrics_file_follow("/dev/zero", &at, join_line, seen), -1);
	ck_assert_int_eq(metrics_file_follow(path, &at, join_line, seen), -1);
}
END_TEST

/* A rank's process group: its memory while it lives; none once it died and waits to be reaped. */
START_TEST(group_memory_of_a_live_and_a_dead_rank)
{
	pid_t pid = fork();
	double held = -1, cpu;
	siginfo_t si;
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		pause();
		_exit(0);
	}
	setpgid(pid, pid);
	for (int i = 0; i < 500 && held <= 0; i++) {
		held = oom_group_resident(pid, &cpu);
		usleep(10000);
	}
	ck_assert_msg(held > 0, "a live process group holds %.0f bytes", held);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* dead, not reaped */
	held = oom_group_resident(pid, &cpu);
	ck_assert_msg(held < 0, "a dead process not reaped yet holds %.0f bytes", held);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("program");
	TCase *tc = tcase_create("program");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, traceback_last_exception_and_frame);
	tcase_add_test(tc, no_traceback_no_error);
	tcase_add_test(tc, tail_keeps_the_newest_lines);
	tcase_add_test(tc, error_file_of_record);
	tcase_add_test(tc, rank_environment);
	tcase_add_test(tc, engine_keys_named_with_their_origin);
	tcase_add_test(tc, metrics_lines_with_blanks);
	tcase_add_test(tc, metrics_file_followed_as_it_grows);
	tcase_add_test(tc, group_memory_of_a_live_and_a_dead_rank);
	tcase_add_test(tc, mpi_signal_report_and_lost_peers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
