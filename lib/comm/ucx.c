/*
 * lib/comm/ucx.c - the collectives between processes over UCX (UCP tag API).
 *
 * Each process opens one UCX context and worker (comm_ucx_open) and
 * publishes the worker's address through the rendezvous; comm_ucx_world then
 * connects an endpoint to every peer. Messages carry a 64-bit tag: the
 * communicator id (16 bits), a round number every rank counts the same way
 * (32 bits) and the sender's rank (16 bits), so every receive matches
 * exactly one send.
 *
 * The fold order of lib/comm/comm.h is kept: all-reduce and reduce-scatter send
 * chunk k of every rank directly to rank k (the chunks of lib/comm/shm.c),
 * which folds the n contributions in rank order 0..n-1 into its chunk; the
 * all-reduce then passes the reduced chunks around a ring (all-gather). Each
 * rank sends and receives (n-1)/n of the buffer per phase, as a ring does.
 * Chunks travel in pieces of at most UCX_PIECE bytes, so the receive space is
 * n pieces; each piece is folded in small cache-resident blocks straight
 * into the result. The all-reduce (up to UCX_PIPE_MAXN ranks) is pipelined:
 * as soon as piece p of its chunk is folded, a rank sends it to every other
 * rank, while the reduce-scatter of piece p+1 is already under way.
 * Waiting progresses the workers, yields the core after a few hundred idle
 * polls (a peer on the same core then runs at once), and backs off into
 * short sleeps so an idle rank does not take a core from a busy one.
 *
 * Failures: endpoints use UCX peer error handling (UCP_ERR_HANDLING_MODE_PEER
 * with an error callback, and keepalive at least every second), so when a
 * peer process dies the callback aborts this process's comm_ucx with
 * "rank K (peer process) failed: <UCX status>" and every pending and future
 * call returns COMM_EABORTED within seconds. Every wait polls the abort flag,
 * so comm_abort from another thread also ends it. After an abort the waiting
 * thread cancels its receives and force-closes the endpoints, which fails
 * the sends still in flight (and, over connection-oriented transports, tells
 * the peers). Abort is otherwise local to the process: peers learn of it when
 * the process exits.
 *
 * UCX has no peer failure handling on its shared-memory transports, so the
 * error-handling endpoints run over TCP even within a host. To peers on the
 * same machine (same kernel boot id) data therefore goes through a second
 * endpoint without error handling (shared memory, cross-memory attach), while
 * the first one still reports the peer's death. These data endpoints live on
 * a second worker (the published address holds both workers' addresses):
 * progressing the TCP transport costs a system call, so while every peer is
 * on this host the first worker is only progressed every UCX_MAIN_EVERY
 * polls. Caveat: if a same-host peer
 * dies during a cross-memory-attach transfer, UCX aborts this process
 * (SIGABRT) instead of returning an error; STORK_UCX_PEER_ONLY=1 keeps every
 * transfer on the error-handling endpoints (slower, always a clean error).
 * Peers on other hosts are unaffected (one storkd per node).
 *
 * Threads: the workers run in UCS_THREAD_MODE_MULTI, so several threads of
 * the process may use communicators of one comm_ucx at the same time (each
 * communicator by one thread): storkd's groups that span nodes each have a
 * leader thread of their own, and pipeline stages send from their own
 * threads. Communicator ids keep their traffic apart: the world is 1,
 * comm_split results take the lowest id below UCX_ID_COLUMNS that none of
 * their members uses (agreed by an all-reduce), the groups made with
 * comm_ucx_group are given theirs by the caller (below 0xfe00), and
 * point-to-point tags carry UCX_TAG_P2P in their top byte, the pairwise
 * messages of comm_hier's collectives UCX_TAG_COLL.
 *
 * Point-to-point: comm_send copies the message and posts it; the request
 * and its copy wait on a list that later calls (any thread) reap, so a send
 * never waits for its receiver. comm_recv posts a receive for the exact tag
 * (the communicator's whole id, source, destination, and the low byte of a
 * per-pair sequence number: UCX matches one endpoint's messages in the order
 * they were sent, the byte only checks it) and waits.
 */
#include "config.h"
#include "lib/comm/backend.h"
#include "lib/machine_id.h"
#include "lib/simd_clones.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define UCX_PIECE (512u << 10)
#ifndef UCX_PIPE_PIECE
#define UCX_PIPE_PIECE (512u << 10)     /* bytes of a chunk per pipelined step */
#endif
#ifndef UCX_PIPE_DEPTH
#define UCX_PIPE_DEPTH 2                /* pieces in flight */
#endif
#define UCX_PIPE_MAXN 64
#define UCX_MAIN_EVERY 64               /* see progress() */                /* larger worlds: direct_reduce + ring */
#define UCX_SPIN 20000           /* idle progress calls before sleeping */
#define UCX_YIELD 256            /* idle progress calls before yielding */
#define UCX_TAG_ALL 0xffffffffffffffffULL
#define UCX_FOLD_BLOCK 16384    /* bytes folded at a time (stays in L1) */
#define UCX_KEEPALIVE "1s"      /* default UCX_KEEPALIVE_INTERVAL */
#define UCX_CLOSE_GRACE 5.0     /* seconds to finish freeing after a peer left */
#define UCX_ID_COLUMNS 0x4000   /* comm_split ids stay below; see hier.c for the rest */
#define UCX_TAG_P2P 0xffULL     /* top byte of point-to-point tags */
#define UCX_TAG_COLL 0xfeULL    /* ... and of a collective's pairwise messages */

/* A send on its way: the request and the copy of the message it reads. */
struct ucx_pending {
	struct ucx_pending *next;
	void *req;
	void *copy;
};

/* The error callback's argument: which world rank an endpoint leads to. */
struct ucx_peer {
	struct comm_ucx *u;
	int rank;
};

struct comm_ucx {
	ucp_context_h ctx;
	ucp_worker_h worker;            /* error-handling endpoints */
	ucp_worker_h dworker;           /* data endpoints to same-host peers */
	ucp_address_t *addr, *daddr;
	size_t addrlen, daddrlen;
	char *blob;                     /* both addresses, as published */
	int remote;                     /* data also flows through worker */
	atomic_uint polls;
	int multi;                      /* the workers are thread-safe */
	atomic_int aborted;
	pthread_mutex_t pend_lock;      /* pending sends */
	struct ucx_pending *pending;
	atomic_int eps_closed;
	pthread_rwlock_t eps_lock;      /* sends read eps, an abort closes them */
	pthread_mutex_t lock;           /* reason and failed_* while being set */
	pthread_mutex_t progress_lock;  /* held by whoever progresses the workers or cancels */
	char reason[256];
	int failed_peer;                /* first peer whose process failed, or -1 */
	char failed_why[128];
	int closing;                    /* the world is being freed */
	double close_error_at;          /* when a peer closed or failed meanwhile */
	int close_peer;                 /* which one */
	ucp_ep_h *eps;                  /* the world's endpoints, to close on abort */
	int neps;
	struct ucx_peer *peers;
	unsigned char split_ids[UCX_ID_COLUMNS]; /* 1: a live comm_split result has it (lock) */
};

