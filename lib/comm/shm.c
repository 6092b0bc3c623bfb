/*
 * lib/comm/shm.c - the in-node collectives backend: ranks are threads of one
 * process, so every rank can read every other rank's buffers directly.
 *
 * A group (the world or a comm_split result) has one slot per rank and a
 * barrier. A collective is: publish my buffer pointers in my slot, barrier,
 * do my share of the work reading the peers' buffers in place, barrier. The
 * work is split so that ranks run in parallel without locks: in all-reduce,
 * rank r owns chunk r of the buffer (cache-line aligned, ceil(count/n)
 * elements), folds it over ranks 0..n-1 in order through a small stack block
 * and writes the block into every rank's buffer; no one else touches that
 * chunk, so in-place is safe. Reduce-scatter folds the rank's own segment
 * into its receive buffer; all-gather and broadcast copy. The fold order is
 * that of lib/comm/comm.h whatever the chunking, so results are bitwise stable.
 *
 * Point-to-point messages are copied into a mailbox of the receiver (a
 * list per group, under the group's mail lock) so that a send never waits
 * for the receiver; the receiver sleeps on the group's condition variable.
 *
 * The barrier is a counter and a generation word: arrivals spin briefly
 * (a few microseconds) on the generation, then sleep in futex(2), so idle
 * ranks do not starve a machine with fewer cores than ranks. Abort sets a
 * world flag, bumps every group's generation and wakes all sleepers; every
 * collective checks the flag on entry and after each barrier.
 */
#include "config.h"
#include "lib/comm/backend.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHM_LINE 64
#define SHM_SPIN 200            /* polls before sleeping in a barrier */
#define SHM_BLOCK_BYTES 16384   /* all-reduce folds this much at a time */

/* A buffered point-to-point message, queued at its receiver's slot. */
struct shm_msg {
	struct shm_msg *next;
	int src;
	size_t bytes;
	_Alignas(16) unsigned char data[];
};

struct shm_slot {
	struct shm_msg *mail_head, *mail_tail; /* messages to this rank */
	const void *send;
	void *recv;
	int color, key;
	struct shm_group *newgroup;
	int newrank;
} __attribute__((aligned(SHM_LINE)));

struct shm_group {
	struct comm_world *world;
	struct shm_group *next;          /* the world's list, for abort */
	int n;
	atomic_int refs;
	_Alignas(SHM_LINE) atomic_uint arrived;
	_Alignas(SHM_LINE) atomic_uint gen;
	atomic_int sleepers;
	pthread_mutex_t mail_lock;       /* every slot's mailbox */
	pthread_cond_t mail_cond;
	struct shm_slot slots[];
};

/* One rank's handle; struct comm first so the two convert. */
struct shm_comm {
	struct comm base;
	struct shm_group *g;
};

struct comm_world {
	int n;
	atomic_int aborted;
	pthread_mutex_t lock;            /* groups list and reason */
	struct shm_group *groups;
	char reason[256];
	struct shm_group *top;
	struct shm_comm *ranks;
};

static const struct comm_ops shm_ops;

/* ---------------------------------------------------------------- barrier */

