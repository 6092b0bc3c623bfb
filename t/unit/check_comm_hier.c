/*
 * t/unit/check_comm_hier.c - the hierarchical communicator (lib/comm/hier.c)
 * and the UCX backend's handling of dead peers, with real processes.
 *
 * Each "node" is a forked process with its own UCX context and a shared-
 * memory world of 1 to 3 rank threads; the parent passes the UCX worker
 * addresses around (what the rendezvous does under Slurm) and then only
 * waits. Children check their own results against a serial reference that
 * folds in the order lib/comm/comm.h documents for this communicator (in-node
 * rank order, then node order), bitwise, and report through their exit
 * status (messages on stderr) and a word they write back to the parent.
 * Timing across processes uses a MAP_SHARED page.
 */
#include "config.h"
#include "lib/comm/comm.h"
#include "lib/rng.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXNODES 3
#define MAXLOCAL 3
#define MAXRANKS (MAXNODES * MAXLOCAL)

struct layout {
	int nnodes;
	int count[MAXNODES];
};

/* Shared between the parent and every node process. */
struct shared {
	atomic_int arrived[64];         /* barrier test: arrivals per round */
	_Atomic double killed_at;       /* CLOCK_MONOTONIC of the kill -9 */
	_Atomic double failed_at[MAXRANKS];
	char reason[MAXRANKS][256];
	int rc[MAXRANKS];
};

static struct shared *shared;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --------------------------------------------------- failures in children */

static atomic_int child_failed;

static void child_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	atomic_store(&child_failed, 1);
}

#define CHILD_CHECK(cond, ...) \
	do { if (!(cond)) child_fail(__VA_ARGS__); } while (0)

/* ---------------------------------------------------------------- harness */

/* What a node process does once its UCX is open and addresses are known. */
struct node_ctx {
	const struct layout *lay;
	int node;
	struct comm_ucx *u;
	const void *const *addrs;
	uint64_t result;                /* written back to the parent */
};

typedef void node_fn(struct node_ctx *n, void *arg);