struct ucx_comm {
	struct comm base;
	struct comm_ucx *u;
	ucp_ep_h *eps;          /* by world rank; NULL for self; then the data
				 * endpoints to same-host peers (see below) */
	int nworld;
	int *world;             /* world rank of each rank of this communicator */
	int owns_eps;
	int owns_id;            /* a comm_split result: frees its id in split_ids */
	uint16_t id;
	uint32_t round;
	uint16_t *send_seq, *recv_seq; /* point-to-point, per peer (allocated on first use) */
	void *tmp;              /* receive space of the reductions (scratch()) */
};

static const struct comm_ops ucx_ops;

/* Bytes this thread has handed to UCX sends (comm_ucx_thread_bytes_sent). */
static _Thread_local uint64_t thread_bytes_sent;

uint64_t comm_ucx_thread_bytes_sent(void)
{
	return thread_bytes_sent;
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Progress the data worker, and the error-handling one every
 * UCX_MAIN_EVERY calls unless data flows through it too (its TCP
 * transport costs a system call per progress).
 *
 * Progress runs under progress_lock: a request completes only in some
 * thread's progress, and UCX's cancel of a receive that another thread's
 * progress has just completed fails an assertion and aborts the process
 * (cancel_pending checks and cancels under the same lock).
 */
static unsigned progress(struct comm_ucx *u)
{
	unsigned k;

	pthread_mutex_lock(&u->progress_lock);
	k = ucp_worker_progress(u->dworker);
	if (u->remote || (atomic_fetch_add_explicit(&u->polls, 1, memory_order_relaxed) + 1) %
				 UCX_MAIN_EVERY == 0)
		k += ucp_worker_progress(u->worker);
	pthread_mutex_unlock(&u->progress_lock);
	return k;
}

static void progress_both(struct comm_ucx *u)
{
	pthread_mutex_lock(&u->progress_lock);
	ucp_worker_progress(u->worker);
	ucp_worker_progress(u->dworker);
	pthread_mutex_unlock(&u->progress_lock);
}

/* Requests of the data worker carry a 1 in their lowest address bit. */
static void *req_ptr(void *r)
{
	return (void *)((uintptr_t)r & ~(uintptr_t)1);
}

static ucp_worker_h req_worker(struct comm_ucx *u, void *r)
{
	return (uintptr_t)r & 1 ? u->dworker : u->worker;
}

static void *req_mark(void *r, int data)
{
	return data && r && !UCS_PTR_IS_ERR(r) ? (void *)((uintptr_t)r | 1) : r;
}

/* First abort wins; the reason is complete before the flag is seen. */
static void set_abort(struct comm_ucx *u, const char *reason)
{
	pthread_mutex_lock(&u->lock);
	if (!atomic_load(&u->aborted)) {
		snprintf(u->reason, sizeof u->reason, "%s", reason ? reason : "aborted");
		atomic_store(&u->aborted, 1);
	}
	pthread_mutex_unlock(&u->lock);
}

/* Close every endpoint at once (once, whichever thread comes first); what is still in flight fails. */
static void close_eps_force(struct comm_ucx *u)
{
	if (atomic_exchange(&u->eps_closed, 1))
		return;
	/* another thread may be posting a send on one of them right now */
	pthread_rwlock_wrlock(&u->eps_lock);
	for (int k = 0; k < u->neps; k++) {
		ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					  .flags = UCP_EP_CLOSE_FLAG_FORCE };
		void *req;

		if (!u->eps[k])
			continue;
		req = ucp_ep_close_nbx(u->eps[k], &p);
		u->eps[k] = NULL;
		if (req && !UCS_PTR_IS_ERR(req)) {
			while (ucp_request_check_status(req) == UCS_INPROGRESS)
				progress_both(u);
			ucp_request_free(req);
		}
	}
	pthread_rwlock_unlock(&u->eps_lock);
}

/* ------------------------------------------------------------- messages */

static ucp_tag_t make_tag(const struct ucx_comm *c, uint32_t round, int src)
{
	return ((ucp_tag_t)c->id << 48) | ((ucp_tag_t)round << 16) | (uint16_t)src;
}

/*
 * Post a send of len bytes at buf to world rank w over its data endpoint if
 * it has one, else its error-handling one; a closed endpoint (after an
 * abort) gives UCS_ERR_CANCELED.
 */
static void *send_to(struct ucx_comm *c, int w, const void *buf, size_t len, ucp_tag_t tag)
{
	ucp_request_param_t p = { .op_attr_mask = 0 };
	ucp_ep_h ep;
	void *req;

	pthread_rwlock_rdlock(&c->u->eps_lock);
	ep = c->eps[c->nworld + w] ? c->eps[c->nworld + w] : c->eps[w];
	req = ep ? req_mark(ucp_tag_send_nbx(ep, buf, len, tag, &p), ep == c->eps[c->nworld + w])
		 : UCS_STATUS_PTR(UCS_ERR_CANCELED);
	pthread_rwlock_unlock(&c->u->eps_lock);
	if (ep)
		thread_bytes_sent += len;
	return req;
}

static void *post_send(struct ucx_comm *c, int dst, const void *buf, size_t len,
		       uint32_t round)
{
	return send_to(c, c->world[dst], buf, len, make_tag(c, round, c->base.rank));
}

static void *post_recv(struct ucx_comm *c, int src, void *buf, size_t len,
		       uint32_t round)
{
	ucp_request_param_t p = { .op_attr_mask = 0 };
	int data = c->eps[c->nworld + c->world[src]] != NULL;

	return req_mark(ucp_tag_recv_nbx(data ? c->u->dworker : c->u->worker, buf, len,
					 make_tag(c, round, src), UCX_TAG_ALL, &p), data);
}

/* Cancel what of reqs is still in flight (see progress). */
static void cancel_pending(struct comm_ucx *u, void **reqs, int n)
{
	pthread_mutex_lock(&u->progress_lock);
	for (int i = 0; i < n; i++)
		if (reqs[i] && ucp_request_check_status(req_ptr(reqs[i])) == UCS_INPROGRESS)
			ucp_request_cancel(req_worker(u, reqs[i]), req_ptr(reqs[i]));
	pthread_mutex_unlock(&u->progress_lock);
}

/*
 * Wait for every request of reqs (NULL: done already); frees them. Returns
 * COMM_EABORTED once the comm_ucx is aborted (by comm_abort, or by a peer's
 * failure reported through ep_error), after cancelling what is pending.
 * With info, reqs[0] is a tag receive: *info gets what arrived, and a
 * message longer than the buffer (UCX truncates it) is not a failure but
 * left to the caller, who knows which sizes the two ranks meant.
 */
