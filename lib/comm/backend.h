/*
 * lib/comm/backend.h - what a collectives backend provides (for the files
 * of lib/comm only; users include lib/comm/comm.h).
 *
 * A backend embeds struct comm at the start of its own per-rank handle and
 * fills in an ops table. lib/comm/comm.c checks the arguments, handles the
 * trivial cases (empty buffers) and dispatches; the backend does the work,
 * reducing with comm_reduce_local() so that every backend computes the same
 * fold in the same order (see lib/comm/comm.h).
 */
#ifndef STORK_COMM_BACKEND_H
#define STORK_COMM_BACKEND_H

#include "lib/comm/comm.h"

#include <stdint.h>

struct comm_ops {
	const char *name;
	int (*allreduce)(struct comm *c, void *buf, size_t count,
			 enum comm_dtype t, enum comm_op op);
	int (*reduce_scatter)(struct comm *c, const void *send, void *recv,
			      size_t recvcount, enum comm_dtype t, enum comm_op op);
	int (*allgather)(struct comm *c, const void *send, void *recv,
			 size_t sendcount, enum comm_dtype t);
	int (*broadcast)(struct comm *c, void *buf, size_t count,
			 enum comm_dtype t, int root);
	int (*barrier)(struct comm *c);
	int (*send)(struct comm *c, const void *buf, size_t bytes, int dst);
	int (*recv)(struct comm *c, void *buf, size_t bytes, int src);
	/* NULL: comm_sendrecv is send, then recv */
	int (*sendrecv)(struct comm *c, const void *sendbuf, size_t sendbytes, int dst,
			void *recvbuf, size_t recvbytes, int src);
	int (*split)(struct comm *c, int color, int key, struct comm **out);
	void (*free)(struct comm *c);
	void (*abort)(struct comm *c, const char *reason);
	const char *(*abort_reason)(const struct comm *c);
};

struct comm {
	const struct comm_ops *ops;
	int rank;
	int size;
	/* what a hang's report says of the group (comm_describe); zero: undescribed */
	const char *name;
	int first, block, stride;
	uint64_t calls;                 /* collectives and transfers begun on this handle */
};

/* ------------------------------------------------ UCX internals for hier.c */

/*
 * A communicator over members[0..n-1] (ranks of the UCX communicator world,
 * which must include world's own rank) with communicator id `id`, made
 * locally: every member must make it with the same members and id, and no
 * other communicator of the process may use that id. Shares world's
 * endpoints; free it with comm_free before world.
 */
int comm_ucx_group(struct comm *world, int n, const int *members, uint16_t id,
		   struct comm **out);

/* Whether several threads may use the communicators of world's comm_ucx at once. */
int comm_ucx_is_multithreaded(const struct comm *world);

/*
 * A buffered send of len bytes to rank dst of the UCX communicator c with
 * an explicit tag (the caller keeps tags unique per channel, source,
 * destination and sequence), and the matching receive; *got is the length
 * the sender sent, which may exceed len (then buf holds only its first len
 * bytes: the caller reports the mismatch). Returns 0 or a COMM_E* code
 * (COMM_EABORTED when the comm_ucx is aborted, a peer's failure included).
 */
int comm_ucx_send_tagged(struct comm *c, int dst, uint64_t tag, const void *buf, size_t len);
int comm_ucx_recv_tagged(struct comm *c, int src, uint64_t tag, void *buf, size_t len,
			 size_t *got);

/*
 * The tag of point-to-point message number seq from src to dst (ranks up to
 * 65535) on channel id (a communicator id the caller owns): its top byte
 * 0xff marks it apart from every collective, whose tags begin with their
 * communicator's id (below 0xfe00). Only seq's low byte is kept: UCX
 * matches the messages of one endpoint in the order they were sent, so it
 * is a check, not what orders them. comm_ucx_coll_tag is the same for the
 * pairwise messages inside a collective (top byte 0xfe), so that they never
 * meet the user's point-to-point messages between the same two ranks.
 */
uint64_t comm_ucx_p2p_tag(uint16_t id, int src, int dst, uint16_t seq);
uint64_t comm_ucx_coll_tag(uint16_t id, int src, int dst, uint16_t seq);

/* ------------------------------------- NCCL internals for device.c */

/*
 * An NCCL communicator beside a host one (lib/comm/nccl.c). Builds without
 * CUDA have stubs: comm_nccl_available() is 0 and the rest fail or do
 * nothing. Every call blocks until NCCL is done on the calling thread's
 * stream, watching inner: when the host world is aborted (a failing rank),
 * the NCCL communicator is aborted too, so no rank waits in NCCL forever.
 */
struct comm_nccl;
int comm_nccl_available(void);
const char *comm_nccl_version(void);
/* Collective over inner: rank 0 makes the unique id, inner broadcasts it. */
int comm_nccl_create(struct comm *inner, struct comm_nccl **out, char *err, size_t errlen);
/* Collective over parent's ranks; color COMM_UNDEFINED gives *out NULL. */
int comm_nccl_split(struct comm_nccl *parent, struct comm *inner, int color, int key,
		    struct comm_nccl **out);
int comm_nccl_allreduce(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, enum comm_op op);
int comm_nccl_reduce_scatter(struct comm_nccl *n, struct comm *inner, const void *send,
			     void *recv, size_t recvcount, enum comm_dtype t, enum comm_op op);
int comm_nccl_allgather(struct comm_nccl *n, struct comm *inner, const void *send, void *recv,
			size_t sendcount, enum comm_dtype t);
int comm_nccl_broadcast(struct comm_nccl *n, struct comm *inner, void *buf, size_t count,
			enum comm_dtype t, int root);
/* One group of a send to dst and a receive from src (bytes); the peers make the mirror call. */
int comm_nccl_sendrecv(struct comm_nccl *n, struct comm *inner, const void *sendbuf,
		       size_t sendbytes, int dst, void *recvbuf, size_t recvbytes, int src);
void comm_nccl_abort(struct comm_nccl *n);
void comm_nccl_free(struct comm_nccl *n);

/* acc[i] = op(acc[i], x[i]) for i < count: one step of the rank-order fold. */
void comm_reduce_local(void *acc, const void *x, size_t count,
		       enum comm_dtype t, enum comm_op op);

#endif