/* Blocking exact I/O on a socket (short messages). */
static int xfer(int fd, void *buf, size_t len, int out)
{
	for (size_t done = 0; done < len;) {
		ssize_t k = out ? write(fd, (char *)buf + done, len - done)
				: read(fd, (char *)buf + done, len - done);

		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static void node_main(int fd, const struct layout *lay, int node, node_fn *fn, void *arg)
{
	struct node_ctx n = { .lay = lay, .node = node };
	const void *addr;
	size_t len;
	uint64_t lens[MAXNODES];
	char *table;
	const void *addrs[MAXNODES];

	alarm(120);
	if (comm_ucx_open(&n.u, &addr, &len)) {
		fprintf(stderr, "node %d: comm_ucx_open failed\n", node);
		_exit(2);
	}
	uint64_t l64 = len;
	if (xfer(fd, &l64, sizeof l64, 1) || xfer(fd, (void *)addr, len, 1) ||
	    xfer(fd, lens, sizeof lens, 0))
		_exit(3);
	size_t total = 0;
	for (int k = 0; k < lay->nnodes; k++)
		total += lens[k];
	if (!(table = malloc(total)) || xfer(fd, table, total, 0))
		_exit(3);
	for (int k = 0, off = 0; k < lay->nnodes; off += (int)lens[k], k++)
		addrs[k] = table + off;
	n.addrs = addrs;
	fn(&n, arg);
	xfer(fd, &n.result, sizeof n.result, 1);
	comm_ucx_close(n.u);
	free(table);
	_exit(atomic_load(&child_failed) ? 1 : 0);
}

/*
 * Fork one process per node of lay, hand every node every worker address,
 * and wait. kill_node >= 0: kill -9 that node kill_after seconds after the
 * addresses went out. Returns each node's exit status and result word.
 */
static void run_nodes(const struct layout *lay, node_fn *fn, void *arg, int kill_node,
		      double kill_after, int status[], uint64_t result[])
{
	int fds[MAXNODES];
	pid_t pid[MAXNODES];
	uint64_t lens[MAXNODES] = { 0 };
	char *addr[MAXNODES];

	for (int k = 0; k < lay->nnodes; k++) {
		int sv[2];

		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		pid[k] = fork();
		ck_assert_int_ge(pid[k], 0);
		if (pid[k] == 0) {
			close(sv[0]);
			for (int j = 0; j < k; j++)
				close(fds[j]);
			node_main(sv[1], lay, k, fn, arg);
		}
		close(sv[1]);
		fds[k] = sv[0];
	}
	for (int k = 0; k < lay->nnodes; k++) {
		ck_assert_int_eq(xfer(fds[k], &lens[k], sizeof lens[k], 0), 0);
		addr[k] = malloc(lens[k]);
		ck_assert_int_eq(xfer(fds[k], addr[k], lens[k], 0), 0);
	}
	for (int k = 0; k < lay->nnodes; k++) {
		ck_assert_int_eq(xfer(fds[k], lens, sizeof lens, 1), 0);
		for (int j = 0; j < lay->nnodes; j++)
			ck_assert_int_eq(xfer(fds[k], addr[j], lens[j], 1), 0);
	}
	if (kill_node >= 0) {
		usleep((useconds_t)(kill_after * 1e6));
		shared->killed_at = now();
		kill(pid[kill_node], SIGKILL);
	}
	for (int k = 0; k < lay->nnodes; k++) {
		result[k] = 0;
		if (xfer(fds[k], &result[k], sizeof result[k], 0))
			result[k] = 0;
		ck_assert_int_eq(waitpid(pid[k], &status[k], 0), pid[k]);
		close(fds[k]);
		free(addr[k]);
	}
}

static void assert_nodes_ok(const struct layout *lay, const int status[])
{
	for (int k = 0; k < lay->nnodes; k++)
		ck_assert_msg(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0,
			      "node %d: %s %d (see its messages above)", k,
			      WIFEXITED(status[k]) ? "exit status" : "killed by signal",
			      WIFEXITED(status[k]) ? WEXITSTATUS(status[k]) : WTERMSIG(status[k]));
}

/* Rank threads of one node process over the hierarchical communicator. */
typedef void rank_fn(struct comm *c, const struct layout *lay, void *arg);

struct rank_thread {
	struct comm *c;
	const struct layout *lay;
	rank_fn *fn;
	void *arg;
};

static void *rank_thread_main(void *p)
{
	struct rank_thread *t = p;

	t->fn(t->c, t->lay, t->arg);
	return NULL;
}

struct hier_job {
	rank_fn *fn;
	void *arg;
};

/* node_fn: make the world and the hierarchical communicator, run the ranks. */
static void hier_node(struct node_ctx *n, void *arg)
{
	struct hier_job *job = arg;
	int nl = n->lay->count[n->node];
	struct comm_world *w = comm_world_create(nl);
	struct comm_hier *h;
	pthread_t th[MAXLOCAL];
	struct rank_thread rt[MAXLOCAL];
	int rc;

	if ((rc = comm_hier_create(w, n->u, n->node, n->lay->nnodes, n->addrs,
				   n->lay->count, &h))) {
		child_fail("node %d: comm_hier_create: %s", n->node, comm_strerror(rc));
		comm_world_destroy(w);
		return;
	}
	for (int i = 0; i < nl; i++) {
		rt[i] = (struct rank_thread){ comm_hier_rank(h, i), n->lay, job->fn, job->arg };
		pthread_create(&th[i], NULL, rank_thread_main, &rt[i]);
	}
	for (int i = 0; i < nl; i++)
		pthread_join(th[i], NULL);
	comm_hier_destroy(h);
	comm_world_destroy(w);
}

/* Run fn on every rank of every node of lay; every node must end cleanly. */
static void run_ranks_everywhere(const struct layout *lay, rank_fn *fn, void *arg)
{
	struct hier_job job = { fn, arg };
	int status[MAXNODES];
	uint64_t res[MAXNODES];

	run_nodes(lay, hier_node, &job, -1, 0, status, res);
	assert_nodes_ok(lay, status);
}

static int total_ranks(const struct layout *lay)
{
	int n = 0;

	for (int k = 0; k < lay->nnodes; k++)
		n += lay->count[k];
	return n;
}

/* ---------------------------------------------------------- references */

/* Floats of widely varying magnitude and sign, so addition order shows in the bits. */
static void fill_f32(float *x, size_t count, int rank, uint64_t salt)
{
	uint64_t s = rng_seed(salt, (uint64_t)rank);

	for (size_t i = 0; i < count; i++)
		x[i] = rng_normal(&s, 0.0f, 1.0f) * (float)(1u << rng_below(&s, 20)) /
		       (float)(1u << 10);
}

/* The documented order: each node's ranks in local order, then the nodes. */
static float *reference_sum(const struct layout *lay, size_t count, uint64_t salt)
{
	float *ref = calloc(count ? count : 1, sizeof *ref);
	float *node = malloc((count ? count : 1) * sizeof *node);
	float *x = malloc((count ? count : 1) * sizeof *x);

	for (int k = 0, g = 0; k < lay->nnodes; k++) {
		for (int i = 0; i < lay->count[k]; i++, g++) {
			fill_f32(x, count, g, salt);
			for (size_t e = 0; e < count; e++)
				node[e] = i == 0 ? x[e] : node[e] + x[e];
		}
		for (size_t e = 0; e < count; e++)
			ref[e] = k == 0 ? node[e] : ref[e] + node[e];
	}
	free(node);
	free(x);
	return ref;
}

/* The flat fold over global ranks, to show the two orders differ. */
static float *flat_sum(int n, size_t count, uint64_t salt)
{
	float *ref = calloc(count, sizeof *ref), *x = malloc(count * sizeof *x);

	for (int g = 0; g < n; g++) {
		fill_f32(x, count, g, salt);
		for (size_t e = 0; e < count; e++)
			ref[e] = g == 0 ? x[e] : ref[e] + x[e];
	}
	free(x);
	return ref;
}

static uint64_t hash_bytes(const void *p, size_t len, uint64_t h)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
	return h;
}

/* Layouts: 2 nodes x 1, 2 and 3 ranks, and uneven ones (3 nodes: the node order shows). */
static const struct layout layouts[] = {
	{ 2, { 1, 1 } }, { 2, { 2, 2 } }, { 2, { 3, 3 } }, { 2, { 1, 3 } }, { 3, { 2, 1, 3 } },
};

static const size_t counts[] = { 0, 1, 7, 33, 1023, 40009 };
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* -------------------------------------------------------------- all-reduce */

static void do_allreduce(struct comm *c, const struct layout *lay, void *arg)
{
	size_t extra = *(size_t *)arg;
	int me = comm_rank(c);

	CHILD_CHECK(comm_size(c) == total_ranks(lay), "rank %d: size %d, want %d", me,
		    comm_size(c), total_ranks(lay));
	for (size_t j = 0; j <= NCOUNTS; j++) {
		size_t n = j < NCOUNTS ? counts[j] : extra;
		float *x = malloc((n ? n : 1) * sizeof *x), *ref;
		int rc;

		if (j == NCOUNTS && !n)
			break;
		fill_f32(x, n, me, 11 + n);
		rc = comm_allreduce(c, x, n, COMM_FLOAT32, COMM_SUM);
		CHILD_CHECK(rc == COMM_OK, "rank %d: allreduce of %zu: %s", me, n, comm_strerror(rc));
		ref = reference_sum(lay, n, 11 + n);
		CHILD_CHECK(memcmp(x, ref, n * sizeof *x) == 0,
			    "rank %d: allreduce of %zu floats differs from the reference", me, n);
		free(ref);
		free(x);
	}
	/* an integer max too: the largest global rank wins everywhere */
	int32_t m[5];
	for (int i = 0; i < 5; i++)
		m[i] = me * (i + 1) - 3;
	CHILD_CHECK(comm_allreduce(c, m, 5, COMM_INT32, COMM_MAX) == COMM_OK, "max failed");
	for (int i = 0; i < 5; i++)
		CHILD_CHECK(m[i] == (comm_size(c) - 1) * (i + 1) - 3, "rank %d: max[%d] = %d", me, i,
			    m[i]);
}

START_TEST(allreduce_equals_in_node_then_node_order_fold)
{
	const struct layout *lay = &layouts[_i];
	size_t extra = 1100003;         /* several UCX pieces */

	run_ranks_everywhere(lay, do_allreduce, &extra);
}
END_TEST

START_TEST(reference_order_differs_from_the_flat_fold)
{
	const struct layout lay = { 2, { 3, 3 } };
	size_t n = 40009;
	float *a = reference_sum(&lay, n, 5), *b = flat_sum(6, n, 5);

	ck_assert_int_ne(memcmp(a, b, n * sizeof *a), 0);
	free(a);
	free(b);
}
END_TEST

/* Each node writes back a hash of its ranks' results. */
static void do_hash(struct comm *c, const struct layout *lay, void *arg)
{
	uint64_t *hashes = arg;
	size_t n = 300007;
	float *x = malloc(n * sizeof *x);

	(void)lay;
	fill_f32(x, n, comm_rank(c), 99);
	CHILD_CHECK(comm_allreduce(c, x, n, COMM_FLOAT32, COMM_SUM) == COMM_OK, "allreduce failed");
	hashes[comm_rank(c)] = hash_bytes(x, n * sizeof *x, 0xcbf29ce484222325ULL);
	free(x);
}

static void hash_node(struct node_ctx *n, void *arg)
{
	uint64_t hashes[MAXRANKS] = { 0 };
	struct hier_job job = { do_hash, hashes };
	int base = 0;

	(void)arg;
	for (int k = 0; k < n->node; k++)
		base += n->lay->count[k];
	hier_node(n, &job);
	n->result = hashes[base];
	for (int i = 1; i < n->lay->count[n->node]; i++)
		CHILD_CHECK(hashes[base + i] == hashes[base], "ranks of node %d disagree", n->node);
}

START_TEST(allreduce_is_deterministic_across_runs)
{
	const struct layout lay = { 2, { 3, 2 } };
	int status[MAXNODES];
	uint64_t first[MAXNODES], again[MAXNODES];

	run_nodes(&lay, hash_node, NULL, -1, 0, status, first);
	assert_nodes_ok(&lay, status);
	for (int run = 0; run < 2; run++) {
		run_nodes(&lay, hash_node, NULL, -1, 0, status, again);
		assert_nodes_ok(&lay, status);
		ck_assert_uint_eq(first[0], first[1]);
		ck_assert_uint_eq(again[0], first[0]);
		ck_assert_uint_eq(again[1], first[0]);
	}
}
END_TEST

/* ------------------------------------- reduce-scatter, all-gather, bcast */

static void do_reduce_scatter(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), n = comm_size(c);

	(void)arg;
	for (size_t j = 0; j < NCOUNTS; j++) {
		size_t rc_ = counts[j], total = rc_ * (size_t)n;
		float *send = malloc((total ? total : 1) * sizeof *send);
		float *recv = malloc((rc_ ? rc_ : 1) * sizeof *recv), *ref;
		int rc;

		fill_f32(send, total, me, 21 + rc_);
		rc = comm_reduce_scatter(c, send, recv, rc_, COMM_FLOAT32, COMM_SUM);
		CHILD_CHECK(rc == COMM_OK, "rank %d: reduce-scatter: %s", me, comm_strerror(rc));
		ref = reference_sum(lay, total, 21 + rc_);
		CHILD_CHECK(memcmp(recv, ref + (size_t)me * rc_, rc_ * sizeof *recv) == 0,
			    "rank %d: reduce-scatter of %zu per rank differs from its segment of "
			    "the reference", me, rc_);
		free(ref);
		free(send);
		free(recv);
	}
}

