/*
 * t/unit/check_rendezvous.c - the promises of lib/rendezvous over TCP on
 * 127.0.0.1: every launcher learns every launcher's blob, whatever the
 * count (1, 2, 3, 5) and the blob sizes (0 bytes to 1 MiB); a launcher that
 * never arrives makes the others fail within the timeout with a message
 * naming it (and its host, from Slurm's task layout); strangers are refused
 * without disturbing the exchange; Slurm's task layout names the right host;
 * the parameters come from a Slurm task's environment.
 *
 * Launchers are threads of the test process, each with its own rdv_exchange
 * call. Each test takes a free port from the kernel (bind to port 0, close).
 */
#include "config.h"
#include "lib/bind.h"
#include "lib/rendezvous.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LAUNCHERS 8
#define MIB (1u << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* Blob sizes by index: empty, tiny, 1 MiB, odd, one page... */
static size_t blob_size(int index)
{
	static const size_t sizes[] = { 0, 1, MIB, 4093, 4096, 77, 0, 12 };
	return sizes[index % 8];
}

/* Byte k of launcher i's blob: differs between launchers and positions. */
static unsigned char blob_byte(int index, size_t k)
{
	return (unsigned char)(index * 37 + k * 11 + (k >> 8));
}

static unsigned char *make_blob(int index)
{
	size_t n = blob_size(index);
	unsigned char *b = malloc(n ? n : 1);

	for (size_t k = 0; k < n; k++)
		b[k] = blob_byte(index, k);
	return b;
}

struct launcher {
	pthread_t thread;
	struct rdv_params p;
	struct rdv_result r;
	int rc;
	char err[4096];
	double seconds;
};

static void params(struct rdv_params *p, int index, int count, unsigned port, double timeout)
{
	memset(p, 0, sizeof *p);
	p->index = index;
	p->count = count;
	p->method = RDV_TCP;
	snprintf(p->addr, sizeof p->addr, "127.0.0.1");
	p->port = port;
	p->timeout = timeout;
	p->job_id = 4242;
	p->step_id = 7;
}

static void *run_launcher(void *arg)
{
	struct launcher *l = arg;
	unsigned char *blob = make_blob(l->p.index);
	double t0 = now();

	l->rc = rdv_exchange(&l->p, blob, blob_size(l->p.index), &l->r, l->err, sizeof l->err);
	l->seconds = now() - t0;
	free(blob);
	return NULL;
}

static void start(struct launcher *l)
{
	ck_assert_int_eq(pthread_create(&l->thread, NULL, run_launcher, l), 0);
}

static void finish(struct launcher *l)
{
	ck_assert_int_eq(pthread_join(l->thread, NULL), 0);
}

/* Every byte of every peer's blob is the one its launcher made. */
static void assert_full_table(const struct launcher *l, int count)
{
	ck_assert_msg(l->rc == 0, "launcher %d failed: %s", l->p.index, l->err);
	ck_assert_int_eq(l->r.n, count);
	for (int i = 0; i < count; i++) {
		const struct rdv_peer *peer = &l->r.peers[i];
		ck_assert_int_eq(peer->index, i);
		ck_assert_uint_eq(peer->len, blob_size(i));
		ck_assert_ptr_nonnull(peer->blob);
		for (size_t k = 0; k < peer->len; k++)
			if (((unsigned char *)peer->blob)[k] != blob_byte(i, k))
				ck_abort_msg("launcher %d: byte %zu of launcher %d's blob is wrong",
					     l->p.index, k, i);
	}
}

/* After a stranger was turned away, launcher 1 arrives: both must still
 * get the full table, as if the stranger had never come. */
static void second_launcher_completes_the_pair(struct launcher l[2], unsigned port)
{
	params(&l[1].p, 1, 2, port, 10);
	start(&l[1]);
	finish(&l[0]);
	finish(&l[1]);
	for (int i = 0; i < 2; i++) {
		assert_full_table(&l[i], 2);
		rdv_result_free(&l[i].r);
	}
}

static const int counts[] = { 1, 2, 3, 5 };