static void futex_wait(atomic_uint *word, unsigned val)
{
	syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *word)
{
	syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static int is_aborted(const struct comm_world *w)
{
	return atomic_load((atomic_int *)&w->aborted);
}

static int group_barrier(struct shm_group *g)
{
	unsigned gen = atomic_load(&g->gen);

	if (is_aborted(g->world))
		return COMM_EABORTED;
	if (atomic_fetch_add(&g->arrived, 1) + 1 == (unsigned)g->n) {
		atomic_store_explicit(&g->arrived, 0, memory_order_relaxed);
		atomic_fetch_add(&g->gen, 1);
		if (atomic_load(&g->sleepers))
			futex_wake_all(&g->gen);
	} else {
		for (int i = 0; i < SHM_SPIN && atomic_load(&g->gen) == gen; i++)
			cpu_relax();
		if (atomic_load(&g->gen) == gen) {
			atomic_fetch_add(&g->sleepers, 1);
			while (atomic_load(&g->gen) == gen && !is_aborted(g->world))
				futex_wait(&g->gen, gen);
			atomic_fetch_sub(&g->sleepers, 1);
		}
	}
	return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
}

/* ----------------------------------------------------------------- groups */

static struct shm_group *group_new(struct comm_world *w, int n)
{
	struct shm_group *g;
	size_t size = sizeof *g + (size_t)n * sizeof g->slots[0];

	if (posix_memalign((void **)&g, SHM_LINE, size))
		return NULL;
	memset(g, 0, size);
	pthread_mutex_init(&g->mail_lock, NULL);
	pthread_cond_init(&g->mail_cond, NULL);
	g->world = w;
	g->n = n;
	atomic_init(&g->refs, n);
	pthread_mutex_lock(&w->lock);
	g->next = w->groups;
	w->groups = g;
	pthread_mutex_unlock(&w->lock);
	return g;
}

/* Free g with any message nobody received. */
static void group_destroy(struct shm_group *g)
{
	for (int k = 0; k < g->n; k++) {
		while (g->slots[k].mail_head) {
			struct shm_msg *m = g->slots[k].mail_head;

			g->slots[k].mail_head = m->next;
			free(m);
		}
	}
	pthread_mutex_destroy(&g->mail_lock);
	pthread_cond_destroy(&g->mail_cond);
	free(g);
}

static void group_unref(struct shm_group *g)
{
	struct comm_world *w = g->world;

	if (atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	pthread_mutex_lock(&w->lock);
	for (struct shm_group **p = &w->groups; *p; p = &(*p)->next) {
		if (*p == g) {
			*p = g->next;
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	group_destroy(g);
}

static struct shm_group *group_of(struct comm *c, struct shm_slot **me)
{
	struct shm_group *g = ((struct shm_comm *)c)->g;

	*me = &g->slots[c->rank];
	return g;
}

/* ------------------------------------------------------------- collectives */

/* Elements [*lo, *hi) of count that rank r of n owns (cache-line aligned). */
static void chunk_of(size_t count, size_t esize, int n, int r, size_t *lo, size_t *hi)
{
	size_t align = SHM_LINE / esize;
	size_t chunk = (count + (size_t)n - 1) / (size_t)n;

	chunk = (chunk + align - 1) / align * align;
	*lo = chunk * (size_t)r < count ? chunk * (size_t)r : count;
	*hi = *lo + chunk < count ? *lo + chunk : count;
}

static int shm_allreduce(struct comm *c, void *buf, size_t count,
			 enum comm_dtype t, enum comm_op op)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	size_t esize = comm_dtype_size(t), lo, hi;
	_Alignas(SHM_LINE) unsigned char block[SHM_BLOCK_BYTES];
	size_t per_block = SHM_BLOCK_BYTES / esize;
	int rc;

	if (g->n == 1)
		return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
	me->recv = buf;
	if ((rc = group_barrier(g)))
		return rc;
	chunk_of(count, esize, g->n, c->rank, &lo, &hi);
	for (size_t b = lo; b < hi; b += per_block) {
		size_t m = hi - b < per_block ? hi - b : per_block;
		size_t off = b * esize;

		memcpy(block, (char *)g->slots[0].recv + off, m * esize);
		for (int k = 1; k < g->n; k++)
			comm_reduce_local(block, (char *)g->slots[k].recv + off, m, t, op);
		for (int k = 0; k < g->n; k++)
			memcpy((char *)g->slots[k].recv + off, block, m * esize);
	}
	return group_barrier(g);
}

static int shm_reduce_scatter(struct comm *c, const void *send, void *recv,
			      size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	size_t bytes = recvcount * comm_dtype_size(t);
	size_t off = bytes * (size_t)c->rank;
	int rc;

	me->send = send;
	if (g->n > 1 && (rc = group_barrier(g)))
		return rc;
	memcpy(recv, (const char *)g->slots[0].send + off, bytes);
	for (int k = 1; k < g->n; k++)
		comm_reduce_local(recv, (const char *)g->slots[k].send + off, recvcount, t, op);
	if (g->n == 1)
		return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
	return group_barrier(g);
}

static int shm_allgather(struct comm *c, const void *send, void *recv,
			 size_t sendcount, enum comm_dtype t)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	size_t bytes = sendcount * comm_dtype_size(t);
	int rc;

	me->send = send;
	if (g->n > 1 && (rc = group_barrier(g)))
		return rc;
	for (int k = 0; k < g->n; k++) {
		char *dst = (char *)recv + bytes * (size_t)k;

		if (dst != g->slots[k].send)
			memcpy(dst, g->slots[k].send, bytes);
	}
	if (g->n == 1)
		return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
	return group_barrier(g);
}

static int shm_broadcast(struct comm *c, void *buf, size_t count,
			 enum comm_dtype t, int root)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	int rc;

	if (g->n == 1)
		return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
	me->recv = buf;
	if ((rc = group_barrier(g)))
		return rc;
	if (c->rank != root && buf != g->slots[root].recv)
		memcpy(buf, g->slots[root].recv, count * comm_dtype_size(t));
	return group_barrier(g);
}

static int shm_barrier(struct comm *c)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);

	if (g->n == 1)
		return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
	return group_barrier(g);
}