START_TEST(reduce_scatter_gives_each_rank_its_segment_of_the_fold)
{
	const struct layout *lay = &layouts[_i];

	run_ranks_everywhere(lay, do_reduce_scatter, NULL);
}
END_TEST

static void do_allgather(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), n = comm_size(c);

	(void)lay, (void)arg;
	for (size_t j = 0; j < NCOUNTS; j++) {
		size_t sc = counts[j], total = sc * (size_t)n;
		float *send = malloc((sc ? sc : 1) * sizeof *send);
		float *recv = malloc((total ? total : 1) * sizeof *recv);
		float *want = malloc((sc ? sc : 1) * sizeof *want);

		for (int inplace = 0; inplace < 2; inplace++) {
			const float *src = send;
			int rc;

			fill_f32(send, sc, me, 31 + sc);
			memset(recv, 0xff, (total ? total : 1) * sizeof *recv);
			if (inplace) {
				memcpy(recv + (size_t)me * sc, send, sc * sizeof *send);
				src = recv + (size_t)me * sc;
			}
			rc = comm_allgather(c, src, recv, sc, COMM_FLOAT32);
			CHILD_CHECK(rc == COMM_OK, "rank %d: allgather: %s", me, comm_strerror(rc));
			for (int k = 0; k < n; k++) {
				fill_f32(want, sc, k, 31 + sc);
				CHILD_CHECK(memcmp(recv + (size_t)k * sc, want, sc * sizeof *want) == 0,
					    "rank %d: allgather of %zu%s: rank %d's part is wrong", me,
					    sc, inplace ? " in place" : "", k);
			}
		}
		free(send);
		free(recv);
		free(want);
	}
}