START_TEST(every_launcher_learns_every_blob)
{
	int count = counts[_i];
	unsigned port = free_port();
	struct launcher l[MAX_LAUNCHERS];

	/* Start the others before launcher 0 too: they must retry until it listens. */
	for (int i = count - 1; i >= 0; i--) {
		params(&l[i].p, i, count, port, 20);
		start(&l[i]);
		if (i == count - 1)
			usleep(50000);
	}
	for (int i = 0; i < count; i++)
		finish(&l[i]);
	for (int i = 0; i < count; i++) {
		assert_full_table(&l[i], count);
		ck_assert_str_eq(l[i].r.method, count == 1 ? "local" : "tcp");
		rdv_result_free(&l[i].r);
	}
}
END_TEST

START_TEST(missing_launcher_is_named_within_the_timeout)
{
	unsigned port = free_port();
	struct launcher l[2];

	/* Launcher 2 of 3 never comes; the layout puts it on n3. */
	for (int i = 0; i < 2; i++) {
		params(&l[i].p, i, 3, port, 2);
		snprintf(l[i].p.nodelist, sizeof l[i].p.nodelist, "n[1-3]");
		snprintf(l[i].p.tasks_per_node, sizeof l[i].p.tasks_per_node, "1(x3)");
		start(&l[i]);
	}
	for (int i = 0; i < 2; i++)
		finish(&l[i]);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(l[i].rc, -1);
		ck_assert_msg(strstr(l[i].err, "1 of 3 launchers did not arrive within 2 s: launcher 2 (n3)"),
			      "launcher %d: %s", i, l[i].err);
		ck_assert_msg(l[i].seconds >= 1.9 && l[i].seconds < 3.0, "launcher %d gave up after %.2f s",
			      i, l[i].seconds);
	}
	/* Launcher 1 learned it from launcher 0, and says so. */
	ck_assert_ptr_nonnull(strstr(l[1].err, "launcher 0 on 127.0.0.1"));
}
END_TEST

START_TEST(absent_launcher_0_is_reported_with_its_address)
{
	unsigned port = free_port();
	struct launcher l;
	char want[128];

	params(&l.p, 1, 2, port, 1);
	start(&l);
	finish(&l);
	ck_assert_int_eq(l.rc, -1);
	snprintf(want, sizeof want, "launcher 0 on 127.0.0.1:%u never answered within 1 s", port);
	ck_assert_msg(strstr(l.err, want), "%s", l.err);
	ck_assert_msg(l.seconds >= 0.9 && l.seconds < 2.0, "gave up after %.2f s", l.seconds);
}
END_TEST

/* Connect to 127.0.0.1:port, retrying for up to 5 s while nobody listens. */
static int connect_retry(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	for (int tries = 0; tries < 500; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	ck_abort_msg("nobody listens on port %u", port);
	return -1;
}

static void put32(unsigned char *b, uint32_t v)
{
	v = htonl(v);
	memcpy(b, &v, 4);
}

/* Everything the server sends until it closes, at most len bytes; -1 on timeout. */
static ssize_t read_until_close(int fd, unsigned char *buf, size_t len)
{
	struct timeval tv = { .tv_sec = 5 };
	size_t have = 0;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	for (;;) {
		ssize_t n = recv(fd, buf + have, len - have, 0);
		if (n == 0)
			return (ssize_t)have;
		if (n < 0)
			return -1;
		have += (size_t)n;
		if (have == len)
			return (ssize_t)have;
	}
}

/* A hello of another program (bad magic) or of another job (good magic). */
static void send_stranger_hello(int fd, uint32_t magic, uint32_t job)
{
	unsigned char h[32] = { 0 };

	put32(h, magic);
	put32(h + 4, 1);
	put32(h + 8, job);
	put32(h + 12, 7);
	put32(h + 16, 2);
	put32(h + 20, 1);
	ck_assert_int_eq(send(fd, h, sizeof h, 0), (ssize_t)sizeof h);
}

START_TEST(stranger_with_wrong_magic_is_closed_without_reply)
{
	unsigned port = free_port();
	struct launcher l[2];
	unsigned char buf[256];

	params(&l[0].p, 0, 2, port, 10);
	start(&l[0]);
	int fd = connect_retry(port);
	send_stranger_hello(fd, 0x47455420u /* "GET " */, 4242);
	ck_assert_int_eq(read_until_close(fd, buf, sizeof buf), 0);
	close(fd);
	second_launcher_completes_the_pair(l, port);
}
END_TEST

START_TEST(launcher_of_another_job_is_refused_with_a_reason)
{
	unsigned port = free_port();
	struct launcher l[2];
	unsigned char buf[1024];

	params(&l[0].p, 0, 2, port, 10);
	start(&l[0]);
	int fd = connect_retry(port);
	send_stranger_hello(fd, 0x53524456u /* "SRDV" */, 999);
	ssize_t n = read_until_close(fd, buf, sizeof buf - 1);
	close(fd);
	ck_assert_int_gt(n, 24);
	buf[n] = '\0';
	ck_assert_uint_eq(ntohl(*(uint32_t *)(buf + 8)), 1); /* status: error */
	ck_assert_msg(strstr((char *)buf + 24, "job 4242 step 7, not of job 999 step 7"), "%s", buf + 24);
	second_launcher_completes_the_pair(l, port);
}
END_TEST

START_TEST(a_busy_port_fails_launcher_0_at_once)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t sl = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct launcher l;

	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
	params(&l.p, 0, 2, ntohs(a.sin_port), 10);
	start(&l);
	finish(&l);
	close(fd);
	ck_assert_int_eq(l.rc, -1);
	ck_assert_msg(strstr(l.err, "cannot listen on port") && strstr(l.err, "in use"), "%s", l.err);
	ck_assert_msg(l.seconds < 1.0, "took %.2f s", l.seconds);
}
END_TEST

