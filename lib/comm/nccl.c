/*
 * lib/comm/nccl.c - NCCL collectives on device buffers, for lib/comm/device.c.
 *
 * One NCCL communicator per group, made beside the group's host
 * communicator: the world's from a unique id that rank 0 makes and the host
 * world broadcasts (the rendezvous already connected the host world, so no
 * other bootstrap is needed), the groups' by ncclCommSplit. Calls run on
 * the calling thread's default stream (the kernels' stream: the CUDA
 * backend is built with per-thread default streams) and return when NCCL is
 * done, so callers see the same blocking contract as every other backend.
 *
 * While waiting, a call polls NCCL's asynchronous error and the host
 * world: when another rank fails it aborts the host world (comm_abort),
 * and this rank then aborts its NCCL communicator instead of waiting for a
 * peer that will never come; the error returned is COMM_EABORTED, with the
 * host world's reason (or NCCL's message) as comm_abort_reason.
 *
 * Builds without CUDA get the stubs at the end.
 */
#include "config.h"
#include "lib/comm/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

struct comm_nccl {
	ncclComm_t comm;
	int aborted;
};

int comm_nccl_available(void)
{
	return 1;
}

const char *comm_nccl_version(void)
{
	static char buf[32];
	int v = 0;

	ncclGetVersion(&v);
	/* NCCL >= 2.9: major * 10000 + minor * 100 + patch */
	snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
	return buf;
}

/* The world failed: say why on the host world (which wakes the host waiters) and stop NCCL. */
static int nccl_failed(struct comm_nccl *n, struct comm *inner, const char *what,
		       ncclResult_t res)
{
	char msg[512];

	if (!comm_abort_reason(inner)[0]) {
		snprintf(msg, sizeof msg, "NCCL %s failed: %s (%s)", what, ncclGetErrorString(res),
			 ncclGetLastError(n ? n->comm : NULL));
		comm_abort(inner, msg);
	}
	comm_nccl_abort(n);
	return COMM_EABORTED;
}

/*
 * Wait for the operation just queued on the per-thread stream, watching
 * for NCCL's asynchronous errors and for the host world's abort.
 */
static int nccl_wait(struct comm_nccl *n, struct comm *inner, const char *what)
{
	for (;;) {
		cudaError_t q = cudaStreamQuery(cudaStreamPerThread);
		ncclResult_t async = ncclSuccess;

		if (q == cudaSuccess)
			return 0;
		if (q != cudaErrorNotReady) {
			char msg[256];

			snprintf(msg, sizeof msg, "CUDA error during NCCL %s: %s", what,
				 cudaGetErrorString(q));
			comm_abort(inner, msg);
			comm_nccl_abort(n);
			return COMM_EABORTED;
		}
		if (ncclCommGetAsyncError(n->comm, &async) != ncclSuccess || async != ncclSuccess)
			return nccl_failed(n, inner, what, async);
		if (comm_abort_reason(inner)[0]) {
			comm_nccl_abort(n);
			return COMM_EABORTED;
		}
		sched_yield();
	}
}

static int nccl_type(enum comm_dtype t, ncclDataType_t *out)
{
	switch (t) {
	case COMM_FLOAT32: *out = ncclFloat32; return 0;
	case COMM_FLOAT64: *out = ncclFloat64; return 0;
	case COMM_INT32: *out = ncclInt32; return 0;
	case COMM_INT64: *out = ncclInt64; return 0;
	case COMM_UINT8: *out = ncclUint8; return 0;
	}
	return COMM_EINVAL;
}

/* Whether n can take a call on data of type t (its NCCL type in *nt): 0 or a COMM_E* code. */
static int nccl_ready(const struct comm_nccl *n, enum comm_dtype t, ncclDataType_t *nt)
{
	if (n->aborted)
		return COMM_EABORTED;
	return nccl_type(t, nt) ? COMM_EINVAL : 0;
}