START_TEST(allgather_places_global_rank_k_at_offset_k)
{
	const struct layout *lay = &layouts[_i];

	run_ranks_everywhere(lay, do_allgather, NULL);
}
END_TEST

static void do_broadcast(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), n = comm_size(c);
	size_t sizes[] = { 1, 33, 1100003 };

	(void)lay, (void)arg;
	for (int root = 0; root < n; root++) {
		for (size_t j = 0; j < 3; j++) {
			size_t cnt = sizes[j];
			float *buf = malloc(cnt * sizeof *buf), *want = malloc(cnt * sizeof *want);
			int rc;

			fill_f32(buf, cnt, me, 41 + root);
			fill_f32(want, cnt, root, 41 + root);
			rc = comm_broadcast(c, buf, cnt, COMM_FLOAT32, root);
			CHILD_CHECK(rc == COMM_OK, "rank %d: broadcast: %s", me, comm_strerror(rc));
			CHILD_CHECK(memcmp(buf, want, cnt * sizeof *buf) == 0,
				    "rank %d: broadcast of %zu from root %d is wrong", me, cnt, root);
			free(buf);
			free(want);
		}
	}
}

START_TEST(broadcast_copies_the_roots_buffer_to_every_node)
{
	const struct layout *lay = &layouts[_i];

	run_ranks_everywhere(lay, do_broadcast, NULL);
}
END_TEST

/* In each round one rank (a different one each time) arrives late. */
static void do_barrier(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), n = comm_size(c);

	(void)lay, (void)arg;
	for (int round = 0; round < 2 * n && round < 64; round++) {
		int rc;

		if (me == round % n)
			usleep(30000);
		atomic_fetch_add(&shared->arrived[round], 1);
		rc = comm_barrier(c);
		CHILD_CHECK(rc == COMM_OK, "rank %d: barrier: %s", me, comm_strerror(rc));
		CHILD_CHECK(atomic_load(&shared->arrived[round]) == n,
			    "rank %d left barrier %d with %d of %d arrived", me, round,
			    atomic_load(&shared->arrived[round]), n);
	}
}

START_TEST(barrier_releases_no_rank_before_all_arrive)
{
	const struct layout *lay = &layouts[_i];

	memset(shared, 0, sizeof *shared);
	run_ranks_everywhere(lay, do_barrier, NULL);
}
END_TEST

/* ------------------------------------------------------------------ split */

static void do_split(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), rc;
	struct comm *sub = NULL;
	int node = me < lay->count[0] ? 0 : 1, base = node ? lay->count[0] : 0;

	(void)arg;
	/* by node, reversed by key: a node-local group */
	rc = comm_split(c, node, -me, &sub);
	CHILD_CHECK(rc == COMM_OK && sub, "rank %d: node-local split: %s", me, comm_strerror(rc));
	if (sub) {
		int32_t v = me;

		CHILD_CHECK(comm_size(sub) == lay->count[node] &&
			    comm_rank(sub) == lay->count[node] - 1 - (me - base),
			    "rank %d: split rank %d of %d", me, comm_rank(sub), comm_size(sub));
		CHILD_CHECK(comm_allreduce(sub, &v, 1, COMM_INT32, COMM_MAX) == COMM_OK &&
			    v == base + lay->count[node] - 1, "rank %d: sub max %d", me, v);
		comm_free(sub);
	}
	/* one group over both nodes whose order leaves node 0 and comes back */
	rc = comm_split(c, 0, me == 0 ? 100 : me, &sub);
	CHILD_CHECK(rc == COMM_EINVAL && !sub, "rank %d: a group that comes back to a node gave %s",
		    me, comm_strerror(rc));
	/* node 1's ranks first, then node 0's: fine, the nodes' members stay together */
	rc = comm_split(c, 0, node ? me - 100 : me, &sub);
	CHILD_CHECK(rc == COMM_OK && sub && comm_size(sub) == total_ranks(lay),
		    "rank %d: nodes in another order: %s", me, comm_strerror(rc));
	if (sub) {
		int32_t v = me;

		CHILD_CHECK(comm_rank(sub) == (node ? me - base : lay->count[1] + me),
			    "rank %d: rank %d in the reordered group", me, comm_rank(sub));
		CHILD_CHECK(comm_allreduce(sub, &v, 1, COMM_INT32, COMM_SUM) == COMM_OK &&
			    v == total_ranks(lay) * (total_ranks(lay) - 1) / 2, "rank %d: sum %d", me, v);
		comm_free(sub);
	}
}

