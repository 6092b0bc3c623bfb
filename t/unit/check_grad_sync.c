/*
 * t/unit/check_grad_sync.c - the overlapped gradient all-reduce
 * (daemon/engine/parallel/grad_sync.c) over real in-process ranks (lib/comm's shared
 * memory backend).
 *
 * Three ranks hand the same pieces of a buffer, in the same groups and
 * order, to their communication threads while they go on working: small
 * pieces share buckets, one is larger than a bucket, and the result is
 * the bits of one all-reduce of the whole buffer; a second round reuses
 * the queue; an abort makes the wait return the error instead of hanging;
 * more pieces than planned are an error, not a hang.
 *
 * ZeRO-2/3's communication thread (comm_queue.c): jobs run in the order
 * handed, past the queue's 16 slots; a wait returns once its job has run;
 * after a failure no job behind it runs and every wait says so.
 */
#include "config.h"
#include "daemon/engine/parallel/comm_queue.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "kernels/ops.h"
#include "lib/comm/comm.h"
#include "lib/rng.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RANKS = 3, BIG = (1 << 20) + 1, N = 50000 + BIG + 250007, PIECES = 7 };

struct rank_arg {
	struct comm *c;
	float *whole, *pieces; /* the same inputs: reduced at once / piece by piece */
	double busy, wait;
	int rc, rc_round2;
};

static void fill(float *x, int rank)
{
	uint64_t st = rng_seed(5, (uint64_t)rank);

	for (size_t i = 0; i < N; i++)
		x[i] = rng_normal(&st, 0.0f, 1.0f);
}

/*
 * Cut [0, N) into PIECES uneven pieces, handed over from the end (as
 * layers go backwards) in two groups: the last three (a small one, one
 * larger than a bucket, a small one), then the first four (small: one
 * bucket).
 */
static void push_all(struct grad_sync *g, float *x)
{
	size_t cut[PIECES + 1] = { 0, 1, 17, 4096, 4097, 50000, 50000 + BIG, N };
	float *p[PIECES];
	size_t n[PIECES];

	for (int k = 0; k < PIECES; k++) {
		p[k] = x + cut[PIECES - 1 - k];
		n[k] = cut[PIECES - k] - cut[PIECES - 1 - k];
	}
	grad_sync_push(g, p, n, 3);
	grad_sync_push(g, p + 3, n + 3, PIECES - 3);
}

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	struct grad_sync *g;

	a->rc = -99;
	if (grad_sync_start(&g, a->c, &ops_cpu, PIECES, NULL, NULL) < 0)
		return NULL;
	push_all(g, a->pieces);
	/* the rank works on while its pieces are reduced, and uses no collective */
	a->rc = grad_sync_wait(g, &a->busy, &a->wait);
	/* a second step on the same thread and queue */
	push_all(g, a->pieces);
	a->rc_round2 = grad_sync_wait(g, &a->busy, &a->wait);
	grad_sync_stop(g);
	/* the communicator is the rank's again */
	if (comm_allreduce(a->c, a->whole, N, COMM_FLOAT32, COMM_SUM) < 0)
		a->rc = -98;
	if (comm_allreduce(a->c, a->whole, N, COMM_FLOAT32, COMM_SUM) < 0)
		a->rc = -97;
	return NULL;
}

START_TEST(test_pieces_reduce_to_the_bits_of_one_allreduce)
{
	struct comm_world *w = comm_world_create(RANKS);
	struct rank_arg a[RANKS];
	pthread_t th[RANKS];

	ck_assert_ptr_nonnull(w);
	for (int r = 0; r < RANKS; r++) {
		a[r] = (struct rank_arg){ .c = comm_world_rank(w, r), .whole = malloc(N * sizeof(float)),
					  .pieces = malloc(N * sizeof(float)) };
		ck_assert(a[r].whole && a[r].pieces);
		fill(a[r].whole, r);
		fill(a[r].pieces, r);
		ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, &a[r]), 0);
	}
	for (int r = 0; r < RANKS; r++) {
		pthread_join(th[r], NULL);
		ck_assert_int_eq(a[r].rc, 0);
		ck_assert_int_eq(a[r].rc_round2, 0);
		ck_assert(a[r].busy > 0.0);
		ck_assert(!memcmp(a[r].whole, a[r].pieces, N * sizeof(float)));
		ck_assert(!memcmp(a[0].pieces, a[r].pieces, N * sizeof(float)));
	}
	for (int r = 0; r < RANKS; r++) {
		free(a[r].whole);
		free(a[r].pieces);
	}
	comm_world_destroy(w);
}
END_TEST