static ncclRedOp_t nccl_op(enum comm_op op)
{
	return op == COMM_MAX ? ncclMax : op == COMM_MIN ? ncclMin : ncclSum;
}

int comm_nccl_create(struct comm *inner, struct comm_nccl **out, char *err, size_t errlen)
{
	ncclUniqueId id;
	struct comm_nccl *n;
	ncclResult_t res;
	int rc;

	*out = NULL;
	memset(&id, 0, sizeof id);
	if (inner->rank == 0 && (res = ncclGetUniqueId(&id)) != ncclSuccess) {
		snprintf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(res));
		comm_abort(inner, err);
		return COMM_EABORTED;
	}
	if ((rc = comm_broadcast(inner, &id, sizeof id, COMM_UINT8, 0))) {
		snprintf(err, errlen, "broadcasting the NCCL id: %s", comm_strerror(rc));
		return rc;
	}
	if (!(n = calloc(1, sizeof *n)))
		return COMM_ENOMEM;
	if ((res = ncclCommInitRank(&n->comm, inner->size, id, inner->rank)) != ncclSuccess) {
		snprintf(err, errlen, "ncclCommInitRank (rank %d of %d): %s (%s)", inner->rank,
			 inner->size, ncclGetErrorString(res), ncclGetLastError(NULL));
		free(n);
		comm_abort(inner, err);
		return COMM_EABORTED;
	}
	*out = n;
	return 0;
}

int comm_nccl_split(struct comm_nccl *parent, struct comm *inner, int color, int key,
		    struct comm_nccl **out)
{
	struct comm_nccl *n;
	ncclResult_t res;

	*out = NULL;
	if (!(n = calloc(1, sizeof *n)))
		return COMM_ENOMEM;
	res = ncclCommSplit(parent->comm, color == COMM_UNDEFINED ? NCCL_SPLIT_NOCOLOR : color, key,
			    &n->comm, NULL);
	if (res != ncclSuccess) {
		free(n);
		return nccl_failed(parent, inner, "communicator split", res);
	}
	if (color == COMM_UNDEFINED || !n->comm) {
		free(n);
		return 0;
	}
	*out = n;
	return 0;
}

int comm_nccl_allreduce(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, enum comm_op op)
{
	ncclDataType_t nt;
	ncclResult_t res;
	int rc;

	if ((rc = nccl_ready(n, t, &nt)))
		return rc;
	res = ncclAllReduce(buf, buf, count, nt, nccl_op(op), n->comm, cudaStreamPerThread);
	return res != ncclSuccess ? nccl_failed(n, inner, "all-reduce", res) :
				    nccl_wait(n, inner, "all-reduce");
}

int comm_nccl_reduce_scatter(struct comm_nccl *n, struct comm *inner, const void *send,
			     void *recv, size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	ncclDataType_t nt;
	ncclResult_t res;
	int rc;

	if ((rc = nccl_ready(n, t, &nt)))
		return rc;
	res = ncclReduceScatter(send, recv, recvcount, nt, nccl_op(op), n->comm,
				cudaStreamPerThread);
	return res != ncclSuccess ? nccl_failed(n, inner, "reduce-scatter", res) :
				    nccl_wait(n, inner, "reduce-scatter");
}

int comm_nccl_allgather(struct comm_nccl *n, struct comm *inner, const void *send, void *recv,
			size_t sendcount, enum comm_dtype t)
{
	ncclDataType_t nt;
	ncclResult_t res;
	int rc;

	if ((rc = nccl_ready(n, t, &nt)))
		return rc;
	res = ncclAllGather(send, recv, sendcount, nt, n->comm, cudaStreamPerThread);
	return res != ncclSuccess ? nccl_failed(n, inner, "all-gather", res) :
				    nccl_wait(n, inner, "all-gather");
}