START_TEST(split_makes_node_local_groups_and_refuses_others)
{
	const struct layout lay = { 2, { 2, 3 } };

	run_ranks_everywhere(&lay, do_split, NULL);
}
END_TEST

/* A rank records when and why its call failed, for the parent to check. */
static void record_failure(struct comm *c, int me, int rc)
{
	shared->failed_at[me] = now();
	shared->rc[me] = rc;
	snprintf(shared->reason[me], sizeof shared->reason[me], "%s", comm_abort_reason(c));
}

/*
 * Rank g failed with COMM_EABORTED within 10 s of the kill or abort, for a
 * reason that contains want (or equals it, exact).
 */
static void assert_failed_soon(int g, const char *what, const char *want, int exact)
{
	double dt = shared->failed_at[g] - shared->killed_at;

	fprintf(stderr, "rank %d %s %.2f s after the kill or abort: %s\n", g, what, dt,
		shared->reason[g]);
	ck_assert_int_eq(shared->rc[g], COMM_EABORTED);
	ck_assert_msg(dt >= 0 && dt < 10, "rank %d %s %.1f s after the kill or abort", g, what, dt);
	if (exact)
		ck_assert_str_eq(shared->reason[g], want);
	else
		ck_assert_msg(strstr(shared->reason[g], want), "rank %d: reason '%s'", g,
			      shared->reason[g]);
}

/* ------------------------------------------------------ groups across nodes */

/*
 * The groups of the tests below: on every node, local rank i joins group
 * i % 2, members in global rank order. On 2 x 2 that is {0, 2} and {1, 3},
 * one member per node (data-parallel groups of a tensor-parallel pair); on
 * 2 x 3, {0, 2, 3, 5} (two per node) and {1, 4}; on 3 x 2, three nodes.
 */
static int group_of(const struct layout *lay, int g)
{
	int k = 0, base = 0;

	while (g - base >= lay->count[k])
		base += lay->count[k++];
	return (g - base) % 2;
}

/* The group's reference: its members' data folded per node in member order, then the nodes. */
static float *group_reference(const struct layout *lay, int color, size_t count, uint64_t salt)
{
	float *ref = calloc(count ? count : 1, sizeof *ref), *node = malloc((count ? count : 1) * 4);
	float *x = malloc((count ? count : 1) * sizeof *x);
	int firstnode = 1;

	for (int k = 0, g = 0; k < lay->nnodes; k++) {
		int firstrank = 1;

		for (int i = 0; i < lay->count[k]; i++, g++) {
			if (group_of(lay, g) != color)
				continue;
			fill_f32(x, count, g, salt);
			for (size_t e = 0; e < count; e++)
				node[e] = firstrank ? x[e] : node[e] + x[e];
			firstrank = 0;
		}
		if (firstrank)
			continue;
		for (size_t e = 0; e < count; e++)
			ref[e] = firstnode ? node[e] : ref[e] + node[e];
		firstnode = 0;
	}
	free(node);
	free(x);
	return ref;
}

/*
 * Every rank works in its group at the same time as the other group:
 * all-reduce, reduce-scatter, all-gather and broadcast, compared with the
 * group's two-level fold bit for bit; then the global communicator still
 * works.
 */