static int wait_all_info(struct ucx_comm *c, void **reqs, int n, ucp_tag_recv_info_t *info)
{
	struct comm_ucx *u = c->u;
	int idle = 0, failed = 0, cancelled = 0;
	ucs_status_t why = UCS_OK;

	for (int i = 0; i < n; i++)
		if (UCS_PTR_IS_ERR(reqs[i])) {
			why = UCS_PTR_STATUS(reqs[i]);
			reqs[i] = NULL;
			failed = 1;
		}
	for (;;) {
		int pending = 0;

		for (int i = 0; i < n; i++) {
			ucs_status_t st;

			if (!reqs[i])
				continue;
			st = i == 0 && info ? ucp_tag_recv_request_test(req_ptr(reqs[i]), info) :
					      ucp_request_check_status(req_ptr(reqs[i]));
			if (st == UCS_INPROGRESS) {
				pending++;
				continue;
			}
			if (st == UCS_ERR_MESSAGE_TRUNCATED && i == 0 && info)
				st = UCS_OK;
			if (st != UCS_OK && st != UCS_ERR_CANCELED)
				why = st, failed = 1;
			ucp_request_free(req_ptr(reqs[i]));
			reqs[i] = NULL;
		}
		if (!pending)
			break;
		if (u->close_error_at && mono_now() - u->close_error_at > UCX_CLOSE_GRACE) {
			char msg[200];

			snprintf(msg, sizeof msg, "rank %d left while this process was still "
				 "finishing the last collective", u->close_peer);
			set_abort(u, msg);
		}
		if (atomic_load(&u->aborted) && !cancelled) {
			cancel_pending(u, reqs, n);
			close_eps_force(u);
			cancelled = 1;
		}
		if (progress(u)) {
			idle = 0;
		} else if (++idle > UCX_SPIN) {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		} else if (idle > UCX_YIELD) {
			sched_yield();  /* a peer sharing this core runs now */
		}
	}
	if (failed && !atomic_load(&u->aborted)) {
		char msg[200];

		/* the endpoint's error callback names the peer; give it a moment */
		for (int i = 0; i < 1000 && !atomic_load(&u->aborted); i++)
			progress_both(u);
		snprintf(msg, sizeof msg, "UCX transfer failed: %s", ucs_status_string(why));
		set_abort(u, msg);
	}
	return atomic_load(&u->aborted) ? COMM_EABORTED : COMM_OK;
}

static int wait_all(struct ucx_comm *c, void **reqs, int n)
{
	return wait_all_info(c, reqs, n, NULL);
}

/* ---------------------------------------------------------- collectives */

static int check_abort(struct ucx_comm *c)
{
	return atomic_load(&c->u->aborted) ? COMM_EABORTED : COMM_OK;
}

/*
 * The receive space of the reductions: n pieces for direct_reduce, or
 * UCX_PIPE_DEPTH slots of n-1 pieces for the pipelined all-reduce. Made on
 * first use, since many communicators never reduce (comm_hier's columns of
 * a job that only all-reduces, for instance) and it grows with n. NULL
 * (and the comm_ucx aborted) when out of memory.
 */
static char *scratch(struct ucx_comm *c)
{
	size_t n = (size_t)c->base.size, a = n * UCX_PIECE,
	       b = (n - 1) * UCX_PIPE_DEPTH * UCX_PIPE_PIECE;

	if (!c->tmp && !(c->tmp = malloc(a > b ? a : b)))
		set_abort(c->u, "UCX collective: out of memory for its receive space");
	return c->tmp;
}

static void chunk_of(size_t count, size_t esize, int n, int r, size_t *lo, size_t *hi)
{
	size_t align = 64 / esize;
	size_t chunk = (count + (size_t)n - 1) / (size_t)n;

	chunk = (chunk + align - 1) / align * align;
	*lo = chunk * (size_t)r < count ? chunk * (size_t)r : count;
	*hi = *lo + chunk < count ? *lo + chunk : count;
}

/*
 * d[i] = a[i] + b[i] for i < m, in explicit vectors (the compiler does not
 * vectorise the plain loop at -O2), with an AVX2 clone chosen at load time
 * where the CPU has it; d may be a or b. One addition per element, a first,
 * as comm_reduce_local does it, so every clone gives the same bits.
 */
typedef float ucx_v8f __attribute__((vector_size(32)));
typedef double ucx_v4d __attribute__((vector_size(32)));

SIMD_CLONES_OF("avx2", "default")
static void add3_f32(float *d, const float *a, const float *b, size_t m)
{
	size_t i = 0;

	for (; i + 16 <= m; i += 16) {
		ucx_v8f x0, x1, y0, y1;

		memcpy(&x0, a + i, 32), memcpy(&x1, a + i + 8, 32);
		memcpy(&y0, b + i, 32), memcpy(&y1, b + i + 8, 32);
		x0 = x0 + y0, x1 = x1 + y1;
		memcpy(d + i, &x0, 32), memcpy(d + i + 8, &x1, 32);
	}
	for (; i < m; i++)
		d[i] = a[i] + b[i];
}

SIMD_CLONES_OF("avx2", "default")
static void add3_f64(double *d, const double *a, const double *b, size_t m)
{
	size_t i = 0;

	for (; i + 8 <= m; i += 8) {
		ucx_v4d x0, x1, y0, y1;

		memcpy(&x0, a + i, 32), memcpy(&x1, a + i + 4, 32);
		memcpy(&y0, b + i, 32), memcpy(&y1, b + i + 4, 32);
		x0 = x0 + y0, x1 = x1 + y1;
		memcpy(d + i, &x0, 32), memcpy(d + i + 4, &x1, 32);
	}
	for (; i < m; i++)
		d[i] = a[i] + b[i];
}

/* d = a op b for the types add3 covers; returns 0 for the others. */
static int op3(void *d, const void *a, const void *b, size_t m, enum comm_dtype t,
	       enum comm_op op)
{
	if (op != COMM_SUM)
		return 0;
	if (t == COMM_FLOAT32)
		add3_f32(d, a, b, m);
	else if (t == COMM_FLOAT64)
		add3_f64(d, a, b, m);
	else
		return 0;
	return 1;
}

/*
 * dst[i] = fold over k = 0..n-1 of src[k][i], for i < m, a block at a time;
 * dst may be one of the src (each block is read before it is written).
 */
static void fold_ranks(void *dst, const char *const *src, int n, size_t m,
		       enum comm_dtype t, enum comm_op op)
{
	_Alignas(64) unsigned char block[UCX_FOLD_BLOCK];
	size_t es = comm_dtype_size(t), per = UCX_FOLD_BLOCK / es;