/* ---------------------------------------------------------- point-to-point */

static int shm_send(struct comm *c, const void *buf, size_t bytes, int dst)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	struct shm_msg *m = malloc(sizeof *m + bytes);
	struct shm_slot *to = &g->slots[dst];

	if (!m) {
		comm_world_abort(g->world, "send: out of memory");
		return COMM_ENOMEM;
	}
	m->next = NULL;
	m->src = c->rank;
	m->bytes = bytes;
	memcpy(m->data, buf, bytes);
	pthread_mutex_lock(&g->mail_lock);
	if (to->mail_tail)
		to->mail_tail->next = m;
	else
		to->mail_head = m;
	to->mail_tail = m;
	pthread_cond_broadcast(&g->mail_cond);
	pthread_mutex_unlock(&g->mail_lock);
	return is_aborted(g->world) ? COMM_EABORTED : COMM_OK;
}

/* Take the first message from src out of slot's mailbox (mail lock held). */
static struct shm_msg *take_mail(struct shm_slot *slot, int src)
{
	struct shm_msg *prev = NULL;

	for (struct shm_msg *m = slot->mail_head; m; prev = m, m = m->next) {
		if (m->src != src)
			continue;
		if (prev)
			prev->next = m->next;
		else
			slot->mail_head = m->next;
		if (slot->mail_tail == m)
			slot->mail_tail = prev;
		return m;
	}
	return NULL;
}

static int shm_recv(struct comm *c, void *buf, size_t bytes, int src)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	struct shm_msg *m = NULL;
	char why[160];

	pthread_mutex_lock(&g->mail_lock);
	while (!is_aborted(g->world) && !(m = take_mail(me, src)))
		pthread_cond_wait(&g->mail_cond, &g->mail_lock);
	pthread_mutex_unlock(&g->mail_lock);
	if (!m)
		return COMM_EABORTED;
	if (m->bytes != bytes) {
		snprintf(why, sizeof why, "rank %d expected %zu bytes from rank %d, which sent %zu",
			 c->rank, bytes, src, m->bytes);
		free(m);
		comm_world_abort(g->world, why);
		return COMM_EINVAL;
	}
	memcpy(buf, m->data, bytes);
	free(m);
	return COMM_OK;
}

/* ------------------------------------------------------------------ split */

/* Does rank a come before rank b in the new group's order (key, old rank)? */
static int split_before(const struct shm_group *g, int a, int b)
{
	if (g->slots[a].key != g->slots[b].key)
		return g->slots[a].key < g->slots[b].key;
	return a < b;
}

/*
 * Run by the lowest rank of each color between the two barriers of a split:
 * make the group and tell every member its group and rank there.
 */
static void split_lead(struct shm_group *g, int leader)
{
	int color = g->slots[leader].color, m = 0;
	struct shm_group *ng;

	for (int k = leader; k < g->n; k++)
		m += g->slots[k].color == color;
	ng = group_new(g->world, m);
	for (int k = leader; k < g->n; k++) {
		int pos = 0;

		if (g->slots[k].color != color)
			continue;
		for (int j = leader; j < g->n; j++)
			if (g->slots[j].color == color && split_before(g, j, k))
				pos++;
		g->slots[k].newgroup = ng;
		g->slots[k].newrank = pos;
	}
}

