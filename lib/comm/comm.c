/*
 * lib/comm/comm.c - the backend-independent half of the collectives: argument
 * checks, dispatch through the backend's ops table (lib/comm/backend.h), and
 * the element-wise reduction every backend uses, so that the arithmetic of
 * the fold documented in lib/comm/comm.h is written once.
 */
#include "config.h"
#include "lib/comm/backend.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

size_t comm_dtype_size(enum comm_dtype t)
{
	switch (t) {
	case COMM_FLOAT32: return 4;
	case COMM_FLOAT64: return 8;
	case COMM_INT32: return 4;
	case COMM_INT64: return 8;
	case COMM_UINT8: return 1;
	}
	return 0;
}

const char *comm_strerror(int err)
{
	switch (err) {
	case COMM_OK: return "success";
	case COMM_EABORTED: return "communicator aborted";
	case COMM_EINVAL: return "invalid argument";
	case COMM_ENOMEM: return "out of memory";
	case COMM_ESYS: return "system or transport error";
	}
	return "unknown error";
}

int comm_rank(const struct comm *c)
{
	return c->rank;
}

int comm_size(const struct comm *c)
{
	return c->size;
}

/* ------------------------------------------------------------ traces */

static _Thread_local struct comm_trace *thread_trace;
static _Thread_local int trace_depth;   /* nested calls leave the outer record */

void comm_trace_attach(struct comm_trace *t)
{
	thread_trace = t;
	trace_depth = 0;
}

void comm_describe(struct comm *c, const char *name, int first, int block, int stride)
{
	if (!c)
		return;
	c->name = name;
	c->first = first;
	c->block = block > 0 ? block : 1;
	c->stride = stride;
}

int comm_member(int first, int block, int stride, int i)
{
	if (block <= 0)
		block = 1;
	return first + (i / block) * stride + i % block;
}

const char *comm_trace_op_name(int op)
{
	static const char *const names[] = { "", "all-reduce", "reduce-scatter", "all-gather",
					     "broadcast", "barrier", "send", "recv" };

	return op >= 0 && op < (int)(sizeof names / sizeof names[0]) ? names[op] : "?";
}

static void trace_enter(struct comm *c, int op, size_t bytes, int peer)
{
	struct comm_trace *t = thread_trace;
	struct timespec ts;

	if (trace_depth++ || !t)
		return;
	c->calls++;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_store_explicit(&t->group, c->name, memory_order_relaxed);
	atomic_store_explicit(&t->first, c->name ? c->first : 0, memory_order_relaxed);
	atomic_store_explicit(&t->block, c->name ? c->block : c->size, memory_order_relaxed);
	atomic_store_explicit(&t->stride, c->stride, memory_order_relaxed);
	atomic_store_explicit(&t->count, c->size, memory_order_relaxed);
	atomic_store_explicit(&t->peer, peer < 0 ? -1 :
			      comm_member(c->first, c->name ? c->block : c->size, c->stride, peer),
			      memory_order_relaxed);
	atomic_store_explicit(&t->bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&t->call, c->calls, memory_order_relaxed);
	atomic_store_explicit(&t->failed, 0, memory_order_relaxed);
	atomic_store_explicit(&t->since, (double)ts.tv_sec + ts.tv_nsec / 1e9, memory_order_relaxed);
	atomic_store_explicit(&t->op, op, memory_order_release);
}

static int trace_leave(int rc)
{
	struct comm_trace *t = thread_trace;

	if (--trace_depth || !t)
		return rc;
	if (rc)
		atomic_store_explicit(&t->failed, 1, memory_order_relaxed);
	else
		atomic_store_explicit(&t->op, COMM_TRACE_NONE, memory_order_release);
	return rc;
}

/* ------------------------------------------------------------ calls */

static int valid_op(enum comm_op op)
{
	return op == COMM_SUM || op == COMM_MAX || op == COMM_MIN;
}

int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype t,
		   enum comm_op op)
{
	if (!comm_dtype_size(t) || !valid_op(op) || (count && !buf))
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_ALLREDUCE, count * comm_dtype_size(t), -1);
	return trace_leave(c->ops->allreduce(c, buf, count, t, op));
}

int comm_reduce_scatter(struct comm *c, const void *send, void *recv,
			size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	if (!comm_dtype_size(t) || !valid_op(op) || (recvcount && (!send || !recv)))
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_REDUCE_SCATTER, recvcount * (size_t)c->size * comm_dtype_size(t), -1);
	return trace_leave(c->ops->reduce_scatter(c, send, recv, recvcount, t, op));
}