	if (n == 2 && op3(dst, src[0], src[1], m, t, op))
		return;
	for (size_t b = 0; b < m; b += per) {
		size_t k = m - b < per ? m - b : per, o = b * es;

		if (op3(block, src[0] + o, src[1] + o, k, t, op)) {
			for (int j = 2; j < n - 1; j++)
				op3(block, block, src[j] + o, k, t, op);
			op3((char *)dst + o, block, src[n - 1] + o, k, t, op);
			continue;
		}
		memcpy(block, src[0] + o, k * es);
		for (int j = 1; j < n; j++)
			comm_reduce_local(block, src[j] + o, k, t, op);
		memcpy((char *)dst + o, block, k * es);
	}
}

/*
 * Rank k receives every rank's elements of chunk k of send and folds them in
 * rank order into recv (which holds chunk k; may alias send's chunk k).
 */
static int direct_reduce(struct ucx_comm *c, const void *send, void *recv,
			 size_t count, enum comm_dtype t, enum comm_op op)
{
	int n = c->base.size, me = c->base.rank, rc = COMM_OK;
	size_t es = comm_dtype_size(t), piece = UCX_PIECE / es, lo, maxchunk;
	void **reqs = calloc(2 * (size_t)n, sizeof *reqs);
	const char **src = calloc((size_t)n, sizeof *src);
	char *tmp = scratch(c);

	if (!reqs || !src || !tmp) {
		free(reqs);
		free(src);
		return COMM_ENOMEM;
	}
	chunk_of(count, es, n, 0, &lo, &maxchunk);
	for (size_t off = 0; off < maxchunk && !rc; off += piece) {
		uint32_t round = c->round++;
		size_t mlo, mhi, m;
		int nr = 0;

		chunk_of(count, es, n, me, &mlo, &mhi);
		m = mlo + off < mhi ? (mhi - mlo - off < piece ? mhi - mlo - off : piece) : 0;
		for (int k = 0; k < n; k++) {
			size_t klo, khi, km;

			if (k == me)
				continue;
			if (m)          /* rank k's piece of my chunk */
				reqs[nr++] = post_recv(c, k, tmp + (size_t)(k < me ? k : k - 1) * UCX_PIECE,
						       m * es, round);
			chunk_of(count, es, n, k, &klo, &khi);
			km = klo + off < khi ? (khi - klo - off < piece ? khi - klo - off : piece) : 0;
			if (km)         /* my piece of rank k's chunk */
				reqs[nr++] = post_send(c, k, (const char *)send + (klo + off) * es,
						       km * es, round);
		}
		rc = wait_all(c, reqs, nr);
		if (rc || !m)
			continue;
		/* fold in rank order; contribution k lives in tmp or, for k = me,
		 * in send (which recv may alias) */
		for (int k = 0; k < n; k++)
			src[k] = k == me ? (const char *)send + (mlo + off) * es :
					   tmp + (size_t)(k < me ? k : k - 1) * UCX_PIECE;
		fold_ranks((char *)recv + off * es, src, n, m, t, op);
	}
	free(reqs);
	free(src);
	return rc;
}

/* Ring all-gather of the chunks of buf (chunk k is complete on rank k). */
static int ring_allgather(struct ucx_comm *c, void *buf, size_t count, size_t es,
			  int chunked, size_t each)
{
	int n = c->base.size, me = c->base.rank, rc = COMM_OK;
	int right = (me + 1) % n, left = (me + n - 1) % n;

	for (int s = 0; s < n - 1 && !rc; s++) {
		int sc = (me - s + n) % n, rcv = (me - s - 1 + 2 * n) % n;
		size_t slo, shi, rlo, rhi;
		void *reqs[2];

		if (chunked) {
			chunk_of(count, es, n, sc, &slo, &shi);
			chunk_of(count, es, n, rcv, &rlo, &rhi);
		} else {
			slo = (size_t)sc * each, shi = slo + each;
			rlo = (size_t)rcv * each, rhi = rlo + each;
		}
		uint32_t round = c->round++;
		reqs[0] = rhi > rlo ? post_recv(c, left, (char *)buf + rlo * es,
					       (rhi - rlo) * es, round) : NULL;
		reqs[1] = shi > slo ? post_send(c, right, (char *)buf + slo * es,
					       (shi - slo) * es, round) : NULL;
		rc = wait_all(c, reqs, 2);
	}
	return rc;
}


/* The [lo, hi) elements of piece p of chunk k of a count-element buffer. */
static size_t piece_of(size_t count, size_t es, int n, int k, size_t p, size_t piece,
		       size_t *lo)
{
	size_t klo, khi, off = p * piece;

	chunk_of(count, es, n, k, &klo, &khi);
	*lo = klo + off;
	if (klo + off >= khi)
		return 0;
	return khi - klo - off < piece ? khi - klo - off : piece;
}

/* The state of one pipelined all-reduce (see pipe_allreduce). */
struct pipe {
	struct ucx_comm *c;
	char *buf;
	size_t count, es, piece;
	uint32_t round;                 /* round of piece 0's reduce-scatter */
	void **rs, **ag;                /* UCX_PIPE_DEPTH slots of 2n requests */
};

/* Reduce-scatter messages of piece p: my pieces out, the others' into tmp. */
static void pipe_post_rs(struct pipe *pp, size_t p)
{
	struct ucx_comm *c = pp->c;
	int n = c->base.size, me = c->base.rank, slot = (int)(p % UCX_PIPE_DEPTH);
	void **r = pp->rs + (size_t)slot * 2 * (size_t)n;
	char *tmp = (char *)c->tmp + (size_t)slot * (size_t)(n - 1) * UCX_PIPE_PIECE;
	size_t lo, m = piece_of(pp->count, pp->es, n, me, p, pp->piece, &lo);

	for (int k = 0; k < n; k++) {
		size_t klo, km;

		if (k == me)
			continue;
		if (m)
			r[k] = post_recv(c, k, tmp + (size_t)(k < me ? k : k - 1) * UCX_PIPE_PIECE,
					 m * pp->es, pp->round + 2 * (uint32_t)p);
		km = piece_of(pp->count, pp->es, n, k, p, pp->piece, &klo);
		if (km)
			r[n + k] = post_send(c, k, pp->buf + klo * pp->es, km * pp->es,
					     pp->round + 2 * (uint32_t)p);
	}
}

/* Fold piece p of my chunk, then send it to every rank and receive theirs. */
static void pipe_fold_ag(struct pipe *pp, size_t p, enum comm_dtype t, enum comm_op op)
{
	struct ucx_comm *c = pp->c;
	int n = c->base.size, me = c->base.rank, slot = (int)(p % UCX_PIPE_DEPTH);
	void **r = pp->ag + (size_t)slot * 2 * (size_t)n;
	char *tmp = (char *)c->tmp + (size_t)slot * (size_t)(n - 1) * UCX_PIPE_PIECE;
	const char *src[UCX_PIPE_MAXN];
	size_t lo, m = piece_of(pp->count, pp->es, n, me, p, pp->piece, &lo);
	uint32_t round = pp->round + 2 * (uint32_t)p + 1;

	if (m) {
		for (int k = 0; k < n; k++)
			src[k] = k == me ? pp->buf + lo * pp->es :
				 tmp + (size_t)(k < me ? k : k - 1) * UCX_PIPE_PIECE;
		fold_ranks(pp->buf + lo * pp->es, src, n, m, t, op);
	}
	for (int k = 0; k < n; k++) {
		size_t klo, km;

		if (k == me)
			continue;
		if (m)
			r[n + k] = post_send(c, k, pp->buf + lo * pp->es, m * pp->es, round);
		km = piece_of(pp->count, pp->es, n, k, p, pp->piece, &klo);
		if (km)         /* into my copy of chunk k: my own piece of it has
				 * reached rank k before rank k can send this */
			r[k] = post_recv(c, k, pp->buf + klo * pp->es, km * pp->es, round);
	}
}