static void do_groups(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), color = group_of(lay, me), rc;
	struct comm *sub = NULL;

	(void)arg;
	rc = comm_split(c, color, me, &sub);
	CHILD_CHECK(rc == COMM_OK && sub, "rank %d: split: %s", me, comm_strerror(rc));
	if (!sub)
		return;
	for (size_t j = 0; j < NCOUNTS; j++) {
		int n = comm_size(sub), r = comm_rank(sub);
		size_t cnt = counts[j], seg = cnt / (size_t)n;
		float *x = malloc((cnt ? cnt : 1) * sizeof *x), *ref = group_reference(lay, color, cnt, 7 + cnt);
		float *part = malloc((seg ? seg : 1) * sizeof *part);
		int32_t *all = malloc(sizeof(int32_t) * (size_t)n), root = n - 1, b = me;

		fill_f32(x, cnt, me, 7 + cnt);
		rc = comm_reduce_scatter(sub, x, part, seg, COMM_FLOAT32, COMM_SUM);
		CHILD_CHECK(rc == COMM_OK && !memcmp(part, ref + (size_t)r * seg, seg * sizeof *part),
			    "rank %d: group reduce-scatter of %zu differs (%s)", me, cnt, comm_strerror(rc));
		rc = comm_allreduce(sub, x, cnt, COMM_FLOAT32, COMM_SUM);
		CHILD_CHECK(rc == COMM_OK && !memcmp(x, ref, cnt * sizeof *x),
			    "rank %d: group all-reduce of %zu differs (%s)", me, cnt, comm_strerror(rc));
		rc = comm_allgather(sub, &b, all, 1, COMM_INT32);
		for (int q = 0; q < n && rc == COMM_OK; q++)
			CHILD_CHECK(group_of(lay, all[q]) == color && (q == 0 || all[q] > all[q - 1]),
				    "rank %d: all-gather slot %d holds %d", me, q, all[q]);
		CHILD_CHECK(rc == COMM_OK, "rank %d: group all-gather: %s", me, comm_strerror(rc));
		b = me;
		rc = comm_broadcast(sub, &b, 1, COMM_INT32, root);
		CHILD_CHECK(rc == COMM_OK && b == all[root], "rank %d: broadcast gave %d", me, b);
		free(x);
		free(ref);
		free(part);
		free(all);
	}
	CHILD_CHECK(comm_barrier(sub) == COMM_OK && comm_barrier(c) == COMM_OK, "rank %d: barrier", me);
	comm_free(sub);
}

static const struct layout group_layouts[] = {
	{ 2, { 2, 2 } }, { 2, { 3, 3 } }, { 3, { 2, 2, 2 } }, { 2, { 3, 2 } },
};

START_TEST(groups_across_nodes_fold_in_node_then_node_order_side_by_side)
{
	run_ranks_everywhere(&group_layouts[_i], do_groups, NULL);
}
END_TEST

/*
 * Point-to-point across nodes from every thread at once, both ways: every
 * rank sends NMSG messages to the rank half the world away and to its
 * group's next member, then receives what they sent it, in order.
 */
static float p2p_value(int src, int dst, int msg, size_t i)
{
	return (float)(src * 7919 + dst * 131 + msg) + (float)i * 0.25f;
}

/* Three messages of growing size, then more one-element ones than a sequence byte counts. */
#define NMSG 303

static size_t msg_size(int m)
{
	static const size_t sizes[3] = { 3, 4096, 300001 };

	return m < 3 ? sizes[m] : 1;
}

static void exchange(struct comm *c, int to, int from, int who, int *bad)
{
	float *buf = malloc(msg_size(2) * sizeof *buf);

	for (int m = 0; m < NMSG; m++) {
		for (size_t i = 0; i < msg_size(m); i++)
			buf[i] = p2p_value(who, to, m, i);
		*bad += comm_send(c, buf, msg_size(m), COMM_FLOAT32, to) != COMM_OK;
	}
	for (int m = 0; m < NMSG; m++) {
		if (comm_recv(c, buf, msg_size(m), COMM_FLOAT32, from) != COMM_OK) {
			(*bad)++;
			continue;
		}
		for (size_t i = 0; i < msg_size(m); i++)
			*bad += buf[i] != p2p_value(from, who, m, i);
	}
	free(buf);
}

static void do_p2p(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), n = comm_size(c), bad = 0;
	struct comm *sub = NULL;

	(void)arg;
	exchange(c, (me + n / 2) % n, (me - n / 2 + n) % n, me, &bad);
	CHILD_CHECK(comm_split(c, group_of(lay, me), me, &sub) == COMM_OK, "rank %d: split", me);
	if (sub && comm_size(sub) > 1) {
		int r = comm_rank(sub), m = comm_size(sub);

		exchange(sub, (r + 1) % m, (r + m - 1) % m, r, &bad);
	}
	comm_free(sub);
	CHILD_CHECK(!bad, "rank %d: %d point-to-point values or calls were wrong", me, bad);
}

START_TEST(send_recv_across_nodes_from_every_thread_at_once)
{
	run_ranks_everywhere(&group_layouts[_i], do_p2p, NULL);
}
END_TEST

/* Node 0's ranks wait for messages node 1 never sends; node 1 is killed. */
static void do_wait_for_killed(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), rc;
	float x[4];

	(void)arg;
	if (me >= lay->count[0]) {
		sleep(30);      /* killed long before */
		return;
	}
	rc = comm_recv(c, x, 4, COMM_FLOAT32, lay->count[0]);
	record_failure(c, me, rc);
}

START_TEST(killed_peer_wakes_a_rank_blocked_in_a_receive)
{
	const struct layout lay = { 2, { 2, 2 } };
	struct hier_job job = { do_wait_for_killed, NULL };
	int status[MAXNODES];
	uint64_t res[MAXNODES];

	setenv("STORK_UCX_PEER_ONLY", "1", 1);
	memset(shared, 0, sizeof *shared);
	run_nodes(&lay, hier_node, &job, 1, 1.0, status, res);
	ck_assert(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL);
	for (int g = 0; g < 2; g++)
		assert_failed_soon(g, "woke", "node 1 (ranks 2-3, peer process) failed:", 0);
}
END_TEST

