/*
 * lib/comm/comm.h - the collectives interface of Stork.
 *
 * A communicator (struct comm) is one rank's handle on a group of ranks. Every
 * member calls the same collective in the same order with matching arguments;
 * each call returns when this rank's part is done and its buffers may be
 * reused. A struct comm belongs to one thread.
 *
 * Backends implement struct comm_ops (lib/comm/backend.h): the in-node shared
 * memory backend below (ranks are threads of one process, lib/comm/shm.c);
 * UCX between nodes and NCCL on GPUs implement the same table.
 *
 * Reduction order (all backends must give these bits): element i of a
 * reduction over a group of n ranks is the left fold in communicator rank
 * order,
 *
 *     r[i] = op(...op(op(x_0[i], x_1[i]), x_2[i])..., x_{n-1}[i])
 *
 * evaluated in the element type (float32 adds in float32, no fused or
 * reassociated arithmetic). The result depends only on the inputs and the rank
 * order, not on the element count, chunking, thread timing or backend, so the
 * same layout gives the same bits every run, and reduce-scatter followed by
 * all-gather gives exactly the bits of all-reduce. op(a, b) is a + b for SUM,
 * (b > a ? b : a) for MAX and (b < a ? b : a) for MIN; integer sums wrap
 * modulo 2^width.
 *
 * Errors: every call returns 0 or a negative COMM_E* code. After an abort
 * (comm_abort, from any rank of the world, at any time) every pending and
 * future call of every communicator of that world returns COMM_EABORTED, so a
 * failing rank wakes the others instead of leaving them blocked.
 */
#ifndef STORK_COMM_H
#define STORK_COMM_H

#include <stddef.h>
#include <stdint.h>

enum comm_dtype {
	COMM_FLOAT32,
	COMM_FLOAT64,
	COMM_INT32,
	COMM_INT64,
	COMM_UINT8,   /* raw bytes: broadcast/all-gather of any data; reductions too */
};

enum comm_op {
	COMM_SUM,
	COMM_MAX,
	COMM_MIN,
};

enum comm_error {
	COMM_OK = 0,
	COMM_EABORTED = -1, /* the world was aborted; see comm_abort_reason() */
	COMM_EINVAL = -2,   /* bad argument (dtype, op, root, NULL buffer) */
	COMM_ENOMEM = -3,   /* out of memory */
	COMM_ESYS = -4,     /* a system or transport call failed */
};

/* Color for comm_split() meaning "not in any new group" (its *out is NULL). */
#define COMM_UNDEFINED (-1)

struct comm;
struct comm_world;

/* Size in bytes of one element of t (0 for an unknown type). */
size_t comm_dtype_size(enum comm_dtype t);

/* A short English description of an error code ("aborted", ...). */
const char *comm_strerror(int err);

/* This rank's index in the communicator, 0..size-1. */
int comm_rank(const struct comm *c);

/* Number of ranks in the communicator. */
int comm_size(const struct comm *c);

/*
 * Sum, max or min of count elements over all ranks, in place: on return
 * every rank's buf holds the reduction (order: see the top of this file).
 */
int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype t,
		   enum comm_op op);

/*
 * send holds size*recvcount elements on every rank; rank r receives in recv
 * the reduction of elements [r*recvcount, (r+1)*recvcount). send and recv
 * must not overlap.
 */
int comm_reduce_scatter(struct comm *c, const void *send, void *recv,
			size_t recvcount, enum comm_dtype t, enum comm_op op);

/*
 * Every rank contributes sendcount elements; recv (size*sendcount elements)
 * receives rank k's at offset k*sendcount on every rank. send may be recv
 * + rank*sendcount (in place); otherwise they must not overlap.
 */
int comm_allgather(struct comm *c, const void *send, void *recv,
		   size_t sendcount, enum comm_dtype t);

/* Copy root's count elements of buf into every other rank's buf. */
int comm_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype t,
		   int root);

/* Return once every rank of the communicator has entered the barrier. */
int comm_barrier(struct comm *c);

/*
 * Point-to-point, for pipeline activations and their gradients. Not
 * collective: only the two ranks take part. comm_send returns as soon as buf
 * may be reused, without waiting for the receiver (the message is buffered:
 * two ranks sending to each other at the same time cannot deadlock).
 * comm_recv waits for the next message from src; messages from one sender
 * arrive in the order they were sent; count and type must match the send's
 * (a mismatch is COMM_EINVAL and aborts the world, since the two ranks no
 * longer agree on the schedule). An abort wakes a blocked receiver.
 */