/*
 * All-reduce in pieces: piece p of every chunk is reduce-scattered (chunk k
 * to rank k, folded in rank order) and then sent by its owner to every other
 * rank, while the messages of the next UCX_PIPE_DEPTH - 1 pieces are already
 * under way. Each rank sends and receives (n-1)/n of the buffer per phase.
 */
static int pipe_allreduce(struct ucx_comm *c, void *buf, size_t count,
			  enum comm_dtype t, enum comm_op op)
{
	int n = c->base.size, rc = COMM_OK, nreq = 2 * n * UCX_PIPE_DEPTH;
	size_t es = comm_dtype_size(t), lo, maxchunk, npieces;
	struct pipe pp = { .c = c, .buf = buf, .count = count, .es = es,
			   .piece = UCX_PIPE_PIECE / es };

	if (!scratch(c))
		return COMM_ENOMEM;
	chunk_of(count, es, n, 0, &lo, &maxchunk);
	npieces = (maxchunk + pp.piece - 1) / pp.piece;
	pp.round = c->round;
	c->round += 2 * (uint32_t)npieces;
	pp.rs = calloc(2 * (size_t)nreq, sizeof *pp.rs);
	if (!pp.rs)
		return COMM_ENOMEM;
	pp.ag = pp.rs + nreq;
	for (size_t p = 0; p + 1 < UCX_PIPE_DEPTH && p < npieces; p++)
		pipe_post_rs(&pp, p);
	for (size_t p = 0; p < npieces && !rc; p++) {
		size_t q = p + UCX_PIPE_DEPTH - 1;
		void **rs = pp.rs + (p % UCX_PIPE_DEPTH) * 2 * (size_t)n;
		void **ag = pp.ag + (p % UCX_PIPE_DEPTH) * 2 * (size_t)n;

		if (q < npieces) {      /* its slot held piece p - 1 */
			if ((rc = wait_all(c, pp.rs + (q % UCX_PIPE_DEPTH) * 2 * (size_t)n,
					   2 * n)))
				break;
			pipe_post_rs(&pp, q);
		}
		if ((rc = wait_all(c, rs, n)) || (rc = wait_all(c, ag, 2 * n)))
			break;
		pipe_fold_ag(&pp, p, t, op);
	}
	{
		int rc2 = wait_all(c, pp.rs, 2 * nreq);

		rc = rc ? rc : rc2;
	}
	free(pp.rs);
	return rc;
}

static int ucx_allreduce(struct comm *cc, void *buf, size_t count,
			 enum comm_dtype t, enum comm_op op)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	size_t es = comm_dtype_size(t), lo, hi;
	int rc;

	if (cc->size == 1 || (rc = check_abort(c)))
		return check_abort(c);
	if (cc->size <= UCX_PIPE_MAXN)
		return pipe_allreduce(c, buf, count, t, op);
	chunk_of(count, es, cc->size, cc->rank, &lo, &hi);
	if ((rc = direct_reduce(c, buf, (char *)buf + lo * es, count, t, op)))
		return rc;
	return ring_allgather(c, buf, count, es, 1, 0);
}

static int ucx_reduce_scatter(struct comm *cc, const void *send, void *recv,
			      size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	size_t es = comm_dtype_size(t), n = (size_t)cc->size;
	int rc;

	if ((rc = check_abort(c)))
		return rc;
	if (n == 1) {
		memcpy(recv, send, recvcount * es);
		return COMM_OK;
	}
	/* direct_reduce's chunks are the equal segments when recvcount is a
	 * multiple of the 64-byte alignment; otherwise go through a copy that
	 * spaces the segments out. */
	if ((recvcount * es) % 64 == 0)
		return direct_reduce(c, send, recv, recvcount * n, t, op);
	{
		size_t align = 64 / es, stride = (recvcount + align - 1) / align * align;
		char *pad = calloc(stride * n, es);

		if (!pad)
			return COMM_ENOMEM;
		for (size_t k = 0; k < n; k++)
			memcpy(pad + k * stride * es, (const char *)send + k * recvcount * es,
			       recvcount * es);
		rc = direct_reduce(c, pad, pad + (size_t)cc->rank * stride * es,
				   stride * n, t, op);
		if (!rc)
			memcpy(recv, pad + (size_t)cc->rank * stride * es, recvcount * es);
		free(pad);
		return rc;
	}
}

static int ucx_allgather(struct comm *cc, const void *send, void *recv,
			 size_t sendcount, enum comm_dtype t)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	size_t es = comm_dtype_size(t);
	char *mine = (char *)recv + (size_t)cc->rank * sendcount * es;
	int rc;

	if ((rc = check_abort(c)))
		return rc;
	if (mine != send)
		memcpy(mine, send, sendcount * es);
	if (cc->size == 1)
		return COMM_OK;
	return ring_allgather(c, recv, 0, es, 0, sendcount);
}

static int ucx_broadcast(struct comm *cc, void *buf, size_t count,
			 enum comm_dtype t, int root)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	size_t len = count * comm_dtype_size(t);
	int n = cc->size, nr = 0, rc;
	uint32_t round = c->round++;
	void **reqs;

	if (n == 1 || (rc = check_abort(c)) || !len)
		return check_abort(c);
	if (!(reqs = calloc((size_t)n, sizeof *reqs)))
		return COMM_ENOMEM;
	if (cc->rank == root) {
		for (int k = 0; k < n; k++)
			if (k != root)
				reqs[nr++] = post_send(c, k, buf, len, round);
	} else {
		reqs[nr++] = post_recv(c, root, buf, len, round);
	}
	rc = wait_all(c, reqs, nr);
	free(reqs);
	return rc;
}

static int ucx_barrier(struct comm *cc)
{
	int32_t x = 0;

	return ucx_allreduce(cc, &x, 1, COMM_INT32, COMM_MAX);
}

/* --------------------------------------------------------- point-to-point */

/*
 * Free the pending sends that are done; one that failed aborts the
 * comm_ucx (the peer died or the connection broke).
 */