static int shm_split(struct comm *c, int color, int key, struct comm **out)
{
	struct shm_slot *me;
	struct shm_group *g = group_of(c, &me);
	struct shm_comm *sc = calloc(1, sizeof *sc);
	int leader = 1, rc;

	me->color = sc ? color : COMM_UNDEFINED;
	me->key = key;
	me->newgroup = NULL;
	if ((rc = group_barrier(g)))
		goto fail;
	for (int k = 0; k < c->rank; k++)
		if (g->slots[k].color == me->color)
			leader = 0;
	if (me->color != COMM_UNDEFINED && leader)
		split_lead(g, c->rank);
	if ((rc = group_barrier(g)))
		goto fail;
	if (color == COMM_UNDEFINED) {
		free(sc);
		return COMM_OK;
	}
	if (!sc || !me->newgroup) {
		rc = COMM_ENOMEM;
		goto fail;
	}
	sc->base.ops = &shm_ops;
	sc->base.rank = me->newrank;
	sc->base.size = me->newgroup->n;
	sc->g = me->newgroup;
	*out = &sc->base;
	return COMM_OK;
fail:
	free(sc);
	return rc;
}

static void shm_free(struct comm *c)
{
	struct shm_comm *sc = (struct shm_comm *)c;

	group_unref(sc->g);
	free(sc);
}

/* ------------------------------------------------------------------ abort */

void comm_world_abort(struct comm_world *w, const char *reason)
{
	pthread_mutex_lock(&w->lock);
	if (!is_aborted(w))
		snprintf(w->reason, sizeof w->reason, "%s", reason ? reason : "aborted");
	atomic_store(&w->aborted, 1);
	for (struct shm_group *g = w->groups; g; g = g->next) {
		atomic_fetch_add(&g->gen, 1);
		futex_wake_all(&g->gen);
		pthread_mutex_lock(&g->mail_lock);
		pthread_cond_broadcast(&g->mail_cond);
		pthread_mutex_unlock(&g->mail_lock);
	}
	pthread_mutex_unlock(&w->lock);
}

static void shm_abort(struct comm *c, const char *reason)
{
	comm_world_abort(((struct shm_comm *)c)->g->world, reason);
}

static const char *shm_abort_reason(const struct comm *c)
{
	return ((const struct shm_comm *)c)->g->world->reason;
}

static const struct comm_ops shm_ops = {
	.name = "shm",
	.allreduce = shm_allreduce,
	.reduce_scatter = shm_reduce_scatter,
	.allgather = shm_allgather,
	.broadcast = shm_broadcast,
	.barrier = shm_barrier,
	.send = shm_send,
	.recv = shm_recv,
	.split = shm_split,
	.free = shm_free,
	.abort = shm_abort,
	.abort_reason = shm_abort_reason,
};

/* ------------------------------------------------------------------ world */

struct comm_world *comm_world_create(int nranks)
{
	struct comm_world *w;

	if (nranks < 1 || !(w = calloc(1, sizeof *w)))
		return NULL;
	w->n = nranks;
	pthread_mutex_init(&w->lock, NULL);
	if (!(w->top = group_new(w, nranks)))
		goto fail;
	if (!(w->ranks = calloc((size_t)nranks, sizeof w->ranks[0])))
		goto fail;
	for (int r = 0; r < nranks; r++) {
		w->ranks[r].base.ops = &shm_ops;
		w->ranks[r].base.rank = r;
		w->ranks[r].base.size = nranks;
		w->ranks[r].g = w->top;
	}
	return w;
fail:
	comm_world_destroy(w);
	return NULL;
}

struct comm *comm_world_rank(struct comm_world *w, int rank)
{
	if (rank < 0 || rank >= w->n)
		return NULL;
	return &w->ranks[rank].base;
}

void comm_world_destroy(struct comm_world *w)
{
	if (!w)
		return;
	while (w->groups) {          /* the world group, and any not freed */
		struct shm_group *g = w->groups;

		w->groups = g->next;
		group_destroy(g);
	}
	free(w->ranks);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
