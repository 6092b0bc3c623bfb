/*
 * t/unit/check_slurm_job.c - the requeue's fallback to scontrol, with a
 * fake scontrol (t/unit/fake/scontrol) first on PATH and a slurm.conf whose
 * controller does not answer, so that libslurm's own requeue fails at once:
 * the child is started with the stop signals blocked (Slurm signals every
 * process of the step; a child that died of USR1 would lose the requeue),
 * inherits no descriptor of storkd's besides stdin and the pipe it writes
 * to (not even those a library opened without close-on-exec: the test
 * opens a file, a socket and a pipe so), and what it prints comes back in
 * the message.
 */
#include "config.h"
#include "lib/slurm/slurm_job.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKE_SCONTROL_DIR
#error "FAKE_SCONTROL_DIR: where t/unit/fake/scontrol is built"
#endif

START_TEST(requeue_falls_back_to_a_clean_scontrol)
{
	char dir[] = "/tmp/check_slurm_job.XXXXXX", conf[256], report[256], path[8192];
	char err[1024] = "", line[256], out[256] = "", errout[256] = "", leaked[1024] = "";
	unsigned long long blocked = 0;
	int saw_id = 0, file, sock, spare[2];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof conf, "%s/slurm.conf", dir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	/* a controller on a port nobody listens on: libslurm fails at once */
	fputs("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=17999\n"
	      "AuthType=auth/none\nCredType=cred/none\nMessageTimeout=2\n", f);
	fclose(f);
	snprintf(report, sizeof report, "%s/report", dir);
	snprintf(path, sizeof path, "%s:%s", FAKE_SCONTROL_DIR, getenv("PATH"));
	setenv("SLURM_CONF", conf, 1);
	setenv("PATH", path, 1);
	setenv("FAKE_SCONTROL_REPORT", report, 1);
	/* descriptors of ours that are not close-on-exec */
	file = open(conf, O_RDONLY);
	sock = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(file, 0);
	ck_assert_int_ge(sock, 0);
	ck_assert_int_eq(pipe(spare), 0);

	ck_assert_msg(slurm_job_requeue(4242, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(strstr(err, "scontrol: Job 4242 requeued (fake)"), "%s", err);
	f = fopen(report, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f)) {
		sscanf(line, "sigblk %llx", &blocked);
		sscanf(line, "stdout 1 %255s", out);
		sscanf(line, "stderr 2 %255s", errout);
		if (!strncmp(line, "fd ", 3) && strlen(leaked) + strlen(line) < sizeof leaked)
			strcat(leaked, line);
		saw_id |= !strcmp(line, "arg 4242\n");
	}
	fclose(f);
	close(file);
	close(sock);
	close(spare[0]);
	close(spare[1]);
	ck_assert(saw_id);
	for (int sig = 1; sig < 32; sig++)
		if (sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGTERM || sig == SIGINT ||
		    sig == SIGHUP)
			ck_assert_msg(blocked & (1ULL << (sig - 1)), "signal %d not blocked (%llx)", sig,
				      blocked);
	/* stdout and stderr: one pipe; nothing else of ours reached the child */
	ck_assert_msg(!strncmp(out, "pipe:", 5) && !strcmp(out, errout), "stdout %s, stderr %s",
		      out, errout);
	ck_assert_msg(!leaked[0], "the child inherited:\n%s", leaked);
	unlink(report);
	unlink(conf);
	rmdir(dir);
}
END_TEST

/*
 * A process that carries SLURM_JOB_ID with no slurm.conf to read (a copied
 * environment, a test): libslurm's parser would retry for 60 s; the calls
 * fail at once naming the file instead.
 */
START_TEST(no_slurm_conf_fails_at_once_naming_it)
{
	struct slurm_job job;
	char err[512] = "";
	int signo, lead;
	time_t start = time(NULL);

	setenv("SLURM_CONF", "/nonexistent/stork-test/slurm.conf", 1);
	ck_assert_int_eq(slurm_job_query(4242, &job, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "/nonexistent/stork-test/slurm.conf: No such file or directory"),
		      "%s", err);
	err[0] = '\0';
	ck_assert_int_eq(slurm_job_requeue(4242, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "no Slurm configuration"), "%s", err);
	ck_assert_int_eq(slurm_job_exclude_nodes(4242, "n1", err, sizeof err), -1);
	ck_assert_int_eq(slurm_job_script_min_nodes(4242), 0);
	ck_assert_int_eq(slurm_job_set_comment(4242, "x"), -1);
	ck_assert_int_eq(slurm_job_signal(4242, &signo, &lead), -1);
	ck_assert_int_eq(slurm_kill_wait(), -1);
	ck_assert_msg(time(NULL) - start < 10, "took %ld s", (long)(time(NULL) - start));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("slurm_job");
	TCase *tc = tcase_create("requeue");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, requeue_falls_back_to_a_clean_scontrol);
	tcase_add_test(tc, no_slurm_conf_fails_at_once_naming_it);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