static void reap_sends(struct comm_ucx *u)
{
	pthread_mutex_lock(&u->pend_lock);
	for (struct ucx_pending **pp = &u->pending; *pp;) {
		struct ucx_pending *p = *pp;
		ucs_status_t st = p->req ? ucp_request_check_status(req_ptr(p->req)) : UCS_OK;

		if (st == UCS_INPROGRESS) {
			pp = &p->next;
			continue;
		}
		if (p->req)
			ucp_request_free(req_ptr(p->req));
		if (st != UCS_OK && st != UCS_ERR_CANCELED) {
			char msg[160];

			snprintf(msg, sizeof msg, "UCX send failed: %s", ucs_status_string(st));
			set_abort(u, msg);
		}
		*pp = p->next;
		free(p->copy);
		free(p);
	}
	pthread_mutex_unlock(&u->pend_lock);
}

static uint64_t pair_tag(uint64_t kind, uint16_t id, int src, int dst, uint16_t seq)
{
	return (kind << 56) | ((ucp_tag_t)id << 40) | ((ucp_tag_t)(uint16_t)src << 24) |
	       ((ucp_tag_t)(uint16_t)dst << 8) | (uint8_t)seq;
}

uint64_t comm_ucx_p2p_tag(uint16_t id, int src, int dst, uint16_t seq)
{
	return pair_tag(UCX_TAG_P2P, id, src, dst, seq);
}

uint64_t comm_ucx_coll_tag(uint16_t id, int src, int dst, uint16_t seq)
{
	return pair_tag(UCX_TAG_COLL, id, src, dst, seq);
}

int comm_ucx_send_tagged(struct comm *cc, int dst, uint64_t tag, const void *buf, size_t len)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	struct comm_ucx *u = c->u;
	struct ucx_pending *p = calloc(1, sizeof *p);
	int w = c->world[dst];

	reap_sends(u);
	if (check_abort(c)) {
		free(p);
		return COMM_EABORTED;
	}
	if (!p || !(p->copy = malloc(len ? len : 1))) {
		free(p);
		set_abort(u, "send: out of memory");
		return COMM_ENOMEM;
	}
	memcpy(p->copy, buf, len);
	p->req = send_to(c, w, p->copy, len, tag);
	if (UCS_PTR_IS_ERR(p->req)) {
		char msg[160];

		snprintf(msg, sizeof msg, "UCX send to rank %d failed: %s", w,
			 ucs_status_string(UCS_PTR_STATUS(p->req)));
		set_abort(u, msg);
		free(p->copy);
		free(p);
		return COMM_EABORTED;
	}
	if (!p->req) {          /* done at once (UCX copied it) */
		free(p->copy);
		free(p);
		return COMM_OK;
	}
	pthread_mutex_lock(&u->pend_lock);
	p->next = u->pending;
	u->pending = p;
	pthread_mutex_unlock(&u->pend_lock);
	return COMM_OK;
}

int comm_ucx_recv_tagged(struct comm *cc, int src, uint64_t tag, void *buf, size_t len,
			 size_t *got)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	int data = c->eps[c->nworld + c->world[src]] != NULL, rc;
	ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL };
	ucp_tag_recv_info_t info = { .length = (size_t)-1 };
	void *req;

	*got = (size_t)-1;
	reap_sends(c->u);
	if (check_abort(c))
		return COMM_EABORTED;
	req = req_mark(ucp_tag_recv_nbx(data ? c->u->dworker : c->u->worker, buf, len, tag,
					UCX_TAG_ALL, &p), data);
	/* the length comes from the request itself, not from a callback that
	 * another thread's progress might run */
	if ((rc = wait_all_info(c, &req, 1, &info)) == COMM_OK)
		*got = info.length;
	return rc;
}

/* Point-to-point on a UCX communicator: its id is the channel. */
static int ucx_send(struct comm *cc, const void *buf, size_t bytes, int dst)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;

	if (!c->send_seq && !(c->send_seq = calloc((size_t)cc->size, sizeof *c->send_seq)))
		return COMM_ENOMEM;
	return comm_ucx_send_tagged(cc, dst, comm_ucx_p2p_tag(c->id, c->world[cc->rank],
						      c->world[dst], c->send_seq[dst]++),
				    buf, bytes);
}

static int ucx_recv(struct comm *cc, void *buf, size_t bytes, int src)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	size_t got;
	int rc;

	if (!c->recv_seq && !(c->recv_seq = calloc((size_t)cc->size, sizeof *c->recv_seq)))
		return COMM_ENOMEM;
	rc = comm_ucx_recv_tagged(cc, src, comm_ucx_p2p_tag(c->id, c->world[src],
						   c->world[cc->rank], c->recv_seq[src]++),
				  buf, bytes, &got);
	if (rc == COMM_OK && got != bytes) {
		char msg[200];

		snprintf(msg, sizeof msg, "rank %d expected %zu bytes from rank %d, which sent %zu",
			 cc->rank, bytes, src, got);
		set_abort(c->u, msg);
		return COMM_EINVAL;
	}
	return rc;
}

/* ---------------------------------------------------------- communicators */

static struct ucx_comm *comm_new(struct comm_ucx *u, int rank, int n, uint16_t id)
{
	struct ucx_comm *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->base.ops = &ucx_ops;
	c->base.rank = rank;
	c->base.size = n;
	c->u = u;
	c->id = id;
	c->world = calloc((size_t)n, sizeof *c->world);
	if (!c->world) {
		free(c);
		return NULL;
	}
	return c;
}

/*
 * The id of a comm_split result: the lowest that no member of c has in use,
 * the same on every member (an all-reduce of the ids in use). The groups of
 * one split share it: they have no process in common, so their tags never
 * meet. Splits on one comm_ucx must not run at the same time (two could
 * pick the same id before either takes it).
 */
static int split_id(struct ucx_comm *c, uint16_t *id)
{
	unsigned char *used = malloc(UCX_ID_COLUMNS);
	int rc;

	if (!used)
		return COMM_ENOMEM;
	pthread_mutex_lock(&c->u->lock);
	memcpy(used, c->u->split_ids, UCX_ID_COLUMNS);
	pthread_mutex_unlock(&c->u->lock);
	used[0] = used[1] = 1;          /* none, and the world */
	rc = ucx_allreduce(&c->base, used, UCX_ID_COLUMNS, COMM_UINT8, COMM_MAX);
	*id = 0;
	for (int k = 2; k < UCX_ID_COLUMNS && !rc && !*id; k++)
		if (!used[k])
			*id = (uint16_t)k;
	free(used);
	return rc ? rc : *id ? COMM_OK : COMM_EINVAL;
}

