/*
 * t/unit/check_comm.c - the collectives of lib/comm/comm.h on the in-node shared
 * memory backend: every collective with 1 to 5 rank threads and odd counts,
 * compared bitwise with a serial reference that folds in rank order (the
 * order lib/comm/comm.h promises), plus split, determinism and abort.
 */
#include "config.h"
#include "lib/comm/comm.h"
#include "lib/rng.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXR 8

static const size_t counts[] = { 0, 1, 7, 33, 1023, 40009 };
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* ---------------------------------------------------------------- harness */

typedef void rank_fn(struct comm *c, void *arg);

struct thread_arg {
	struct comm *c;
	rank_fn *fn;
	void *arg;
};

static void *thread_main(void *p)
{
	struct thread_arg *ta = p;

	ta->fn(ta->c, ta->arg);
	return NULL;
}

/* Run fn on n rank threads of a fresh shared-memory world. */
static void run_shm_ranks(int n, rank_fn *fn, void *arg)
{
	struct comm_world *w = comm_world_create(n);
	pthread_t th[MAXR];
	struct thread_arg ta[MAXR];

	ck_assert_ptr_nonnull(w);
	for (int r = 0; r < n; r++) {
		ta[r] = (struct thread_arg){ comm_world_rank(w, r), fn, arg };
		ck_assert_int_eq(pthread_create(&th[r], NULL, thread_main, &ta[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	comm_world_destroy(w);
}

/* Run fn on n rank threads, each with its own UCX context and worker,
 * connected through the addresses they publish (what the rendezvous does
 * between processes). */
struct ucx_thread {
	int rank, n;
	rank_fn *fn;
	void *arg;
	const void **addrs;
	pthread_barrier_t *bar;
	int rc;
};

static void *ucx_thread_main(void *p)
{
	struct ucx_thread *ut = p;
	struct comm_ucx *u;
	struct comm *c;
	size_t len;

	ut->rc = comm_ucx_open(&u, &ut->addrs[ut->rank], &len);
	pthread_barrier_wait(ut->bar);
	if (ut->rc)
		return NULL;
	ut->rc = comm_ucx_world(u, ut->rank, ut->n, ut->addrs, &c);
	if (!ut->rc) {
		ut->fn(c, ut->arg);
		comm_free(c);
	}
	comm_ucx_close(u);
	return NULL;
}

static void run_ucx_ranks(int n, rank_fn *fn, void *arg)
{
	pthread_t th[MAXR];
	struct ucx_thread ut[MAXR];
	const void *addrs[MAXR];
	pthread_barrier_t bar;

	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int r = 0; r < n; r++) {
		ut[r] = (struct ucx_thread){ r, n, fn, arg, addrs, &bar, 0 };
		ck_assert_int_eq(pthread_create(&th[r], NULL, ucx_thread_main, &ut[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	pthread_barrier_destroy(&bar);
	for (int r = 0; r < n; r++)
		ck_assert_msg(ut[r].rc == COMM_OK, "rank %d: UCX setup: %s", r,
			      comm_strerror(ut[r].rc));
}

/* The backend under test: the shm test case sets run_shm_ranks, the ucx one
 * run_ucx_ranks. */
static void (*run_ranks)(int n, rank_fn *fn, void *arg) = run_shm_ranks;

static void use_ucx(void)
{
	run_ranks = run_ucx_ranks;
}

/* Floats of widely varying magnitude and sign, so addition order shows in the bits. */
static void fill_f32(float *x, size_t count, int rank, uint64_t salt)
{
	uint64_t s = rng_seed(salt, (uint64_t)rank);

	for (size_t i = 0; i < count; i++)
		x[i] = rng_normal(&s, 0.0f, 1.0f) * (float)(1u << rng_below(&s, 20)) /
		       (float)(1u << 10);
}

static void fill_i32(int32_t *x, size_t count, int rank, uint64_t salt)
{
	uint64_t s = rng_seed(salt, (uint64_t)rank);

	for (size_t i = 0; i < count; i++)
		x[i] = (int32_t)rng_u32(&s);
}

/* The serial reference: left fold over ranks 0..n-1, written independently. */
static float ref_f32(float a, float b, enum comm_op op)
{
	if (op == COMM_SUM)
		return a + b;
	if (op == COMM_MAX)
		return b > a ? b : a;
	return b < a ? b : a;
}

static int32_t ref_i32(int32_t a, int32_t b, enum comm_op op)
{
	if (op == COMM_SUM)
		return (int32_t)((uint32_t)a + (uint32_t)b);
	if (op == COMM_MAX)
		return b > a ? b : a;
	return b < a ? b : a;
}

static void reference(int n, size_t count, enum comm_dtype t, enum comm_op op,
		      uint64_t salt, void *out)
{
	void *x = malloc(count * 4 + 4);

	for (int r = 0; r < n; r++) {
		if (t == COMM_FLOAT32)
			fill_f32(x, count, r, salt);
		else
			fill_i32(x, count, r, salt);
		for (size_t i = 0; i < count; i++) {
			if (t == COMM_FLOAT32) {
				float *o = out;
				o[i] = r ? ref_f32(o[i], ((float *)x)[i], op) : ((float *)x)[i];
			} else {
				int32_t *o = out;
				o[i] = r ? ref_i32(o[i], ((int32_t *)x)[i], op) : ((int32_t *)x)[i];
			}
		}
	}
	free(x);
}

/* ------------------------------------------------------------- all-reduce */

struct reduce_case {
	size_t count;
	enum comm_dtype t;
	enum comm_op op;
	uint64_t salt;
	void *out[MAXR];     /* each rank's result */
	int rc[MAXR];
};

static void fill(void *x, const struct reduce_case *rc, int rank, size_t count)
{
	if (rc->t == COMM_FLOAT32)
		fill_f32(x, count, rank, rc->salt);
	else
		fill_i32(x, count, rank, rc->salt);
}

static void do_allreduce(struct comm *c, void *arg)
{
	struct reduce_case *k = arg;
	int r = comm_rank(c);

	k->out[r] = malloc(k->count * 4 + 4);
	fill(k->out[r], k, r, k->count);
	k->rc[r] = comm_allreduce(c, k->out[r], k->count, k->t, k->op);
}

static void check_case(int n, struct reduce_case *k, size_t refcount,
		       void (*ref)(int, struct reduce_case *, void *))
{
	void *want = malloc(refcount * 4 + 4);

	ref(n, k, want);
	for (int r = 0; r < n; r++) {
		ck_assert_int_eq(k->rc[r], COMM_OK);
		ck_assert_msg(!memcmp(k->out[r], want, refcount * 4),
			      "n=%d count=%zu type=%d op=%d: rank %d differs from the "
			      "rank-order fold", n, k->count, k->t, k->op, r);
		free(k->out[r]);
	}
	free(want);
}

static void ref_allreduce(int n, struct reduce_case *k, void *want)
{
	reference(n, k->count, k->t, k->op, k->salt, want);
}

static void allreduce_all(int n)
{
	static const enum comm_dtype types[] = { COMM_FLOAT32, COMM_INT32 };
	static const enum comm_op ops[] = { COMM_SUM, COMM_MAX, COMM_MIN };

	for (size_t ci = 0; ci < NCOUNTS; ci++)
		for (int ti = 0; ti < 2; ti++)
			for (int oi = 0; oi < 3; oi++) {
				struct reduce_case k = { counts[ci], types[ti], ops[oi],
							 1000 + ci, { 0 }, { 0 } };

				run_ranks(n, do_allreduce, &k);
				check_case(n, &k, k.count, ref_allreduce);
			}
}

START_TEST(allreduce_equals_rank_order_fold)
{
	allreduce_all(_i);
}
END_TEST

/* The fold order matters for floats: a different order gives other bits, so
 * the bitwise comparisons above can fail. */
START_TEST(reference_order_is_observable)
{
	size_t count = 1023;
	float *a = malloc(count * 4), *b = malloc(count * 4), *x = malloc(count * 4);
	int differ = 0;

	reference(5, count, COMM_FLOAT32, COMM_SUM, 7, a);
	for (int r = 4; r >= 0; r--) {
		fill_f32(x, count, r, 7);
		for (size_t i = 0; i < count; i++)
			b[i] = r == 4 ? x[i] : b[i] + x[i];
	}
	differ = memcmp(a, b, count * 4) != 0;
	ck_assert_msg(differ, "reverse order gave the same bits: test data too tame");
	free(a), free(b), free(x);
}
END_TEST

START_TEST(allreduce_is_deterministic_across_runs)
{
	size_t count = 100003;
	void *first[MAXR];
	int n = 4;

	for (int run = 0; run < 3; run++) {
		struct reduce_case k = { count, COMM_FLOAT32, COMM_SUM, 99, { 0 }, { 0 } };

		run_ranks(n, do_allreduce, &k);
		for (int r = 0; r < n; r++) {
			ck_assert_int_eq(k.rc[r], COMM_OK);
			if (run == 0) {
				first[r] = k.out[r];
				continue;
			}
			ck_assert(!memcmp(first[r], k.out[r], count * 4));
			ck_assert(!memcmp(first[0], k.out[r], count * 4));
			free(k.out[r]);
		}
	}
	for (int r = 0; r < n; r++)
		free(first[r]);
}
END_TEST

/* --------------------------------------------------------- reduce-scatter */

static void do_reduce_scatter(struct comm *c, void *arg)
{
	struct reduce_case *k = arg;
	int r = comm_rank(c), n = comm_size(c);
	void *send = malloc(k->count * (size_t)n * 4 + 4);

	fill(send, k, r, k->count * (size_t)n);
	k->out[r] = malloc(k->count * 4 + 4);
	k->rc[r] = comm_reduce_scatter(c, send, k->out[r], k->count, k->t, k->op);
	free(send);
}

START_TEST(reduce_scatter_gives_each_rank_its_segment_of_the_fold)
{
	int n = _i;
	static const enum comm_op ops[] = { COMM_SUM, COMM_MAX, COMM_MIN };

	for (size_t ci = 0; ci < NCOUNTS; ci++)
		for (int ti = 0; ti < 2; ti++)
			for (int oi = 0; oi < 3; oi++) {
				enum comm_dtype t = ti ? COMM_INT32 : COMM_FLOAT32;
				struct reduce_case k = { counts[ci], t, ops[oi], 5 + ci,
							 { 0 }, { 0 } };
				size_t total = k.count * (size_t)n;
				char *want = malloc(total * 4 + 4);

				run_ranks(n, do_reduce_scatter, &k);
				reference(n, total, t, ops[oi], k.salt, want);
				for (int r = 0; r < n; r++) {
					ck_assert_int_eq(k.rc[r], COMM_OK);
					ck_assert_msg(!memcmp(k.out[r], want + (size_t)r * k.count * 4,
							      k.count * 4),
						      "n=%d count=%zu: rank %d segment wrong",
						      n, k.count, r);
					free(k.out[r]);
				}
				free(want);
			}
}
END_TEST

/* ------------------------------------------------------ all-gather, bcast */

struct gather_case {
	size_t count;
	int in_place;
	int root;
	int32_t *out[MAXR];
	int rc[MAXR];
};

static int32_t tag(int rank, size_t i)
{
	return (int32_t)(rank * 1000003 + (int)i);
}

static void do_allgather(struct comm *c, void *arg)
{
	struct gather_case *k = arg;
	int r = comm_rank(c), n = comm_size(c);
	int32_t *recv = calloc(k->count * (size_t)n + 1, 4);
	int32_t *send = k->in_place ? recv + (size_t)r * k->count : malloc(k->count * 4 + 4);

	for (size_t i = 0; i < k->count; i++)
		send[i] = tag(r, i);
	k->rc[r] = comm_allgather(c, send, recv, k->count, COMM_INT32);
	k->out[r] = recv;
	if (!k->in_place)
		free(send);
}

START_TEST(allgather_places_rank_k_at_offset_k)
{
	int n = _i;

	for (int in_place = 0; in_place < 2; in_place++)
		for (size_t ci = 0; ci < NCOUNTS; ci++) {
			struct gather_case k = { counts[ci], in_place, 0, { 0 }, { 0 } };

			run_ranks(n, do_allgather, &k);
			for (int r = 0; r < n; r++) {
				ck_assert_int_eq(k.rc[r], COMM_OK);
				for (int s = 0; s < n; s++)
					for (size_t i = 0; i < k.count; i++)
						ck_assert_int_eq(k.out[r][(size_t)s * k.count + i],
								 tag(s, i));
				free(k.out[r]);
			}
		}
}
END_TEST

static void do_broadcast(struct comm *c, void *arg)
{
	struct gather_case *k = arg;
	int r = comm_rank(c);
	int32_t *buf = malloc(k->count * 4 + 4);

	for (size_t i = 0; i < k->count; i++)
		buf[i] = tag(r, i);
	k->rc[r] = comm_broadcast(c, buf, k->count, COMM_INT32, k->root);
	k->out[r] = buf;
}

START_TEST(broadcast_copies_the_roots_buffer_everywhere)
{
	int n = _i;

	for (int root = 0; root < n; root++)
		for (size_t ci = 0; ci < NCOUNTS; ci++) {
			struct gather_case k = { counts[ci], 0, root, { 0 }, { 0 } };

			run_ranks(n, do_broadcast, &k);
			for (int r = 0; r < n; r++) {
				ck_assert_int_eq(k.rc[r], COMM_OK);
				for (size_t i = 0; i < k.count; i++)
					ck_assert_int_eq(k.out[r][i], tag(root, i));
				free(k.out[r]);
			}
		}
}
END_TEST

/* ---------------------------------------------------------------- barrier */

#define BARRIER_ROUNDS 200

struct barrier_case {
	atomic_int arrived[BARRIER_ROUNDS];
	atomic_int early;     /* times a rank left before all had arrived */
	int rc[MAXR];
};

static void do_barrier(struct comm *c, void *arg)
{
	struct barrier_case *k = arg;
	int n = comm_size(c);

	for (int i = 0; i < BARRIER_ROUNDS; i++) {
		if ((i + comm_rank(c)) % 7 == 0)
			usleep(100);
		atomic_fetch_add(&k->arrived[i], 1);
		k->rc[comm_rank(c)] |= comm_barrier(c);
		if (atomic_load(&k->arrived[i]) != n)
			atomic_fetch_add(&k->early, 1);
	}
}

START_TEST(barrier_releases_no_rank_before_all_arrive)
{
	struct barrier_case *k = calloc(1, sizeof *k);

	run_ranks(_i, do_barrier, k);
	for (int r = 0; r < _i; r++)
		ck_assert_int_eq(k->rc[r], COMM_OK);
	ck_assert_int_eq(atomic_load(&k->early), 0);
	free(k);
}
END_TEST

/* ------------------------------------------------------------------ split */

struct split_case {
	int n;
	int newrank[MAXR], newsize[MAXR], isnull[MAXR];
	float sum[MAXR];
	int rc[MAXR];
};

/* color = rank % 3 except rank 4 stays out; key = -rank reverses the order. */
static void do_split(struct comm *c, void *arg)
{
	struct split_case *k = arg;
	int r = comm_rank(c);
	struct comm *sub;
	int color = r == 4 ? COMM_UNDEFINED : r % 3;
	float x[3] = { 1.0f + (float)r, 1e8f, -1e8f };

	k->rc[r] = comm_split(c, color, -r, &sub);
	k->isnull[r] = sub == NULL;
	if (!sub) {
		k->rc[r] |= comm_barrier(c);
		return;
	}
	k->newrank[r] = comm_rank(sub);
	k->newsize[r] = comm_size(sub);
	/* The fold runs in the new rank order: 1e8 + (-1e8) cancel only if the
	 * ranks' order is the one promised; the small values show up too. */
	x[1] = comm_rank(sub) == 0 ? 1e8f : (float)(r + 1) * 0.25f;
	k->rc[r] |= comm_allreduce(sub, x, 3, COMM_FLOAT32, COMM_SUM);
	k->sum[r] = x[1];
	k->rc[r] |= comm_barrier(sub);
	comm_free(sub);
	k->rc[r] |= comm_barrier(c);
}

START_TEST(split_groups_by_color_ordered_by_key)
{
	int n = _i;
	struct split_case k = { .n = n };

	run_ranks(n, do_split, &k);
	for (int r = 0; r < n; r++) {
		int color = r % 3, size = 0, pos = 0;
		float want;

		ck_assert_int_eq(k.rc[r], COMM_OK);
		if (r == 4) {
			ck_assert(k.isnull[r]);
			continue;
		}
		for (int s = 0; s < n; s++)
			if (s != 4 && s % 3 == color) {
				size++;
				pos += s > r; /* key -s: higher ranks come first */
			}
		ck_assert_int_eq(k.newsize[r], size);
		ck_assert_int_eq(k.newrank[r], pos);
		/* Fold in new-rank order: the highest old rank is new rank 0. */
		want = 0.0f;
		for (int s = n - 1, first = 1; s >= 0; s--) {
			if (s == 4 || s % 3 != color)
				continue;
			want = first ? 1e8f : want + (float)(s + 1) * 0.25f;
			first = 0;
		}
		ck_assert_msg(k.sum[r] == want, "rank %d: %g, want %g", r, k.sum[r], want);
	}
}
END_TEST

/* ------------------------------------------------------------------ abort */

struct abort_case {
	struct comm *sub_of[MAXR];
	int rc_blocked[MAXR];
	int rc_after[MAXR];
	char reason[MAXR][128];
	int variant;                    /* which case of a loop test */
};

/* Ranks 0..n-2 block in a barrier that rank n-1 never joins; it aborts. */
static void do_abort(struct comm *c, void *arg)
{
	struct abort_case *k = arg;
	int r = comm_rank(c), n = comm_size(c);
	float x = 1.0f;

	if (r == n - 1) {
		usleep(50000);
		comm_abort(c, "rank failed: test");
		k->rc_blocked[r] = COMM_EABORTED;
	} else if (r % 2) {
		k->rc_blocked[r] = comm_barrier(c);
	} else {
		k->rc_blocked[r] = comm_allreduce(c, &x, 1, COMM_FLOAT32, COMM_SUM);
	}
	k->rc_after[r] = comm_allreduce(c, &x, 1, COMM_FLOAT32, COMM_SUM);
	strncpy(k->reason[r], comm_abort_reason(c), sizeof k->reason[r] - 1);
}

START_TEST(abort_wakes_blocked_ranks_and_fails_later_calls)
{
	int n = _i;
	struct abort_case k;

	memset(&k, 0, sizeof k);
	run_ranks(n, do_abort, &k);
	for (int r = 0; r < n; r++) {
		ck_assert_int_eq(k.rc_blocked[r], COMM_EABORTED);
		ck_assert_int_eq(k.rc_after[r], COMM_EABORTED);
		ck_assert_str_eq(k.reason[r], "rank failed: test");
	}
}
END_TEST

/* A rank blocked in a sub-communicator is woken by an abort of the world. */
static void do_abort_sub(struct comm *c, void *arg)
{
	struct abort_case *k = arg;
	int r = comm_rank(c);
	struct comm *sub = NULL;

	k->rc_after[r] = comm_split(c, r == 0 ? 0 : 1, 0, &sub);
	if (r == 0) {
		usleep(50000);
		comm_abort(c, "stop");
		k->rc_blocked[r] = COMM_EABORTED;
	} else if (r == 1) {
		k->rc_blocked[r] = comm_barrier(sub); /* rank 2 never comes */
	} else {
		k->rc_blocked[r] = COMM_EABORTED;
	}
	comm_free(sub);
}

START_TEST(abort_reaches_sub_communicators)
{
	struct abort_case k;

	memset(&k, 0, sizeof k);
	run_ranks(3, do_abort_sub, &k);
	for (int r = 0; r < 3; r++) {
		ck_assert_int_eq(k.rc_after[r], COMM_OK);
		ck_assert_int_eq(k.rc_blocked[r], COMM_EABORTED);
	}
}
END_TEST

/*
 * Point-to-point: every rank first sends three messages of different sizes
 * to each neighbour on a ring (both directions at once: sends must not wait
 * for the receiver), then receives them; contents and order are checked.
 * In a sub-communicator too, so split groups carry messages.
 */
#define P2P_MSGS 3
static const size_t p2p_counts[P2P_MSGS] = { 1, 1000, 70001 };

struct p2p_case {
	int bad[MAXR];
	int rc[MAXR];
};

static float p2p_value(int src, int dst, int msg, size_t i)
{
	return (float)(src * 1000003 + dst * 1009 + msg * 101) + (float)i * 0.5f;
}

static int p2p_exchange(struct comm *c)
{
	int r = comm_rank(c), n = comm_size(c), bad = 0;
	int peers[2] = { (r + 1) % n, (r + n - 1) % n };
	float *buf = malloc(p2p_counts[P2P_MSGS - 1] * sizeof *buf);

	for (int p = 0; p < 2 && !(n == 2 && p == 1); p++)
		for (int m = 0; m < P2P_MSGS; m++) {
			for (size_t i = 0; i < p2p_counts[m]; i++)
				buf[i] = p2p_value(r, peers[p], m, i);
			if (comm_send(c, buf, p2p_counts[m], COMM_FLOAT32, peers[p]))
				bad++;
			memset(buf, 0, p2p_counts[m] * sizeof *buf); /* reusable at once */
		}
	for (int p = 0; p < 2 && !(n == 2 && p == 1); p++)
		for (int m = 0; m < P2P_MSGS; m++) {
			if (comm_recv(c, buf, p2p_counts[m], COMM_FLOAT32, peers[p])) {
				bad++;
				continue;
			}
			for (size_t i = 0; i < p2p_counts[m]; i++)
				bad += buf[i] != p2p_value(peers[p], r, m, i);
		}
	free(buf);
	return bad;
}

static void do_p2p(struct comm *c, void *arg)
{
	struct p2p_case *k = arg;
	int r = comm_rank(c);
	struct comm *sub = NULL;

	k->bad[r] = p2p_exchange(c);
	k->rc[r] = comm_split(c, r % 2, -r, &sub);
	if (!k->rc[r] && comm_size(sub) > 1)
		k->bad[r] += p2p_exchange(sub);
	comm_free(sub);
}

START_TEST(send_recv_deliver_in_order_without_waiting_for_the_receiver)
{
	int n = _i;
	struct p2p_case k;

	memset(&k, 0, sizeof k);
	run_ranks(n, do_p2p, &k);
	for (int r = 0; r < n; r++) {
		ck_assert_int_eq(k.rc[r], COMM_OK);
		ck_assert_int_eq(k.bad[r], 0);
	}
}
END_TEST

/*
 * comm_sendrecv: every rank sends to the next on a ring while it receives
 * from the one before, then exchanges with a partner that mirrors the call
 * (0 with 1, 2 with 3, ...: the pipeline's pairs), at each message size.
 */
static void do_sendrecv(struct comm *c, void *arg)
{
	struct p2p_case *k = arg;
	int r = comm_rank(c), n = comm_size(c), next = (r + 1) % n, prev = (r + n - 1) % n;
	int partner = r ^ 1;
	float *out = malloc(p2p_counts[P2P_MSGS - 1] * sizeof *out);
	float *in = malloc(p2p_counts[P2P_MSGS - 1] * sizeof *in);

	for (int m = 0; m < P2P_MSGS; m++) {
		for (size_t i = 0; i < p2p_counts[m]; i++)
			out[i] = p2p_value(r, next, m, i);
		k->rc[r] |= comm_sendrecv(c, out, p2p_counts[m], next, in, p2p_counts[m], prev,
					  COMM_FLOAT32);
		for (size_t i = 0; i < p2p_counts[m]; i++)
			k->bad[r] += in[i] != p2p_value(prev, r, m, i);
		if (partner >= n)
			continue;
		for (size_t i = 0; i < p2p_counts[m]; i++)
			out[i] = p2p_value(r, partner, m, i);
		k->rc[r] |= comm_sendrecv(c, out, p2p_counts[m], partner, in, p2p_counts[m],
					  partner, COMM_FLOAT32);
		for (size_t i = 0; i < p2p_counts[m]; i++)
			k->bad[r] += in[i] != p2p_value(partner, r, m, i);
	}
	free(out);
	free(in);
}

START_TEST(sendrecv_exchanges_with_neighbours_at_once)
{
	int n = _i;
	struct p2p_case k;

	memset(&k, 0, sizeof k);
	run_ranks(n, do_sendrecv, &k);
	for (int r = 0; r < n; r++) {
		ck_assert_int_eq(k.rc[r], COMM_OK);
		ck_assert_int_eq(k.bad[r], 0);
	}
}
END_TEST

/*
 * The same exchanges through a device communicator (lib/comm/device.c,
 * staged) whose "device memory" is an arena of host memory: the buffers
 * are device buffers to it, so each exchange goes device -> host, the
 * host communicator, host -> device, which the copy counters show.
 */
#define ARENA_FLOATS ((size_t)MAXR * 2 * 70001)
static float fake_device[ARENA_FLOATS];
static atomic_size_t fake_used;
static atomic_int to_host_calls, to_device_calls;

static int fake_is_device(const void *p)
{
	return (const float *)p >= fake_device && (const float *)p < fake_device + ARENA_FLOATS;
}

static void fake_to_host(void *dst, const void *src, size_t bytes)
{
	atomic_fetch_add(&to_host_calls, 1);
	memcpy(dst, src, bytes);
}

static void fake_to_device(void *dst, const void *src, size_t bytes)
{
	atomic_fetch_add(&to_device_calls, 1);
	memcpy(dst, src, bytes);
}

static void do_device_sendrecv(struct comm *c, void *arg)
{
	struct p2p_case *k = arg;
	const struct comm_device_memory mem = { fake_is_device, fake_to_host, fake_to_device,
						 malloc, free, "fake" };
	int r = comm_rank(c), n = comm_size(c), next = (r + 1) % n, prev = (r + n - 1) % n;
	size_t most = p2p_counts[P2P_MSGS - 1];
	float *out = fake_device + atomic_fetch_add(&fake_used, 2 * most), *in = out + most;
	struct comm *d = NULL;
	char err[256];

	k->rc[r] = comm_device_wrap(c, &mem, COMM_DEVICE_STAGED, &d, err, sizeof err);
	for (int m = 0; m < P2P_MSGS && !k->rc[r]; m++) {
		for (size_t i = 0; i < p2p_counts[m]; i++)
			out[i] = p2p_value(r, next, m, i);
		k->rc[r] = comm_sendrecv(d, out, p2p_counts[m], next, in, p2p_counts[m], prev,
					 COMM_FLOAT32);
		for (size_t i = 0; i < p2p_counts[m]; i++)
			k->bad[r] += in[i] != p2p_value(prev, r, m, i);
	}
	comm_free(d);
}

START_TEST(device_sendrecv_stages_device_buffers)
{
	int n = _i;
	struct p2p_case k;

	memset(&k, 0, sizeof k);
	atomic_store(&fake_used, 0);
	atomic_store(&to_host_calls, 0);
	atomic_store(&to_device_calls, 0);
	run_ranks(n, do_device_sendrecv, &k);
	for (int r = 0; r < n; r++) {
		ck_assert_int_eq(k.rc[r], COMM_OK);
		ck_assert_int_eq(k.bad[r], 0);
	}
	ck_assert_int_eq(atomic_load(&to_host_calls), n * P2P_MSGS);
	ck_assert_int_eq(atomic_load(&to_device_calls), n * P2P_MSGS);
}
END_TEST

/* A receive that no send will satisfy is woken by an abort; a size mismatch aborts. */
static void do_p2p_abort(struct comm *c, void *arg)
{
	struct abort_case *k = arg;
	int r = comm_rank(c);
	float x[2] = { 1, 2 };

	if (r == 0) {
		usleep(50000);
		comm_abort(c, "stage failed");
		k->rc_blocked[r] = COMM_EABORTED;
	} else {
		k->rc_blocked[r] = comm_recv(c, x, 2, COMM_FLOAT32, 0);
	}
	strncpy(k->reason[r], comm_abort_reason(c), sizeof k->reason[r] - 1);
}

START_TEST(abort_wakes_a_blocked_receiver)
{
	struct abort_case k;

	memset(&k, 0, sizeof k);
	run_ranks(2, do_p2p_abort, &k);
	ck_assert_int_eq(k.rc_blocked[1], COMM_EABORTED);
	ck_assert_str_eq(k.reason[1], "stage failed");
}
END_TEST

/* Element counts of a mismatched pair: the receiver expects want, the sender sends sent. */
static const size_t mismatch[3][2] = {
	{ 2, 1 },                       /* fewer than expected */
	{ 1, 2 },                       /* more */
	{ 1 << 18, 1 << 20 },           /* more, past UCX's eager limit (rendezvous) */
};

static void do_p2p_mismatch(struct comm *c, void *arg)
{
	struct abort_case *k = arg;
	int r = comm_rank(c), v = k->variant;
	size_t want = mismatch[v][0], sent = mismatch[v][1];
	float *x = calloc(want > sent ? want : sent, sizeof *x);

	if (r == 0)
		k->rc_blocked[r] = comm_send(c, x, sent, COMM_FLOAT32, 1);
	else
		k->rc_blocked[r] = comm_recv(c, x, want, COMM_FLOAT32, 0);
	k->rc_after[r] = comm_barrier(c);
	snprintf(k->reason[r], sizeof k->reason[r], "%s", comm_abort_reason(c));
	free(x);
}

/* The receiver names both ranks and both sizes, whichever side sent more. */
START_TEST(a_size_mismatch_aborts_the_world)
{
	struct abort_case k;
	char expect[128];

	memset(&k, 0, sizeof k);
	k.variant = _i;
	run_ranks(2, do_p2p_mismatch, &k);
	/* the send is done before the receiver looks; it may see the abort on its way out */
	ck_assert(k.rc_blocked[0] == COMM_OK || k.rc_blocked[0] == COMM_EABORTED);
	ck_assert_int_eq(k.rc_blocked[1], COMM_EINVAL);
	ck_assert_int_eq(k.rc_after[1], COMM_EABORTED);
	ck_assert_int_eq(k.rc_after[0], COMM_EABORTED);
	snprintf(expect, sizeof expect, "rank 1 expected %zu bytes from rank 0, which sent %zu",
		 mismatch[_i][0] * 4, mismatch[_i][1] * 4);
	ck_assert_msg(strstr(k.reason[1], expect), "reason '%s'", k.reason[1]);
}
END_TEST

/*
 * Two live splits of the same ranks (colors chosen so that an earlier,
 * hashed id scheme gave both the same id): rank 0 sends on a then on b,
 * rank 1 receives on b first. Each message must reach its own communicator;
 * then each sub-communicator's all-reduce still works.
 */
static void do_two_splits(struct comm *c, void *arg)
{
	int *bad = arg, r = comm_rank(c);
	struct comm *a = NULL, *b = NULL;
	int32_t x = 0, y = 0;

	bad[r] += comm_split(c, 7, r, &a) != COMM_OK;
	bad[r] += comm_split(c, 0, r, &b) != COMM_OK;
	if (!a || !b)
		goto out;
	if (r == 0) {
		bad[r] += comm_send(a, &(int32_t){ 'a' }, 1, COMM_INT32, 1) != COMM_OK;
		bad[r] += comm_send(b, &(int32_t){ 'b' }, 1, COMM_INT32, 1) != COMM_OK;
	} else if (r == 1) {
		bad[r] += comm_recv(b, &y, 1, COMM_INT32, 0) != COMM_OK || y != 'b';
		bad[r] += comm_recv(a, &x, 1, COMM_INT32, 0) != COMM_OK || x != 'a';
	}
	x = r, y = 10 * r;
	bad[r] += comm_allreduce(a, &x, 1, COMM_INT32, COMM_SUM) != COMM_OK;
	bad[r] += comm_allreduce(b, &y, 1, COMM_INT32, COMM_SUM) != COMM_OK;
	bad[r] += x != comm_size(c) * (comm_size(c) - 1) / 2 || y != 10 * x;
out:
	comm_free(a);
	comm_free(b);
}

START_TEST(messages_of_two_communicators_never_mix)
{
	int bad[MAXR] = { 0 };

	run_ranks(3, do_two_splits, bad);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(!bad[r], "rank %d: %d wrong results", r, bad[r]);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
	struct comm_world *w = comm_world_create(2);
	struct comm *c = comm_world_rank(w, 0);
	float x = 0;

	ck_assert_ptr_null(comm_world_create(0));
	ck_assert_ptr_null(comm_world_rank(w, 2));
	ck_assert_int_eq(comm_broadcast(c, &x, 1, COMM_FLOAT32, 2), COMM_EINVAL);
	ck_assert_int_eq(comm_broadcast(c, &x, 1, COMM_FLOAT32, -1), COMM_EINVAL);
	ck_assert_int_eq(comm_allreduce(c, &x, 1, (enum comm_dtype)42, COMM_SUM), COMM_EINVAL);
	ck_assert_int_eq(comm_allreduce(c, &x, 1, COMM_FLOAT32, (enum comm_op)9), COMM_EINVAL);
	ck_assert_int_eq(comm_allreduce(c, NULL, 1, COMM_FLOAT32, COMM_SUM), COMM_EINVAL);
	ck_assert_int_eq(comm_send(c, &x, 1, COMM_FLOAT32, 0), COMM_EINVAL); /* self */
	ck_assert_int_eq(comm_send(c, &x, 1, COMM_FLOAT32, 2), COMM_EINVAL);
	ck_assert_int_eq(comm_recv(c, &x, 1, COMM_FLOAT32, -1), COMM_EINVAL);
	comm_world_destroy(w);
}
END_TEST

static Suite *comm_suite(void)
{
	Suite *s = suite_create("comm");
	TCase *tc = tcase_create("shm"), *tu;

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, allreduce_equals_rank_order_fold, 1, 6);
	tcase_add_test(tc, reference_order_is_observable);
	tcase_add_test(tc, allreduce_is_deterministic_across_runs);
	tcase_add_loop_test(tc, reduce_scatter_gives_each_rank_its_segment_of_the_fold, 1, 6);
	tcase_add_loop_test(tc, allgather_places_rank_k_at_offset_k, 1, 6);
	tcase_add_loop_test(tc, broadcast_copies_the_roots_buffer_everywhere, 1, 6);
	tcase_add_loop_test(tc, barrier_releases_no_rank_before_all_arrive, 1, 6);
	tcase_add_loop_test(tc, split_groups_by_color_ordered_by_key, 1, 6);
	tcase_add_loop_test(tc, abort_wakes_blocked_ranks_and_fails_later_calls, 1, 6);
	tcase_add_test(tc, abort_reaches_sub_communicators);
	tcase_add_loop_test(tc, send_recv_deliver_in_order_without_waiting_for_the_receiver, 2, 6);
	tcase_add_loop_test(tc, sendrecv_exchanges_with_neighbours_at_once, 2, 6);
	tcase_add_loop_test(tc, device_sendrecv_stages_device_buffers, 2, 5);
	tcase_add_test(tc, abort_wakes_a_blocked_receiver);
	tcase_add_loop_test(tc, a_size_mismatch_aborts_the_world, 0, 3);
	tcase_add_test(tc, messages_of_two_communicators_never_mix);
	tcase_add_test(tc, bad_arguments_are_refused);
	suite_add_tcase(s, tc);

	/* The same promises over UCX between rank threads (2 and 3 ranks). */
	tu = tcase_create("ucx");
	tcase_set_timeout(tu, 300);
	tcase_add_unchecked_fixture(tu, use_ucx, NULL);
	tcase_add_loop_test(tu, allreduce_equals_rank_order_fold, 2, 4);
	tcase_add_loop_test(tu, reduce_scatter_gives_each_rank_its_segment_of_the_fold, 2, 4);
	tcase_add_loop_test(tu, allgather_places_rank_k_at_offset_k, 2, 4);
	tcase_add_loop_test(tu, broadcast_copies_the_roots_buffer_everywhere, 2, 4);
	tcase_add_loop_test(tu, barrier_releases_no_rank_before_all_arrive, 2, 4);
	tcase_add_loop_test(tu, split_groups_by_color_ordered_by_key, 4, 5);
	tcase_add_loop_test(tu, send_recv_deliver_in_order_without_waiting_for_the_receiver, 2, 5);
	tcase_add_loop_test(tu, sendrecv_exchanges_with_neighbours_at_once, 2, 5);
	tcase_add_loop_test(tu, a_size_mismatch_aborts_the_world, 0, 3);
	tcase_add_test(tu, messages_of_two_communicators_never_mix);
	tcase_add_test(tu, allreduce_is_deterministic_across_runs);
	suite_add_tcase(s, tu);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(comm_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
