/*
 * lib/comm_backend.h - what a collectives backend provides (for lib/comm_*.c
 * only; users include lib/comm.h).
 *
 * A backend embeds struct comm at the start of its own per-rank handle and
 * fills in an ops table. lib/comm.c checks the arguments, handles the
 * trivial cases (empty buffers) and dispatches; the backend does the work,
 * reducing with comm_reduce_local() so that every backend computes the same
 * fold in the same order (see lib/comm.h).
 */
#ifndef STORK_COMM_BACKEND_H
#define STORK_COMM_BACKEND_H

#include "lib/comm.h"

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
	int (*split)(struct comm *c, int color, int key, struct comm **out);
	void (*free)(struct comm *c);
	void (*abort)(struct comm *c, const char *reason);
	const char *(*abort_reason)(const struct comm *c);
};

struct comm {
	const struct comm_ops *ops;
	int rank;
	int size;
};

/* acc[i] = op(acc[i], x[i]) for i < count: one step of the rank-order fold. */
void comm_reduce_local(void *acc, const void *x, size_t count,
		       enum comm_dtype t, enum comm_op op);

#endif