/*
 * Rank 3 (node 1) sends rank 1 (node 0) another size than rank 1 expects:
 * fewer elements, or more, past UCX's eager limit. Then every rank enters a
 * barrier.
 */
static const size_t mismatch[2][2] = { { 4096, 4095 }, { 1 << 18, 1 << 20 } };

static void do_mismatch(struct comm *c, const struct layout *lay, void *arg)
{
	const size_t *m = arg;
	int me = comm_rank(c);
	float *x = calloc(m[1] > m[0] ? m[1] : m[0], sizeof *x);

	(void)lay;
	shared->rc[me] = COMM_OK;
	if (me == 3)
		shared->rc[me] = comm_send(c, x, m[1], COMM_FLOAT32, 1);
	else if (me == 1)
		shared->rc[me] = comm_recv(c, x, m[0], COMM_FLOAT32, 3);
	shared->rc[4 + me] = comm_barrier(c);
	snprintf(shared->reason[me], sizeof shared->reason[me], "%s", comm_abort_reason(c));
	free(x);
}

START_TEST(a_size_mismatch_across_nodes_names_both_ranks_and_sizes)
{
	const struct layout lay = { 2, { 2, 2 } };
	struct hier_job job = { do_mismatch, (void *)mismatch[_i] };
	int status[MAXNODES];
	uint64_t res[MAXNODES];
	char expect[128];

	setenv("STORK_UCX_PEER_ONLY", "1", 1);
	memset(shared, 0, sizeof *shared);
	run_nodes(&lay, hier_node, &job, -1, 0, status, res);
	assert_nodes_ok(&lay, status);
	ck_assert(shared->rc[3] == COMM_OK || shared->rc[3] == COMM_EABORTED);
	ck_assert_int_eq(shared->rc[1], COMM_EINVAL);
	snprintf(expect, sizeof expect, "rank 1 expected %zu bytes from rank 3, which sent %zu",
		 mismatch[_i][0] * 4, mismatch[_i][1] * 4);
	ck_assert_msg(strstr(shared->reason[1], expect), "reason '%s'", shared->reason[1]);
	for (int g = 0; g < 4; g++)
		ck_assert_msg(shared->rc[4 + g] == COMM_EABORTED, "rank %d: barrier gave %s", g,
			      comm_strerror(shared->rc[4 + g]));
}
END_TEST

/* ---------------------------------------------------------------- failures */

/*
 * Every rank loops over big all-reduces until one fails; records when and
 * why. With arg "abort", the last rank of node 0 aborts instead of joining.
 */
static void do_until_failure(struct comm *c, const struct layout *lay, void *arg)
{
	int me = comm_rank(c), rc = COMM_OK;
	size_t n = 1 << 20;
	float *x = calloc(n, sizeof *x);
	int aborter = arg && me == lay->count[0] - 1;

	for (int it = 0; it < 100000 && !rc; it++) {
		if (aborter && it == 3) {
			usleep(200000);
			shared->killed_at = now();
			comm_abort(c, "test abort");
			rc = comm_allreduce(c, x, n, COMM_FLOAT32, COMM_SUM);
			break;
		}
		rc = comm_allreduce(c, x, n, COMM_FLOAT32, COMM_SUM);
	}
	record_failure(c, me, rc);
	free(x);
}

START_TEST(killed_peer_process_fails_every_other_rank_within_seconds)
{
	const struct layout lay = { 2, { 2, 3 } };
	struct hier_job job = { do_until_failure, NULL };
	int status[MAXNODES];
	uint64_t res[MAXNODES];

	/* the clean error of the error-handling endpoints, also between
	 * processes of this one machine (see lib/comm/ucx.c) */
	setenv("STORK_UCX_PEER_ONLY", "1", 1);
	memset(shared, 0, sizeof *shared);
	run_nodes(&lay, hier_node, &job, 1, 1.0, status, res);
	ck_assert(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL);
	assert_nodes_ok(&(struct layout){ 1, { 2 } }, status);  /* node 0 */
	for (int g = 0; g < 2; g++)
		assert_failed_soon(g, "failed", "node 1 (ranks 2-4, peer process) failed:", 0);
}
END_TEST

START_TEST(abort_wakes_the_node_and_the_other_node_fails_when_it_exits)
{
	const struct layout lay = { 2, { 3, 2 } };
	struct hier_job job = { do_until_failure, "abort" };
	int status[MAXNODES];
	uint64_t res[MAXNODES];

	/* the clean error of the error-handling endpoints, also between
	 * processes of this one machine (see lib/comm/ucx.c) */
	setenv("STORK_UCX_PEER_ONLY", "1", 1);
	memset(shared, 0, sizeof *shared);
	run_nodes(&lay, hier_node, &job, -1, 0, status, res);
	assert_nodes_ok(&lay, status);
	for (int g = 0; g < 5; g++)
		assert_failed_soon(g, "failed", g < 3 ? "test abort" :
				   "node 0 (ranks 0-2, peer process) failed:", g < 3);
}
END_TEST

