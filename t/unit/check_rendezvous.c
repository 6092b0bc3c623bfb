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
 * The credentials come from a munged of the test's own (a key, a socket and
 * a slurm.conf naming it in a temporary directory), as on a cluster; a
 * hello or a reply without the job user's credential, or with one for
 * another message, is refused, and the exchange goes on without it.
 */
#include "config.h"
#include "lib/io/atomic_file.h"
#include "lib/bind/bind.h"
#include "lib/rendezvous/rendezvous.h"
#include "lib/rendezvous/rendezvous_auth.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* A hello of another program (bad magic) or of another job (good magic),
 * with cred (may be NULL) as its credential and a 3-byte blob. */
static size_t hello_bytes(unsigned char h[36 + 4096 + 3], uint32_t magic, uint32_t job,
			  uint32_t index, const char *cred)
{
	size_t clen = cred ? strlen(cred) : 0;

	memset(h, 0, 36 + 4096 + 3);

	put32(h, magic);
	put32(h + 4, 2);
	put32(h + 8, job);
	put32(h + 12, 7);
	put32(h + 16, 2);
	put32(h + 20, index);
	put32(h + 28, 3); /* blob length, low word */
	put32(h + 32, (uint32_t)clen);
	if (clen) /* memcpy from NULL is undefined even for 0 bytes (UBSan says so) */
		memcpy(h + 36, cred, clen);
	memcpy(h + 36 + clen, "abc", 3);
	return 36 + clen + 3;
}

static void send_hello_with(int fd, uint32_t magic, uint32_t job, uint32_t index, const char *cred)
{
	unsigned char h[36 + 4096 + 3];
	size_t n = hello_bytes(h, magic, job, index, cred);

	ck_assert_int_eq(send(fd, h, n, 0), (ssize_t)n);
}

static void send_stranger_hello(int fd, uint32_t magic, uint32_t job)
{
	send_hello_with(fd, magic, job, 1, NULL);
}

/*
 * Launcher 0's log (its stderr) while a test runs: logging_to_file() sends
 * it to a file, logged() reads it back (static buffer) and restores it.
 */
static char log_path[64];
static int saved_stderr = -1;

static void logging_to_file(void)
{
	int fd;

	snprintf(log_path, sizeof log_path, "/tmp/check_rendezvous.log.XXXXXX");
	ck_assert_int_ge(fd = mkstemp(log_path), 0);
	fflush(stderr);
	saved_stderr = dup(2);
	ck_assert_int_ge(dup2(fd, 2), 0);
	close(fd);
}