int comm_allgather(struct comm *c, const void *send, void *recv,
		   size_t sendcount, enum comm_dtype t)
{
	if (!comm_dtype_size(t) || (sendcount && (!send || !recv)))
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_ALLGATHER, sendcount * (size_t)c->size * comm_dtype_size(t), -1);
	return trace_leave(c->ops->allgather(c, send, recv, sendcount, t));
}

int comm_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype t,
		   int root)
{
	if (!comm_dtype_size(t) || root < 0 || root >= c->size || (count && !buf))
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_BROADCAST, count * comm_dtype_size(t), -1);
	return trace_leave(c->ops->broadcast(c, buf, count, t, root));
}

int comm_barrier(struct comm *c)
{
	trace_enter(c, COMM_TRACE_BARRIER, 0, -1);
	return trace_leave(c->ops->barrier(c));
}

static int valid_peer(const struct comm *c, int peer)
{
	return peer >= 0 && peer < c->size && peer != c->rank;
}

int comm_send(struct comm *c, const void *buf, size_t count, enum comm_dtype t, int dst)
{
	if (!comm_dtype_size(t) || !valid_peer(c, dst) || (count && !buf))
		return COMM_EINVAL;
	if (!c->ops->send)
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_SEND, count * comm_dtype_size(t), dst);
	return trace_leave(c->ops->send(c, buf, count * comm_dtype_size(t), dst));
}

int comm_recv(struct comm *c, void *buf, size_t count, enum comm_dtype t, int src)
{
	if (!comm_dtype_size(t) || !valid_peer(c, src) || (count && !buf))
		return COMM_EINVAL;
	if (!c->ops->recv)
		return COMM_EINVAL;
	trace_enter(c, COMM_TRACE_RECV, count * comm_dtype_size(t), src);
	return trace_leave(c->ops->recv(c, buf, count * comm_dtype_size(t), src));
}

int comm_sendrecv(struct comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
		  size_t recvcount, int src, enum comm_dtype t)
{
	size_t size = comm_dtype_size(t);
	int rc;

	if (!c->ops->sendrecv) {
		if ((rc = comm_send(c, sendbuf, sendcount, t, dst)))
			return rc;
		return comm_recv(c, recvbuf, recvcount, t, src);
	}
	if (!size || !valid_peer(c, dst) || !valid_peer(c, src) || (sendcount && !sendbuf) ||
	    (recvcount && !recvbuf))
		return COMM_EINVAL;
	/* the time it takes is the wait for src, as a receive's */
	trace_enter(c, COMM_TRACE_RECV, recvcount * size, src);
	return trace_leave(c->ops->sendrecv(c, sendbuf, sendcount * size, dst, recvbuf,
					    recvcount * size, src));
}

int comm_split(struct comm *c, int color, int key, struct comm **out)
{
	*out = NULL;
	if (color < 0 && color != COMM_UNDEFINED)
		return COMM_EINVAL;
	return c->ops->split(c, color, key, out);
}

void comm_free(struct comm *c)
{
	if (c)
		c->ops->free(c);
}

void comm_abort(struct comm *c, const char *reason)
{
	c->ops->abort(c, reason);
}

const char *comm_abort_reason(const struct comm *c)
{
	return c->ops->abort_reason(c);
}

/*
 * The reduction loops: one per (type, op), on restrict pointers so the
 * compiler vectorises them; each element is one application of op, never
 * reassociated. Integer sums go through the unsigned type to wrap.
 */
#define REDUCE_LOOPS(T, UT)                                                   \
	do {                                                                  \
		T *restrict a_ = acc;                                         \
		const T *restrict x_ = x;                                     \
		switch (op) {                                                 \
		case COMM_SUM:                                                \
			for (size_t i = 0; i < count; i++)                    \
				a_[i] = (T)((UT)a_[i] + (UT)x_[i]);           \
			break;                                                \
		case COMM_MAX:                                                \
			for (size_t i = 0; i < count; i++)                    \
				a_[i] = x_[i] > a_[i] ? x_[i] : a_[i];        \
			break;                                                \
		case COMM_MIN:                                                \
			for (size_t i = 0; i < count; i++)                    \
				a_[i] = x_[i] < a_[i] ? x_[i] : a_[i];        \
			break;                                                \
		}                                                             \
	} while (0)

void comm_reduce_local(void *acc, const void *x, size_t count,
		       enum comm_dtype t, enum comm_op op)
{
	switch (t) {
	case COMM_FLOAT32: REDUCE_LOOPS(float, float); break;
	case COMM_FLOAT64: REDUCE_LOOPS(double, double); break;
	case COMM_INT32: REDUCE_LOOPS(int32_t, uint32_t); break;
	case COMM_INT64: REDUCE_LOOPS(int64_t, uint64_t); break;
	case COMM_UINT8: REDUCE_LOOPS(uint8_t, uint8_t); break;
	}
}