/* One rank aborts instead of taking part: the other's wait returns the abort. */
START_TEST(test_an_abort_ends_the_wait_with_its_error)
{
	struct comm_world *w = comm_world_create(2);
	struct grad_sync *g;
	float x[64] = { 0 }, *p = x;
	size_t n = 64;
	double busy, wait;

	ck_assert_int_eq(grad_sync_start(&g, comm_world_rank(w, 0), &ops_cpu, 4, NULL, NULL), 0);
	grad_sync_push(g, &p, &n, 1);
	comm_abort(comm_world_rank(w, 1), "rank 1 failed");
	ck_assert_int_eq(grad_sync_wait(g, &busy, &wait), COMM_EABORTED);
	grad_sync_stop(g);
	comm_world_destroy(w);
}
END_TEST

/* More pieces than the plan has room for: an error at the wait, not a hang or an overflow. */
START_TEST(test_too_many_pieces_is_an_error)
{
	struct comm_world *w = comm_world_create(1);
	struct grad_sync *g;
	float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	float *p[4] = { x, x + 2, x + 4, x + 6 };
	size_t n[4] = { 2, 2, 2, 2 }, all = 8;
	double busy, wait;

	ck_assert_int_eq(grad_sync_start(&g, comm_world_rank(w, 0), &ops_cpu, 2, NULL, NULL), 0);
	grad_sync_push(g, p, n, 4);
	ck_assert_int_eq(grad_sync_wait(g, &busy, &wait), COMM_EINVAL);
	grad_sync_push(g, p, &all, 1); /* the next round starts clean */
	ck_assert_int_eq(grad_sync_wait(g, &busy, &wait), 0);
	grad_sync_stop(g);
	comm_world_destroy(w);
}
END_TEST

/* What the jobs of the queue tests did, in the order they ran. */
struct job_log {
	int ran[64], n;
};

/* Job a of the log: the first sleeps, so the rank hands the rest while it runs; b: its return. */
static int logged_job(void *arg, int a, int b)
{
	struct job_log *log = arg;

	if (a == 0)
		usleep(20000);
	log->ran[log->n++] = a;
	return b;
}

START_TEST(test_queue_runs_jobs_in_order_and_waits_for_one)
{
	struct comm_queue *q;
	struct job_log log = { .n = 0 };
	long ticket[40];

	ck_assert_int_eq(comm_queue_start(&q, NULL), 0);
	for (int i = 0; i < 40; i++) /* more than the 16 slots: the rank waits for room */
		ticket[i] = comm_queue_push(q, logged_job, &log, i, 0);
	ck_assert_int_eq(ticket[0], 1);
	ck_assert_int_eq(ticket[39], 40);
	ck_assert_int_eq(comm_queue_wait(q, ticket[20]), 0);
	ck_assert_int_ge(log.n, 21); /* job 20 and all before it have run */
	ck_assert_int_eq(comm_queue_drain(q), 0);
	ck_assert_int_eq(log.n, 40);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(log.ran[i], i);
	comm_queue_stop(q);
}
END_TEST

START_TEST(test_queue_runs_nothing_after_a_failure)
{
	struct comm_queue *q;
	struct job_log log = { .n = 0 };
	long first, failing, last;

	ck_assert_int_eq(comm_queue_start(&q, NULL), 0);
	first = comm_queue_push(q, logged_job, &log, 0, 0);
	failing = comm_queue_push(q, logged_job, &log, 1, COMM_EABORTED);
	comm_queue_push(q, logged_job, &log, 2, 0);
	last = comm_queue_push(q, logged_job, &log, 3, 0);
	ck_assert_int_eq(comm_queue_wait(q, last), COMM_EABORTED);
	ck_assert_int_eq(comm_queue_wait(q, failing), COMM_EABORTED);
	ck_assert_int_eq(comm_queue_wait(q, first), COMM_EABORTED); /* the failure is the queue's */
	ck_assert_int_eq(log.n, 2);
	ck_assert_int_eq(log.ran[1], 1);
	comm_queue_stop(q);
	comm_queue_stop(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grad_sync");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pieces_reduce_to_the_bits_of_one_allreduce);
	tcase_add_test(tc, test_an_abort_ends_the_wait_with_its_error);
	tcase_add_test(tc, test_too_many_pieces_is_an_error);
	tcase_add_test(tc, test_queue_runs_jobs_in_order_and_waits_for_one);
	tcase_add_test(tc, test_queue_runs_nothing_after_a_failure);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