static const char *logged(void)
{
	static char text[16384];
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	ck_assert_ptr_nonnull(f = fopen(log_path, "r"));
	n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(log_path);
	return text;
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

/* Closed without a word (nothing signed for a stranger); launcher 0's log says why. */
START_TEST(launcher_of_another_job_is_refused_with_a_reason)
{
	unsigned port = free_port();
	struct launcher l[2];
	unsigned char buf[1024];
	const char *text;

	logging_to_file();
	params(&l[0].p, 0, 2, port, 10);
	start(&l[0]);
	int fd = connect_retry(port);
	send_stranger_hello(fd, 0x53524456u /* "SRDV" */, 999);
	ck_assert_int_eq(read_until_close(fd, buf, sizeof buf - 1), 0);
	close(fd);
	second_launcher_completes_the_pair(l, port);
	text = logged();
	ck_assert_msg(strstr(text, "job 4242 step 7, not of job 999 step 7"), "%s", text);
}
END_TEST

/*
 * A hello for index 1 whose credential is not for it: closed without a word
 * (launcher 0 signs nothing for it), named in launcher 0's log.
 */
static void refused_hello(const char *cred, const char *reason)
{
	unsigned port = free_port();
	struct launcher l[2];
	unsigned char buf[8192];
	const char *text;

	logging_to_file();
	params(&l[0].p, 0, 2, port, 10);
	start(&l[0]);
	int fd = connect_retry(port);
	send_hello_with(fd, 0x53524456u, 4242, 1, cred);
	ck_assert_int_eq(read_until_close(fd, buf, sizeof buf - 1), 0);
	close(fd);
	second_launcher_completes_the_pair(l, port);
	text = logged();
	ck_assert_msg(strstr(text, "launcher 1's hello is not the job's: ") && strstr(text, reason),
		      "%s", text);
}

START_TEST(hello_with_a_forged_credential_is_refused)
{
	refused_hello("MUNGE:AAAAnot-a-credential", "its munge credential is not valid");
}
END_TEST

START_TEST(hello_credentialed_for_another_message_is_refused)
{
	char *cred, err[512];

	/* the job user's credential, captured from another exchange */
	ck_assert_int_eq(rdv_auth_sign("hello job=4242 step=7 port=1 count=2 index=1", "abc", 3,
				       60, NULL, &cred, err, sizeof err), 0);
	refused_hello(cred, "for another message");
	free(cred);
}
END_TEST

/* Another user of the node (root can be one for a moment: uid nobody). */
START_TEST(hello_of_another_user_is_refused)
{
	char cred[4096] = "", err[512], what[256];
	int pipefd[2];
	pid_t pid;
	ssize_t n;

	if (geteuid() != 0) {
		fprintf(stderr, "hello_of_another_user_is_refused: needs root to act as another "
				"user; the credential check itself is tested above\n");
		return;
	}
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	if (pid == 0) {
		char *c = NULL;

		close(pipefd[0]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(1);
		/* the uid is checked first: the port in the message does not matter */
		snprintf(what, sizeof what, "hello job=4242 step=7 port=1 count=2 index=1");
		if (rdv_auth_sign(what, "abc", 3, 60, NULL, &c, err, sizeof err) < 0)
			_exit(2);
		n = write(pipefd[1], c, strlen(c));
		_exit(n > 0 ? 0 : 3);
	}
	close(pipefd[1]);
	n = read(pipefd[0], cred, sizeof cred - 1);
	close(pipefd[0]);
	waitpid(pid, NULL, 0);
	ck_assert_int_gt(n, 0);
	refused_hello(cred, "of uid 65534, not of the job's user (uid 0)");
}
END_TEST

/*
 * An impostor that holds launcher 0's port answers launcher 1 with a
 * table the job's user did not credential: refused, and named when the
 * rendezvous gives up.
 */
static void *impostor(void *arg)
{
	unsigned port = *(unsigned *)arg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	unsigned char hello[8192], reply[28 + 64] = { 0 };

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 4) < 0)
		return NULL;
	for (int i = 0; i < 3 && (fd = accept(lfd, NULL, NULL)) >= 0; i++) {
		(void)recv(fd, hello, sizeof hello, 0);
		put32(reply, 0x53524456u);
		put32(reply + 4, 2);
		put32(reply + 8, 0);          /* status: a table */
		put32(reply + 12, 2);         /* of two launchers */
		put32(reply + 16, 20);        /* a credential of 20 bytes */
		put32(reply + 24, 32);        /* and a table of 32 */
		memcpy(reply + 28, "MUNGE:forged-forged", 20);
		(void)send(fd, reply, sizeof reply, MSG_NOSIGNAL);
		close(fd);
	}
	close(lfd);
	return NULL;
}

START_TEST(reply_not_credentialed_by_launcher_0_is_refused)
{
	unsigned port = free_port();
	struct launcher l;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, impostor, &port), 0);
	usleep(100000);
	params(&l.p, 1, 2, port, 2);
	start(&l);
	finish(&l);
	pthread_join(t, NULL);
	ck_assert_int_eq(l.rc, -1);
	ck_assert_msg(strstr(l.err, "no trusted table from launcher 0") &&
		      strstr(l.err, "not launcher 0's: its munge credential is not valid"),
		      "%s", l.err);
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

/*
 * Nodes without munged: this test process's slurm.conf names a socket
 * nobody listens on (munge_socket reads it once per process; every test
 * runs in a process of its own).
 */
static void without_munged(char *dir)
{
	char conf[600];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof conf, "%s/slurm.conf", dir);
	f = fopen(conf, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "AuthType=auth/munge\nAuthInfo=socket=%s/no-munged.socket\n", dir);
	fclose(f);
	setenv("SLURM_CONF", conf, 1);
}