static int ucx_split(struct comm *cc, int color, int key, struct comm **out)
{
	struct ucx_comm *c = (struct ucx_comm *)cc, *nc;
	int n = cc->size, m = 0, pos = 0, rc;
	int32_t mine[2] = { color, key }, *all = malloc(sizeof(int32_t) * 2 * (size_t)n);
	uint16_t id;

	if (!all)
		return COMM_ENOMEM;
	if ((rc = ucx_allgather(cc, mine, all, 2, COMM_INT32)) || (rc = split_id(c, &id)) ||
	    color == COMM_UNDEFINED)
		goto out;
	for (int k = 0; k < n; k++) {
		if (all[2 * k] != color)
			continue;
		m++;
		if (all[2 * k + 1] < key || (all[2 * k + 1] == key && k < cc->rank))
			pos++;
	}
	if (!(nc = comm_new(c->u, pos, m, id))) {
		rc = COMM_ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&c->u->lock);
	c->u->split_ids[id] = 1;
	pthread_mutex_unlock(&c->u->lock);
	nc->owns_id = 1;
	nc->eps = c->eps;
	nc->nworld = c->nworld;
	for (int k = 0, p; k < n; k++) {
		if (all[2 * k] != color)
			continue;
		p = 0;
		for (int j = 0; j < n; j++)
			if (all[2 * j] == color && (all[2 * j + 1] < all[2 * k + 1] ||
			    (all[2 * j + 1] == all[2 * k + 1] && j < k)))
				p++;
		nc->world[p] = c->world[k];
	}
	*out = &nc->base;
out:
	free(all);
	return rc;
}

int comm_ucx_group(struct comm *world, int n, const int *members, uint16_t id,
		   struct comm **out)
{
	struct ucx_comm *w = (struct ucx_comm *)world, *nc;
	int me = -1;

	*out = NULL;
	for (int k = 0; k < n; k++)
		if (members[k] < 0 || members[k] >= w->base.size)
			return COMM_EINVAL;
		else if (members[k] == w->base.rank)
			me = k;
	if (me < 0)
		return COMM_EINVAL;
	if (!(nc = comm_new(w->u, me, n, id)))
		return COMM_ENOMEM;
	nc->eps = w->eps;
	nc->nworld = w->nworld;
	for (int k = 0; k < n; k++)
		nc->world[k] = w->world[members[k]];
	*out = &nc->base;
	return COMM_OK;
}

int comm_ucx_is_multithreaded(const struct comm *world)
{
	return ((const struct ucx_comm *)world)->u->multi;
}

static void ucx_free(struct comm *cc)
{
	struct ucx_comm *c = (struct ucx_comm *)cc;
	struct comm_ucx *u = c->u;

	if (c->owns_eps) {
		/* nobody still sends to us, and what we sent has arrived */
		reap_sends(u);
		u->closing = 1;
		if (ucx_barrier(cc) == COMM_OK) {
			ucp_request_param_t p = { .op_attr_mask = 0 };
			void *req[2] = { ucp_worker_flush_nbx(u->worker, &p),
					 req_mark(ucp_worker_flush_nbx(u->dworker, &p), 1) };

			for (int i = 0; i < 2; i++)
				if (UCS_PTR_IS_ERR(req[i]))
					req[i] = NULL;
			wait_all(c, req, 2);
		}
		if (u->eps == c->eps)
			close_eps_force(u);
		u->eps = NULL;
		u->neps = 0;
		free(c->eps);
		free(u->peers);
		u->peers = NULL;
		u->closing = 0;
		u->close_error_at = 0;
	}
	if (c->owns_id) {
		pthread_mutex_lock(&u->lock);
		u->split_ids[c->id] = 0;
		pthread_mutex_unlock(&u->lock);
	}
	free(c->world);
	free(c->tmp);
	free(c->send_seq);
	free(c->recv_seq);
	free(c);
}

static void ucx_abort(struct comm *cc, const char *reason)
{
	set_abort(((struct ucx_comm *)cc)->u, reason);
}

static const char *ucx_abort_reason(const struct comm *cc)
{
	return ((const struct ucx_comm *)cc)->u->reason;
}

static const struct comm_ops ucx_ops = {
	.name = "ucx",
	.allreduce = ucx_allreduce,
	.reduce_scatter = ucx_reduce_scatter,
	.allgather = ucx_allgather,
	.broadcast = ucx_broadcast,
	.barrier = ucx_barrier,
	.send = ucx_send,
	.recv = ucx_recv,
	.split = ucx_split,
	.free = ucx_free,
	.abort = ucx_abort,
	.abort_reason = ucx_abort_reason,
};

/* ----------------------------------------------------------------- setup */

int comm_ucx_open(struct comm_ucx **out, const void **addr, size_t *addrlen)
{
	ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES |
					      UCP_PARAM_FIELD_MT_WORKERS_SHARED,
				.features = UCP_FEATURE_TAG, .mt_workers_shared = 1 };
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_MULTI };
	ucp_worker_attr_t wa = { .field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE };
	struct comm_ucx *u = calloc(1, sizeof *u);
	ucp_config_t *cfg = NULL;

	*out = NULL;
	if (!u)
		return COMM_ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_init(&u->progress_lock, NULL);
	pthread_mutex_init(&u->pend_lock, NULL);
	pthread_rwlock_init(&u->eps_lock, NULL);
	u->failed_peer = -1;
	if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
		goto fail;
	/* a dead peer must be noticed within seconds, also over shared memory */
	if (!getenv("UCX_KEEPALIVE_INTERVAL"))
		ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", UCX_KEEPALIVE);
	if (ucp_init(&params, cfg, &u->ctx) != UCS_OK) {
		u->ctx = NULL;
		goto fail;
	}
	ucp_config_release(cfg);
	cfg = NULL;
	if (ucp_worker_create(u->ctx, &wp, &u->worker) != UCS_OK) {
		u->worker = NULL;
		goto fail;
	}
	if (ucp_worker_create(u->ctx, &wp, &u->dworker) != UCS_OK) {
		u->dworker = NULL;
		goto fail;
	}
	/* a UCX built without thread support gives single-thread workers */
	u->multi = ucp_worker_query(u->worker, &wa) == UCS_OK &&
		   wa.thread_mode == UCS_THREAD_MODE_MULTI;
	if (ucp_worker_get_address(u->worker, &u->addr, &u->addrlen) != UCS_OK) {
		u->addr = NULL;
		goto fail;
	}
	if (ucp_worker_get_address(u->dworker, &u->daddr, &u->daddrlen) != UCS_OK) {
		u->daddr = NULL;
		goto fail;
	}
	/* published: length of the first address, then both */
	if (!(u->blob = malloc(sizeof(uint32_t) + u->addrlen + u->daddrlen)))
		goto fail;
	memcpy(u->blob, &(uint32_t){ (uint32_t)u->addrlen }, sizeof(uint32_t));
	memcpy(u->blob + sizeof(uint32_t), u->addr, u->addrlen);
	memcpy(u->blob + sizeof(uint32_t) + u->addrlen, u->daddr, u->daddrlen);
	*addr = u->blob;
	*addrlen = sizeof(uint32_t) + u->addrlen + u->daddrlen;
	*out = u;
	return COMM_OK;
fail:
	if (cfg)
		ucp_config_release(cfg);
	comm_ucx_close(u);
	return COMM_ESYS;
}