int comm_send(struct comm *c, const void *buf, size_t count, enum comm_dtype t, int dst);
int comm_recv(struct comm *c, void *buf, size_t count, enum comm_dtype t, int src);

/*
 * comm_send of sendcount elements to dst and comm_recv of recvcount from
 * src as one exchange, whose peers make the mirror call (dst sends to this
 * rank what it receives, src receives what this rank sends): the pipeline's
 * activations going forward while their gradients come back. On host
 * communicators it is the send, then the receive. On a device communicator
 * whose groups have NCCL, with both buffers in device memory, it is one
 * NCCL group of a send and a receive: NCCL's point-to-point waits for its
 * peer, so only the mirrored pair cannot deadlock (the plain comm_send
 * and comm_recv stay buffered, through the host).
 */
int comm_sendrecv(struct comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
		  size_t recvcount, int src, enum comm_dtype t);

/*
 * Collective over c: ranks passing the same color form a new communicator,
 * ordered by (key, rank in c). *out is the caller's handle on it (free with
 * comm_free), or NULL for color COMM_UNDEFINED. Used for the data, tensor and
 * pipeline parallel groups. Sub-communicators share the world's abort.
 */
int comm_split(struct comm *c, int color, int key, struct comm **out);

/* Release a communicator made by comm_split (local, not collective). */
void comm_free(struct comm *c);

/*
 * Abort the world c belongs to: every pending and future call of every
 * communicator of that world, on every rank, returns COMM_EABORTED. reason is
 * copied (first abort wins) and may be NULL. Safe from any thread.
 */
void comm_abort(struct comm *c, const char *reason);

/* The first abort's reason ("" if none); valid until the world is destroyed. */
const char *comm_abort_reason(const struct comm *c);

/* ------------------------------------------------ where a rank waits
 *
 * For a hang's report: every call above, made by a thread with a trace
 * attached, records in it what it is, on which group, which call of that
 * group's it is and since when; its return clears it, an error keeps it
 * (marked failed). A backend's own calls inside one (nested) leave the
 * outer record. Relaxed atomics: a watchdog thread reads the traces of the
 * ranks it supervises while they run, and a record it reads mid-change is
 * still one of the two calls'.
 */
enum comm_trace_op {
	COMM_TRACE_NONE,
	COMM_TRACE_ALLREDUCE,
	COMM_TRACE_REDUCE_SCATTER,
	COMM_TRACE_ALLGATHER,
	COMM_TRACE_BROADCAST,
	COMM_TRACE_BARRIER,
	COMM_TRACE_SEND,
	COMM_TRACE_RECV,
};

struct comm_trace {
	_Atomic int op;                 /* enum comm_trace_op */
	_Atomic int failed;             /* the call returned an error */
	_Atomic(const char *) group;    /* comm_describe's name, or NULL */
	_Atomic int first, block, stride, count; /* the group's members (comm_member) */
	_Atomic int peer;               /* send, recv: the other rank (global), else -1 */
	_Atomic uint64_t bytes, call;   /* the call's bytes; its number on the group (1, 2, ...) */
	_Atomic double since;           /* CLOCK_MONOTONIC seconds when it began */
};

/*
 * Name c's group for the reports and give its members as global ranks:
 * member i is first + (i / block) * stride + i % block (the dp, tp, pp
 * groups of a layout are such progressions; the world is 0, size, 0).
 */
void comm_describe(struct comm *c, const char *name, int first, int block, int stride);

/* Global rank of member i of a group described so. */
int comm_member(int first, int block, int stride, int i);

/* The trace the calling thread's calls record into (NULL: none). */
void comm_trace_attach(struct comm_trace *t);

/* "all-reduce", "send", ... ("" for none). */
const char *comm_trace_op_name(int op);

/* ------------------------------------------------ in-node shared memory
 *
 * Ranks are threads of one process (storkd's workers). The world is created
 * once, before the threads start; thread r takes comm_world_rank(w, r).
 */

/* A world of nranks >= 1 thread ranks, or NULL when out of memory. */
struct comm_world *comm_world_create(int nranks);

/* Rank r's communicator over the whole world (owned by the world). */
struct comm *comm_world_rank(struct comm_world *w, int rank);

/* Same as comm_abort on any rank of w. */
void comm_world_abort(struct comm_world *w, const char *reason);