/* Plain UCX world, one rank per process: rank 1 is killed mid all-reduce. */
static void ucx_until_failure(struct node_ctx *n, void *arg)
{
	struct comm *c;
	size_t cnt = 1 << 20;
	float *x = calloc(cnt, sizeof *x);
	int rc;
	char why[128];

	(void)arg;
	if ((rc = comm_ucx_world(n->u, n->node, n->lay->nnodes, n->addrs, &c))) {
		child_fail("rank %d: comm_ucx_world: %s", n->node, comm_strerror(rc));
		return;
	}
	while (!(rc = comm_allreduce(c, x, cnt, COMM_FLOAT32, COMM_SUM)))
		;
	shared->failed_at[n->node] = now();
	shared->rc[n->node] = rc;
	snprintf(shared->reason[n->node], sizeof shared->reason[n->node], "%s",
		 comm_abort_reason(c));
	n->result = (uint64_t)comm_ucx_failed_peer(n->u, why, sizeof why);
	CHILD_CHECK(comm_barrier(c) == COMM_EABORTED, "a call after the failure did not fail");
	comm_free(c);
	free(x);
}

START_TEST(ucx_names_the_killed_peer_within_seconds)
{
	const struct layout lay = { 2, { 1, 1 } };
	int status[MAXNODES];
	uint64_t res[MAXNODES];
	double dt;

	/* the clean error of the error-handling endpoints, also between
	 * processes of this one machine (see lib/comm/ucx.c) */
	setenv("STORK_UCX_PEER_ONLY", "1", 1);
	memset(shared, 0, sizeof *shared);
	run_nodes(&lay, ucx_until_failure, NULL, 1, 1.0, status, res);
	ck_assert(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL);
	assert_nodes_ok(&(struct layout){ 1, { 1 } }, status);  /* node 0 */
	dt = shared->failed_at[0] - shared->killed_at;
	fprintf(stderr, "rank 0 failed %.2f s after the kill: %s\n", dt, shared->reason[0]);
	ck_assert_int_eq(shared->rc[0], COMM_EABORTED);
	ck_assert_msg(dt >= 0 && dt < 10, "rank 0 failed %.1f s after the kill", dt);
	ck_assert_msg(strncmp(shared->reason[0], "rank 1 (peer process) failed: ", 30) == 0,
		      "reason '%s'", shared->reason[0]);
	ck_assert_uint_eq(res[0], 1);
}
END_TEST

/* Node 1 believes node 0 has 2 ranks; both must refuse. */
static void mismatch_node(struct node_ctx *n, void *arg)
{
	int mine[2] = { n->lay->count[0] + (n->node == 1), n->lay->count[1] };
	struct comm_world *w = comm_world_create(mine[n->node]);
	struct comm_hier *h = NULL;
	int rc = comm_hier_create(w, n->u, n->node, 2, n->addrs, mine, &h);

	(void)arg;
	CHILD_CHECK(rc == COMM_EINVAL && !h, "node %d: a mismatched layout gave %s", n->node,
		    comm_strerror(rc));
	comm_hier_destroy(h);
	comm_world_destroy(w);
}

START_TEST(mismatched_layouts_are_refused)
{
	/* node 1 claims a different layout than node 0 */
	struct layout lay = { 2, { 1, 1 } };
	int status[MAXNODES];
	uint64_t res[MAXNODES];

	run_nodes(&lay, mismatch_node, NULL, -1, 0, status, res);
	assert_nodes_ok(&lay, status);
}
END_TEST

static Suite *hier_suite(void)
{
	Suite *s = suite_create("comm_hier");
	TCase *tc = tcase_create("hier"), *tf = tcase_create("failures");
	int nl = (int)(sizeof layouts / sizeof layouts[0]);

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, allreduce_equals_in_node_then_node_order_fold, 0, nl);
	tcase_add_test(tc, reference_order_differs_from_the_flat_fold);
	tcase_add_test(tc, allreduce_is_deterministic_across_runs);
	tcase_add_loop_test(tc, reduce_scatter_gives_each_rank_its_segment_of_the_fold, 0, nl);
	tcase_add_loop_test(tc, allgather_places_global_rank_k_at_offset_k, 0, nl);
	tcase_add_loop_test(tc, broadcast_copies_the_roots_buffer_to_every_node, 0, nl);
	tcase_add_loop_test(tc, barrier_releases_no_rank_before_all_arrive, 0, nl);
	tcase_add_test(tc, split_makes_node_local_groups_and_refuses_others);
	tcase_add_test(tc, mismatched_layouts_are_refused);
	tcase_add_loop_test(tc, groups_across_nodes_fold_in_node_then_node_order_side_by_side, 0,
			    (int)(sizeof group_layouts / sizeof group_layouts[0]));
	tcase_add_loop_test(tc, send_recv_across_nodes_from_every_thread_at_once, 0,
			    (int)(sizeof group_layouts / sizeof group_layouts[0]));
	suite_add_tcase(s, tc);

	tcase_set_timeout(tf, 120);
	tcase_add_test(tf, ucx_names_the_killed_peer_within_seconds);
	tcase_add_test(tf, killed_peer_process_fails_every_other_rank_within_seconds);
	tcase_add_test(tf, abort_wakes_the_node_and_the_other_node_fails_when_it_exits);
	tcase_add_test(tf, killed_peer_wakes_a_rank_blocked_in_a_receive);
	tcase_add_loop_test(tf, a_size_mismatch_across_nodes_names_both_ranks_and_sizes, 0, 2);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hier_suite());
	int failed;

	shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		return EXIT_FAILURE;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