/* Two launchers with the job's secret at dir/rendezvous.key (made 0600). */
static void pair_with_secret(struct launcher *l, const char *dir, mode_t mode)
{
	unsigned port = free_port();
	char err[512];

	for (int i = 0; i < 2; i++) {
		params(&l[i].p, i, 2, port, 3);
		snprintf(l[i].p.secret_file, sizeof l[i].p.secret_file, "%s/rendezvous.key", dir);
	}
	ck_assert_msg(rdv_auth_make_secret(l[0].p.secret_file, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(chmod(l[0].p.secret_file, mode), 0);
	start(&l[0]);
	start(&l[1]);
	finish(&l[0]);
	finish(&l[1]);
}

START_TEST(without_munged_the_jobs_secret_stands_in)
{
	char dir[] = "/tmp/check_rendezvous_secret.XXXXXX";
	struct launcher l[2];

	without_munged(dir);
	pair_with_secret(l, dir, 0600);
	for (int i = 0; i < 2; i++) {
		assert_full_table(&l[i], 2);
		rdv_result_free(&l[i].r);
	}
	remove_tree(dir);
}
END_TEST

START_TEST(a_secret_others_can_read_is_refused)
{
	char dir[] = "/tmp/check_rendezvous_secret.XXXXXX";
	struct launcher l[2];

	without_munged(dir);
	pair_with_secret(l, dir, 0640);
	ck_assert_int_eq(l[1].rc, -1);
	ck_assert_msg(strstr(l[1].err, "rendezvous.key is refused: it must be a regular file of uid") &&
		      strstr(l[1].err, "mode 0640"), "%s", l[1].err);
	remove_tree(dir);
}
END_TEST

START_TEST(without_munged_or_secret_the_reason_is_given)
{
	char dir[] = "/tmp/check_rendezvous_secret.XXXXXX", err[512], *cred = NULL;

	without_munged(dir);
	ck_assert_int_eq(rdv_auth_sign("hello", "x", 1, 60, NULL, &cred, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot make a munge credential") && strstr(err, "munged must run"),
		      "%s", err);
	remove_tree(dir);
}
END_TEST

/*
 * A flood: n connections to launcher 0's port from address src, none of
 * which sends a byte, each opened again as soon as launcher 0 closes it,
 * until stop is set (what another user on a node can do to the port).
 */
#define FLOOD_CONNS 500

struct flood {
	pthread_t thread;
	unsigned port;
	const char *src;
	volatile int stop;
	int reopened;
};

static int flood_open(const struct flood *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)f->port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	inet_pton(AF_INET, f->src, &from.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) < 0 ||
	    (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void *flood_run(void *arg)
{
	struct flood *f = arg;
	struct pollfd *pfd = calloc(FLOOD_CONNS, sizeof *pfd);

	for (int i = 0; i < FLOOD_CONNS; i++)
		pfd[i] = (struct pollfd){ .fd = flood_open(f), .events = POLLIN };
	while (!f->stop) {
		poll(pfd, FLOOD_CONNS, 1);
		for (int i = 0; i < FLOOD_CONNS; i++) {
			char b[64];

			if (pfd[i].fd >= 0 && !pfd[i].revents)
				continue;
			if (pfd[i].fd >= 0 && recv(pfd[i].fd, b, sizeof b, MSG_DONTWAIT) > 0)
				continue;
			if (pfd[i].fd >= 0)
				close(pfd[i].fd);
			pfd[i].fd = flood_open(f);
			pfd[i].revents = 0;
			f->reopened++;
		}
	}
	for (int i = 0; i < FLOOD_CONNS; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	free(pfd);
	return NULL;
}

/*
 * 500 silent connections, from launcher 1's own address (another user on
 * its node) or from another address, opened before launcher 1 arrives and
 * kept open: the pair still meets, well before launcher 1's timeout, and
 * launcher 0's log names one closed connection and counts the rest.
 */
START_TEST(a_flood_of_silent_connections_does_not_keep_a_launcher_out)
{
	static const char *const sources[] = { "127.0.0.1", "127.0.0.2" };
	unsigned port = free_port();
	struct launcher l[2];
	struct flood f = { .port = port, .src = sources[_i] };

	params(&l[0].p, 0, 2, port, 20);
	logging_to_file();
	start(&l[0]);
	close(connect_retry(port));
	ck_assert_int_eq(pthread_create(&f.thread, NULL, flood_run, &f), 0);
	usleep(500000);
	params(&l[1].p, 1, 2, port, 20);
	start(&l[1]);
	finish(&l[1]);
	finish(&l[0]);
	f.stop = 1;
	pthread_join(f.thread, NULL);
	const char *log = logged();
	for (int i = 0; i < 2; i++) {
		assert_full_table(&l[i], 2);
		rdv_result_free(&l[i].r);
	}
	fprintf(stderr, "flood from %s: launcher 1 met launcher 0 after %.3f s; %d connections "
		"opened again\n", f.src, l[1].seconds, f.reopened);
	/* kept out, it would retry until its timeout (20 s); met, it takes
	 * milliseconds, more on a loaded machine */
	ck_assert_msg(l[1].seconds < 5.0, "flood from %s: launcher 1 met launcher 0 after %.2f s",
		      f.src, l[1].seconds);
	ck_assert_msg(strlen(log) < 4096, "flood from %s: launcher 0 logged %zu bytes:\n%.2000s",
		      f.src, strlen(log), log);
}
END_TEST

/*
 * A peer that sends its hello in two parts, half a second apart, while 500
 * silent connections arrive from its own address or from another: it is
 * still there to be heard when its hello is complete (here another job's,
 * so launcher 0's log names why it is refused), not closed to make room.
 */
START_TEST(a_flood_does_not_close_a_peer_that_has_begun_its_hello)
{
	static const char *const sources[] = { "127.0.0.1", "127.0.0.2" };
	unsigned port = free_port();
	struct launcher l[2];
	struct flood f = { .port = port, .src = sources[_i] };
	unsigned char h[36 + 4096 + 3], buf[256];
	size_t n = hello_bytes(h, 0x53524456u, 4243, 1, NULL);
	int fd;

	params(&l[0].p, 0, 2, port, 20);
	logging_to_file();
	start(&l[0]);
	fd = connect_retry(port);
	ck_assert_int_eq(send(fd, h, 20, 0), 20);
	usleep(100000);
	ck_assert_int_eq(pthread_create(&f.thread, NULL, flood_run, &f), 0);
	usleep(500000);
	ck_assert_int_eq(send(fd, h + 20, n - 20, 0), (ssize_t)(n - 20));
	ck_assert_int_eq(read_until_close(fd, buf, sizeof buf), 0);
	close(fd);
	f.stop = 1;
	pthread_join(f.thread, NULL);
	second_launcher_completes_the_pair(l, port);
	const char *log = logged();
	ck_assert_msg(strstr(log, "this port serves the rendezvous of job 4242 step 7, not of job 4243"),
		      "flood from %s: the slow peer was not heard:\n%.2000s", f.src, log);
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
	tcase_add_test(tc, hello_with_a_forged_credential_is_refused);
	tcase_add_test(tc, hello_credentialed_for_another_message_is_refused);
	tcase_add_test(tc, hello_of_another_user_is_refused);
	tcase_add_test(tc, reply_not_credentialed_by_launcher_0_is_refused);
	tcase_add_loop_test(tc, a_flood_of_silent_connections_does_not_keep_a_launcher_out, 0, 2);
	tcase_add_loop_test(tc, a_flood_does_not_close_a_peer_that_has_begun_its_hello, 0, 2);
	tcase_add_test(tc, without_munged_the_jobs_secret_stands_in);
	tcase_add_test(tc, a_secret_others_can_read_is_refused);
	tcase_add_test(tc, without_munged_or_secret_the_reason_is_given);
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

/*
 * A munged of the test's own, named by a slurm.conf of its own (SLURM_CONF),
 * as Slurm's auth/munge names it: its pid, or -1 (the reason printed).
 */
static pid_t start_munged(char *dir)
{
	char key[600], sock[600], conf[600], log[600], pidf[600], seed[600], line[700];
	unsigned char bytes[1024];
	FILE *f, *r;
	pid_t pid;

	snprintf(key, sizeof key, "%s/munge.key", dir);
	snprintf(sock, sizeof sock, "%s/munge.socket.2", dir);
	snprintf(conf, sizeof conf, "%s/slurm.conf", dir);
	snprintf(log, sizeof log, "%s/munged.log", dir);
	snprintf(pidf, sizeof pidf, "%s/munged.pid", dir);
	snprintf(seed, sizeof seed, "%s/munged.seed", dir);
	if (!(r = fopen("/dev/urandom", "re")) || fread(bytes, 1, sizeof bytes, r) != sizeof bytes ||
	    !(f = fopen(key, "we"))) {
		fprintf(stderr, "cannot make a munge key in %s\n", dir);
		return -1;
	}
	fclose(r);
	fwrite(bytes, 1, sizeof bytes, f);
	fclose(f);
	chmod(key, 0600);
	if (!(f = fopen(conf, "we")))
		return -1;
	snprintf(line, sizeof line, "AuthType=auth/munge\nAuthInfo=socket=%s\n", sock);
	fputs(line, f);
	fclose(f);
	setenv("SLURM_CONF", conf, 1);
	pid = fork();
	if (pid == 0) {
		char a1[700], a2[700], a3[700], a4[700], a5[700];

		snprintf(a1, sizeof a1, "--socket=%s", sock);
		snprintf(a2, sizeof a2, "--key-file=%s", key);
		snprintf(a3, sizeof a3, "--log-file=%s", log);
		snprintf(a4, sizeof a4, "--pid-file=%s", pidf);
		snprintf(a5, sizeof a5, "--seed-file=%s", seed);
		execl(MUNGED, MUNGED, "--foreground", "--force", a1, a2, a3, a4, a5, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		struct stat st;

		if (stat(sock, &st) == 0)
			return pid;
		usleep(50000);
	}
	fprintf(stderr, "munged (%s) did not start: see %s\n", MUNGED, log);
	kill(pid, SIGTERM);
	return -1;
}

int main(void)
{
	char dir[] = "/tmp/check_rendezvous.XXXXXX";
	SRunner *sr;
	pid_t munged;
	int failed;

	/* 0755: another user (hello_of_another_user_is_refused) reaches the socket */
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0 || (munged = start_munged(dir)) < 0)
		return EXIT_FAILURE;
	sr = srunner_create(rendezvous_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	kill(munged, SIGTERM);
	waitpid(munged, NULL, 0);
	remove_tree(dir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