/*
 * Free the world once no thread uses it; communicators made by comm_split
 * must have been freed by their owners.
 */
void comm_world_destroy(struct comm_world *w);

/* ------------------------------------------------ between processes: UCX
 *
 * One struct comm_ucx per process (one UCX context and worker); its worker
 * address goes through the rendezvous to every peer. Each communicator
 * belongs to one thread; different communicators of one comm_ucx may be
 * used by different threads at the same time where UCX is thread-safe
 * (Debian's is: the workers run in UCS_THREAD_MODE_MULTI), except that
 * comm_split runs on one of them at a time (a split agrees on an id no
 * member uses, with one all-reduce over the parent).
 */
struct comm_ucx;

/*
 * Open UCX; *addr and *addrlen give this worker's address (owned by *out)
 * for the rendezvous to exchange.
 */
int comm_ucx_open(struct comm_ucx **out, const void **addr, size_t *addrlen);

/*
 * Connect to every rank (addrs[k]: rank k's worker address, own included)
 * and make rank `rank`'s communicator over all nranks. Free it with
 * comm_free (collective: it ends with a barrier) before comm_ucx_close.
 */
int comm_ucx_world(struct comm_ucx *u, int rank, int nranks,
		   const void *const *addrs, struct comm **out);

/* Close UCX once its communicators are freed. */
void comm_ucx_close(struct comm_ucx *u);

/*
 * Progress u once from any thread (a supervisor's, while the ranks may be
 * busy elsewhere) so a dead peer is noticed; returns COMM_EABORTED once u
 * is aborted, else 0.
 */
int comm_ucx_poll(struct comm_ucx *u);

/*
 * Bytes the calling thread has sent over UCX so far (every comm_ucx): the
 * traffic between nodes a rank thread caused (in a hierarchical collective,
 * the node leader's and columns' share). Shared memory is not counted.
 */
uint64_t comm_ucx_thread_bytes_sent(void);

/* ================================================ UCX peer failures and
 * the hierarchical communicator (lib/comm/ucx.c, lib/comm/hier.c)
 */

/*
 * The world rank of the first peer whose process failed (UCX reported its
 * endpoint broken; the comm_ucx is then aborted with the reason
 * "rank K (peer process) failed: WHY"), or -1 if none did. why (may be NULL)
 * receives UCX's description of the failure.
 */
int comm_ucx_failed_peer(struct comm_ucx *u, char *why, size_t len);

/*
 * Hierarchical communicator: the global communicator over all ranks of all
 * nodes, for storkd (one process per node, one thread per local rank).
 * Global ranks are node-major: node k's local rank i is global rank
 * base_k + i, base_k = sum of the local rank counts of nodes 0..k-1.
 *
 * Inside a node the ranks talk through the node's shared-memory world; local
 * rank 0 of each node is the only thread that touches the node's comm_ucx,
 * which connects the nodes (one UCX rank per node, UCX rank = node index).
 *
 * Reduction order (this communicator's exception to the flat fold above):
 * element i is the fold over nodes 0..N-1, in node order, of each node's
 * fold over its local ranks in local rank order,
 *
 *     r[i] = op(...op(s_0[i], s_1[i])..., s_{N-1}[i]),
 *     s_k[i] = op(...op(x_{k,0}[i], x_{k,1}[i])..., x_{k,n_k-1}[i]).
 *
 * It equals the flat fold when every node has one rank or there is one node.
 * The same layout (node count and local rank counts) gives the same bits run
 * after run; reduce-scatter and all-gather give exactly all-reduce's bits.
 *
 * All-reduce: all-reduce in the node (shared memory) -> all-reduce across
 * nodes by local rank 0 (UCX) -> broadcast in the node. Reduce-scatter,
 * when every node has as many ranks: each node reduce-scatters every node's
 * block in shared memory, then the ranks of equal local rank on all nodes
 * reduce-scatter those partial sums over UCX (about (N-1)/N of a segment
 * per node and rank on the wire, N segments of memory); otherwise each
 * node reduce-scatters its own block in shared memory and every other
 * segment in n_k pieces, member l of node k sends piece l to the segment's
 * owner, which folds the nodes' partial sums in node order (about
 * (size - n_k)/n_k segments out and N-1 in per rank, a few segments of
 * memory). Never a copy of the whole buffer, unless UCX is single-threaded.
 * All-gather gathers in the node, then
 * across node leaders, then broadcasts in the node; broadcast goes root ->
 * its node's rank 0 -> other node leaders -> their nodes. Send and receive
 * go through shared memory inside a node and straight over UCX between
 * nodes (from the sending thread, tagged with both global ranks).
 *
 * comm_split (of the global communicator; groups cannot be split again)
 * makes groups that may span nodes: members on one node talk through a
 * shared-memory group, the lowest of them leads the node's part, and every
 * collective keeps the two-level fold (in-node order, then node order)
 * over the group's members (nodes in the order the group meets them). A
 * group's member order (key, then rank) must keep each node's members
 * together, and
 * groups across nodes need a thread-safe UCX (comm_ucx uses
 * UCS_THREAD_MODE_MULTI): otherwise comm_split returns COMM_EINVAL on every
 * rank. Several groups may run collectives at the same time from
 * different threads. A group inside one node is a plain shared-memory
 * group.
 *
 * Abort: comm_abort on any rank aborts the node's shared-memory world and the
 * comm_ucx, so no thread of the process stays blocked; a failed peer process
 * (reported by the comm_ucx) aborts the node's world with a reason naming the
 * peer node and its global ranks. Other processes learn of an abort when the
 * aborting process exits (or, over TCP, closes its endpoints).
 */