int comm_nccl_broadcast(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, int root)
{
	ncclDataType_t nt;
	ncclResult_t res;
	int rc;

	if ((rc = nccl_ready(n, t, &nt)))
		return rc;
	res = ncclBroadcast(buf, buf, count, nt, root, n->comm, cudaStreamPerThread);
	return res != ncclSuccess ? nccl_failed(n, inner, "broadcast", res) :
				    nccl_wait(n, inner, "broadcast");
}

int comm_nccl_sendrecv(struct comm_nccl *n, struct comm *inner, const void *sendbuf,
		       size_t sendbytes, int dst, void *recvbuf, size_t recvbytes, int src)
{
	ncclDataType_t nt;
	ncclResult_t res;
	int rc;

	if ((rc = nccl_ready(n, COMM_UINT8, &nt)))
		return rc;
	/* one group: the send and the receive progress together, as the peers' mirror group */
	res = ncclGroupStart();
	if (res == ncclSuccess) {
		ncclResult_t s = ncclSend(sendbuf, sendbytes, nt, dst, n->comm, cudaStreamPerThread);
		ncclResult_t r = ncclRecv(recvbuf, recvbytes, nt, src, n->comm, cudaStreamPerThread);

		res = ncclGroupEnd();
		res = s != ncclSuccess ? s : r != ncclSuccess ? r : res;
	}
	return res != ncclSuccess ? nccl_failed(n, inner, "send and receive", res) :
				    nccl_wait(n, inner, "send and receive");
}

void comm_nccl_abort(struct comm_nccl *n)
{
	if (n && !n->aborted) {
		n->aborted = 1;
		ncclCommAbort(n->comm);
	}
}

void comm_nccl_free(struct comm_nccl *n)
{
	if (!n)
		return;
	if (!n->aborted)
		ncclCommDestroy(n->comm);
	free(n);
}

#else /* !HAVE_CUDA: no NCCL in this build; device.c stages through the host */

int comm_nccl_available(void)
{
	return 0;
}

const char *comm_nccl_version(void)
{
	return "none";
}

int comm_nccl_create(struct comm *inner, struct comm_nccl **out, char *err, size_t errlen)
{
	(void)inner;
	*out = NULL;
	snprintf(err, errlen, "this build has no NCCL");
	return COMM_EINVAL;
}

int comm_nccl_split(struct comm_nccl *parent, struct comm *inner, int color, int key,
		    struct comm_nccl **out)
{
	(void)parent, (void)inner, (void)color, (void)key;
	*out = NULL;
	return COMM_EINVAL;
}

int comm_nccl_allreduce(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, enum comm_op op)
{
	(void)n, (void)inner, (void)buf, (void)count, (void)t, (void)op;
	return COMM_EINVAL;
}

int comm_nccl_reduce_scatter(struct comm_nccl *n, struct comm *inner, const void *send,
			     void *recv, size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	(void)n, (void)inner, (void)send, (void)recv, (void)recvcount, (void)t, (void)op;
	return COMM_EINVAL;
}

int comm_nccl_allgather(struct comm_nccl *n, struct comm *inner, const void *send, void *recv,
			size_t sendcount, enum comm_dtype t)
{
	(void)n, (void)inner, (void)send, (void)recv, (void)sendcount, (void)t;
	return COMM_EINVAL;
}

int comm_nccl_broadcast(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, int root)
{
	(void)n, (void)inner, (void)buf, (void)count, (void)t, (void)root;
	return COMM_EINVAL;
}

int comm_nccl_sendrecv(struct comm_nccl *n, struct comm *inner, const void *sendbuf,
		       size_t sendbytes, int dst, void *recvbuf, size_t recvbytes, int src)
{
	(void)n, (void)inner, (void)sendbuf, (void)sendbytes, (void)dst, (void)recvbuf;
	(void)recvbytes, (void)src;
	return COMM_EINVAL;
}

void comm_nccl_abort(struct comm_nccl *n)
{
	(void)n;
}

void comm_nccl_free(struct comm_nccl *n)
{
	(void)n;
}

#endif