static void assert_host(const char *nodes, const char *tpn, const char *dist, int index,
			const char *want)
{
	char host[64] = "";
	int rc = rdv_task_host(nodes, tpn, dist, index, host, sizeof host);

	if (!want) {
		ck_assert_msg(rc == -1, "%s %s %s task %d: got %s", nodes, tpn, dist, index, host);
		return;
	}
	ck_assert_msg(rc == 0 && strcmp(host, want) == 0, "%s %s %s task %d: got rc %d host '%s', want %s",
		      nodes, tpn, dist, index, rc, host, want);
}

START_TEST(task_layout_names_the_host_of_a_launcher)
{
	/* block: node after node. */
	assert_host("n[1-2]", "2(x2)", "block", 1, "n1");
	assert_host("n[1-2]", "2(x2)", "", 2, "n2");
	assert_host("n[1-2]", "2(x2)", "block:cyclic", 3, "n2");
	assert_host("a,b,c", "1,3,1", "block", 3, "b");
	assert_host("a,b,c", "1,3,1", "block", 4, "c");
	/* cyclic: one per node per round, full nodes skipped. */
	assert_host("n[1-2]", "2(x2)", "cyclic", 1, "n2");
	assert_host("n[1-2]", "2(x2)", "cyclic", 2, "n1");
	assert_host("n[1-2]", "3,1", "cyclic", 3, "n1");
	assert_host("a,b,c", "2,1,2", "cyclic:block", 4, "c");
	/* What the layout does not tell. */
	assert_host("n[1-2]", "2(x2)", "block", 4, NULL);
	assert_host("n[1-2]", "2(x2)", "plane=2", 0, NULL);
	assert_host("n[1-2]", "2(x", "block", 0, NULL);
	assert_host("", "2", "block", 0, NULL);
}
END_TEST

static void clear_env(void)
{
	const char *vars[] = { "SLURM_STEP_ID", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
			       "SLURM_NTASKS", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
			       "SLURM_STEP_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "MASTER_ADDR",
			       "MASTER_PORT" };
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
}

static void slurm_task_env(void)
{
	clear_env();
	setenv("SLURM_STEP_ID", "3", 1);
	setenv("SLURM_JOB_ID", "1234", 1);
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_STEP_NUM_TASKS", "4", 1);
	setenv("SLURM_STEP_NODELIST", "n[7-8]", 1);
	setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
}