struct comm_hier;

/*
 * Collective across nodes, called once per process by one thread before the
 * rank threads use the communicator: node is this node's shared-memory world
 * (local_ranks_per_node[node_index] ranks), u this process's comm_ucx,
 * node_addrs[k] node k's UCX worker address (own included; only read during
 * the call). With nnodes == 1, u may be NULL. Returns 0 or a COMM_E* code.
 */
int comm_hier_create(struct comm_world *node, struct comm_ucx *u, int node_index,
		     int nnodes, const void *const *node_addrs,
		     const int *local_ranks_per_node, struct comm_hier **out);

/*
 * Local rank `local`'s communicator over all ranks (owned by h), usable with
 * every comm_* call from that rank's thread; comm_rank/comm_size are global.
 */
struct comm *comm_hier_rank(struct comm_hier *h, int local);

/*
 * From a supervising thread, now and then: progress UCX so that a dead peer
 * process is noticed even while every rank waits in shared memory (e.g. a
 * pipeline stage for its neighbour on this node); the node's world is then
 * aborted with a reason naming the peer.
 */
void comm_hier_watch(struct comm_hier *h);

/*
 * Free h once the rank threads are done with it; collective across nodes
 * (it frees the UCX communicator, which ends with a barrier unless aborted).
 * The node world and the comm_ucx stay the caller's.
 */
void comm_hier_destroy(struct comm_hier *h);

/* ------------------------------------------------------ GPU buffers */

/*
 * What a communicator needs to know about a GPU's memory (lib/comm stays
 * free of CUDA; the caller passes the compute backend's functions).
 */
struct comm_device_memory {
	int (*is_device)(const void *p);  /* whether p points into device memory */
	void (*to_host)(void *host_dst, const void *src, size_t bytes);
	void (*to_device)(void *dst, const void *host_src, size_t bytes);
	void *(*host_alloc)(size_t bytes); /* pinned host memory for staging */
	void (*host_free)(void *p);
	const char *device_id;            /* this rank's GPU, e.g. "node1/0000:9d:00.0" */
};

enum comm_device_path {
	COMM_DEVICE_AUTO,   /* NCCL when every rank has its own GPU and NCCL is built, else staged */
	COMM_DEVICE_NCCL,   /* NCCL, or an error saying why not */
	COMM_DEVICE_STAGED, /* through pinned host buffers and inner's own collectives */
};

/*
 * A communicator over inner's ranks whose calls take host or device
 * buffers (lib/comm/device.c): host buffers go to inner, device buffers to
 * NCCL or through the host, as `want` says and the GPUs allow (the choice
 * is the same on every rank). Collective over inner. Splits of it are
 * wrapped the same way. Freeing it leaves inner to the caller. Returns 0,
 * or a COMM_E* code with the reason in err.
 */
int comm_device_wrap(struct comm *inner, const struct comm_device_memory *mem,
		     enum comm_device_path want, struct comm **out, char *err, size_t errlen);

/* "nccl 2.27.3 on device buffers", "host-staged (...)", or "host" for another communicator. */
const char *comm_device_describe(const struct comm *c);

#endif