/*
 * UCX reports that the peer behind an endpoint failed (its process died or
 * its connection broke): abort this comm_ucx, naming the peer. Runs inside
 * ucp_worker_progress, on the thread that waits.
 */
static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct ucx_peer *p = arg;
	struct comm_ucx *u = p->u;
	char msg[256];

	(void)ep;
	if (u->closing) {
		/* a peer that is done closes its endpoints while this process may
		 * still wait for the last messages of the others: only a wait that
		 * outlasts UCX_CLOSE_GRACE fails */
		if (!u->close_error_at) {
			u->close_error_at = mono_now();
			u->close_peer = p->rank;
		}
		return;
	}
	pthread_mutex_lock(&u->lock);
	if (u->failed_peer < 0) {
		u->failed_peer = p->rank;
		snprintf(u->failed_why, sizeof u->failed_why, "%s", ucs_status_string(status));
	}
	pthread_mutex_unlock(&u->lock);
	snprintf(msg, sizeof msg, "rank %d (peer process) failed: %s", p->rank,
		 ucs_status_string(status));
	set_abort(u, msg);
}

int comm_ucx_poll(struct comm_ucx *u)
{
	if (u->multi) {
		progress_both(u);
		reap_sends(u);
	}
	return atomic_load(&u->aborted) ? COMM_EABORTED : COMM_OK;
}

int comm_ucx_failed_peer(struct comm_ucx *u, char *why, size_t len)
{
	int rank;

	pthread_mutex_lock(&u->lock);
	rank = u->failed_peer;
	if (why && len)
		snprintf(why, len, "%s", rank >= 0 ? u->failed_why : "");
	pthread_mutex_unlock(&u->lock);
	return rank;
}

/* The two worker addresses in a blob of comm_ucx_open. */
static const void *main_address(const void *blob)
{
	return (const char *)blob + sizeof(uint32_t);
}

static const void *data_address(const void *blob)
{
	uint32_t len;

	memcpy(&len, blob, sizeof len);
	return (const char *)blob + sizeof(uint32_t) + len;
}

/*
 * UCX offers no peer failure handling on its shared-memory transports, so
 * the endpoints made with UCP_ERR_HANDLING_MODE_PEER run over TCP even
 * between processes of one machine. Those stay, to learn of a peer's death;
 * data to a peer on the same machine goes through a second endpoint without
 * error handling, over shared memory and cross-memory attach.
 */
static int same_host_data_eps(struct ucx_comm *c, const void *const *addrs)
{
	int n = c->base.size, rc;
	/* 0: this rank keeps every transfer on the error-handling endpoints
	 * (and so do its peers with it, so both sides agree on the worker) */
	uint64_t *keys = calloc((size_t)n, sizeof *keys),
		 mine = getenv("STORK_UCX_PEER_ONLY") ? 0 : machine_id() | 1;

	if (!keys)
		return COMM_ENOMEM;
	c->u->remote = 1;       /* until the data endpoints exist */
	if ((rc = ucx_allgather(&c->base, &mine, keys, 1, COMM_INT64))) {
		free(keys);
		return rc;
	}
	c->u->remote = 0;
	for (int k = 0; k < n && !rc; k++) {
		ucp_ep_params_t ep = {
			.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
				      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
			.address = data_address(addrs[k]),
			.err_mode = UCP_ERR_HANDLING_MODE_NONE,
		};

		if (k == c->base.rank)
			continue;
		if (keys[k] != mine || !mine) {
			c->u->remote = 1;
			continue;
		}
		if (ucp_ep_create(c->u->dworker, &ep, &c->eps[n + k]) != UCS_OK) {
			c->eps[n + k] = NULL;
			rc = COMM_ESYS;
		}
	}
	free(keys);
	return rc;
}

int comm_ucx_world(struct comm_ucx *u, int rank, int nranks,
		   const void *const *addrs, struct comm **out)
{
	struct ucx_comm *c;

	*out = NULL;
	if (rank < 0 || rank >= nranks || nranks > 65535)
		return COMM_EINVAL;
	if (!(c = comm_new(u, rank, nranks, 1)))
		return COMM_ENOMEM;
	c->owns_eps = 1;
	c->eps = calloc(2 * (size_t)nranks, sizeof *c->eps);
	c->nworld = nranks;
	free(u->peers);
	u->peers = calloc((size_t)nranks, sizeof *u->peers);
	if (!c->eps || !u->peers) {
		free(c->eps), free(c->world), free(c->tmp), free(c);
		return COMM_ENOMEM;
	}
	for (int k = 0; k < nranks; k++) {
		ucp_ep_params_t ep = {
			.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
				      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
				      UCP_EP_PARAM_FIELD_ERR_HANDLER,
			.address = main_address(addrs[k]),
			.err_mode = UCP_ERR_HANDLING_MODE_PEER,
			.err_handler = { .cb = ep_error, .arg = &u->peers[k] },
		};

		c->world[k] = k;
		u->peers[k] = (struct ucx_peer){ u, k };
		if (k == rank)
			continue;
		if (ucp_ep_create(u->worker, &ep, &c->eps[k]) != UCS_OK) {
			c->eps[k] = NULL;
			c->owns_eps = 0;
			for (int j = 0; j < k; j++)
				if (c->eps[j])
					ucp_ep_destroy(c->eps[j]);
			free(c->eps);
			free(c->world), free(c->tmp), free(c);
			return COMM_ESYS;
		}
	}
	u->eps = c->eps;
	u->neps = 2 * nranks;
	atomic_store(&u->eps_closed, 0);
	if (same_host_data_eps(c, addrs)) {
		ucx_free(&c->base);
		return COMM_ESYS;
	}
	*out = &c->base;
	return COMM_OK;
}

void comm_ucx_close(struct comm_ucx *u)
{
	if (!u)
		return;
	while (u->pending) {            /* sends nobody will wait for any more */
		struct ucx_pending *p = u->pending;

		u->pending = p->next;
		if (p->req && !UCS_PTR_IS_ERR(p->req)) {
			ucp_request_cancel(req_worker(u, p->req), req_ptr(p->req));
			ucp_request_free(req_ptr(p->req));
		}
		free(p->copy);
		free(p);
	}
	if (u->addr)
		ucp_worker_release_address(u->worker, u->addr);
	if (u->daddr)
		ucp_worker_release_address(u->dworker, u->daddr);
	if (u->dworker)
		ucp_worker_destroy(u->dworker);
	if (u->worker)
		ucp_worker_destroy(u->worker);
	free(u->blob);
	if (u->ctx)
		ucp_cleanup(u->ctx);
	free(u->peers);
	pthread_mutex_destroy(&u->lock);
	pthread_mutex_destroy(&u->progress_lock);
	pthread_mutex_destroy(&u->pend_lock);
	pthread_rwlock_destroy(&u->eps_lock);
	free(u);
}