START_TEST(params_come_from_the_slurm_task_environment)
{
	struct rdv_params p;
	char err[512];

	slurm_task_env();
	ck_assert_int_eq(rdv_params_from_env(&p, RDV_AUTO, 60, err, sizeof err), 0);
	ck_assert_int_eq(p.index, 2);
	ck_assert_int_eq(p.count, 4);
	ck_assert_uint_eq(p.job_id, 1234);
	ck_assert_uint_eq(p.step_id, 3);
	ck_assert_str_eq(p.addr, "n7");
	/* The plugin's MASTER_PORT for this job and step, with its defaults. */
	ck_assert_uint_eq(p.port, bind_master_port(1234, 3, 29500, 1000));
	ck_assert_uint_ge(p.port, 29500);
	ck_assert_uint_lt(p.port, 30500);
	ck_assert_str_eq(p.tasks_per_node, "2(x2)");
	/* The plugin's MASTER_ADDR/MASTER_PORT win. */
	setenv("MASTER_ADDR", "head", 1);
	setenv("MASTER_PORT", "31000", 1);
	ck_assert_int_eq(rdv_params_from_env(&p, RDV_TCP, 60, err, sizeof err), 0);
	ck_assert_str_eq(p.addr, "head");
	ck_assert_uint_eq(p.port, 31000);
	ck_assert_int_eq(p.method, RDV_TCP);
}
END_TEST

START_TEST(malformed_slurm_variable_is_named)
{
	struct rdv_params p;
	char err[512];

	slurm_task_env();
	setenv("SLURM_PROCID", "two", 1);
	ck_assert_int_eq(rdv_params_from_env(&p, RDV_AUTO, 60, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "rendezvous: SLURM_PROCID=two: not an integer from 0 to"), "%s", err);
	slurm_task_env();
	setenv("SLURM_PROCID", "4", 1);
	ck_assert_int_eq(rdv_params_from_env(&p, RDV_AUTO, 60, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "SLURM_PROCID=4"), "%s", err);
}
END_TEST

START_TEST(outside_slurm_a_launcher_is_alone)
{
	struct rdv_params p;
	struct rdv_result r;
	char err[512];
	unsigned char blob[3] = { 1, 2, 3 };

	clear_env();
	ck_assert_int_eq(rdv_params_from_env(&p, RDV_AUTO, 60, err, sizeof err), 0);
	ck_assert_int_eq(p.index, 0);
	ck_assert_int_eq(p.count, 1);
	ck_assert_int_eq(rdv_exchange(&p, blob, 3, &r, err, sizeof err), 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_str_eq(r.method, "local");
	ck_assert_mem_eq(r.peers[0].blob, blob, 3);
	rdv_result_free(&r);
}
END_TEST

START_TEST(method_names_parse)
{
	enum rdv_method m;

	ck_assert_int_eq(rdv_method_parse("auto", &m), 0);
	ck_assert_int_eq(m, RDV_AUTO);
	ck_assert_int_eq(rdv_method_parse("pmix", &m), 0);
	ck_assert_int_eq(m, RDV_PMIX);
	ck_assert_int_eq(rdv_method_parse("tcp", &m), 0);
	ck_assert_int_eq(m, RDV_TCP);
	ck_assert_int_eq(rdv_method_parse("mpi", &m), -1);
}
END_TEST

static Suite *rendezvous_suite(void)
{
	Suite *s = suite_create("rendezvous");
	TCase *tc = tcase_create("tcp");

	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, every_launcher_learns_every_blob, 0, sizeof counts / sizeof *counts);
	tcase_add_test(tc, missing_launcher_is_named_within_the_timeout);
	tcase_add_test(tc, absent_launcher_0_is_reported_with_its_address);
	tcase_add_test(tc, stranger_with_wrong_magic_is_closed_without_reply);
	tcase_add_test(tc, launcher_of_another_job_is_refused_with_a_reason);
	tcase_add_test(tc, a_busy_port_fails_launcher_0_at_once);
	suite_add_tcase(s, tc);
	tc = tcase_create("environment");
	tcase_add_test(tc, task_layout_names_the_host_of_a_launcher);
	tcase_add_test(tc, params_come_from_the_slurm_task_environment);
	tcase_add_test(tc, malformed_slurm_variable_is_named);
	tcase_add_test(tc, outside_slurm_a_launcher_is_alone);
	tcase_add_test(tc, method_names_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rendezvous_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
