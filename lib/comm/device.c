/*
 * lib/comm/device.c - collectives on GPU buffers: a communicator that wraps
 * a host one (shared memory, UCX, hier) and also takes device pointers.
 *
 * A rank that computes on a GPU keeps its gradients and activations there,
 * but the training loop also sends host scalars (the loss, the stop flag)
 * through the same communicators. Every call therefore looks at its
 * buffer: host memory goes to the wrapped communicator unchanged; device
 * memory goes one of two ways, chosen once for the whole world:
 *
 *   - nccl: NCCL on the device buffers (lib/comm/nccl.c), one NCCL
 *     communicator per group, made alongside the host one (ncclCommSplit);
 *   - staged: device -> pinned host buffer, the wrapped collective,
 *     host -> device. Slower, but it works where NCCL does not: two ranks
 *     on one GPU (NCCL refuses that), builds or GPUs without NCCL.
 *
 * Determinism: staged collectives are the wrapped backend's, so their
 * results are the CPU backends' bits (the rank-order fold). NCCL reduces
 * in its own order (rings, trees, chunked): the same bits run to run for
 * the same layout, GPUs and NCCL version, but not the CPU backends' bits.
 */
#include "config.h"
#include "lib/comm/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dev_comm {
	struct comm base;
	struct comm *inner;         /* the host communicator of the same ranks */
	int owns_inner;             /* made by a split: freed with this one */
	struct comm_device_memory mem;
	struct comm_nccl *nccl;     /* NULL: device buffers are staged through the host */
	void *stage;                /* pinned host buffer of stage_bytes */
	size_t stage_bytes;
	char describe[160];
};

static struct dev_comm *dev(struct comm *c)
{
	return (struct dev_comm *)c;
}

/* A host buffer of at least bytes, kept for the next call. */
static void *stage(struct dev_comm *d, size_t bytes)
{
	if (bytes <= d->stage_bytes)
		return d->stage;
	if (d->stage)
		d->mem.host_free(d->stage);
	d->stage_bytes = 0;
	if (!(d->stage = d->mem.host_alloc(bytes)))
		return NULL;
	d->stage_bytes = bytes;
	return d->stage;
}

static int on_device(const struct dev_comm *d, const void *p)
{
	return p && d->mem.is_device(p);
}

static int dev_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype t,
			 enum comm_op op)
{
	struct dev_comm *d = dev(c);
	size_t bytes = count * comm_dtype_size(t);
	void *h;
	int rc;

	if (!on_device(d, buf))
		return comm_allreduce(d->inner, buf, count, t, op);
	if (d->nccl)
		return comm_nccl_allreduce(d->nccl, d->inner, buf, count, t, op);
	if (!(h = stage(d, bytes)))
		return COMM_ENOMEM;
	d->mem.to_host(h, buf, bytes);
	if ((rc = comm_allreduce(d->inner, h, count, t, op)))
		return rc;
	d->mem.to_device(buf, h, bytes);
	return 0;
}

static int dev_reduce_scatter(struct comm *c, const void *send, void *recv, size_t recvcount,
			      enum comm_dtype t, enum comm_op op)
{
	struct dev_comm *d = dev(c);
	size_t rb = recvcount * comm_dtype_size(t), sb = rb * (size_t)c->size;
	char *h;
	int rc;

	if (!on_device(d, send))
		return comm_reduce_scatter(d->inner, send, recv, recvcount, t, op);
	if (d->nccl)
		return comm_nccl_reduce_scatter(d->nccl, d->inner, send, recv, recvcount, t, op);
	if (!(h = stage(d, sb + rb)))
		return COMM_ENOMEM;
	d->mem.to_host(h, send, sb);
	if ((rc = comm_reduce_scatter(d->inner, h, h + sb, recvcount, t, op)))
		return rc;
	d->mem.to_device(recv, h + sb, rb);
	return 0;
}

static int dev_allgather(struct comm *c, const void *send, void *recv, size_t sendcount,
			 enum comm_dtype t)
{
	struct dev_comm *d = dev(c);
	size_t sb = sendcount * comm_dtype_size(t), rb = sb * (size_t)c->size;
	char *h;
	int rc;

	if (!on_device(d, recv))
		return comm_allgather(d->inner, send, recv, sendcount, t);
	if (d->nccl)
		return comm_nccl_allgather(d->nccl, d->inner, send, recv, sendcount, t);
	if (!(h = stage(d, sb + rb)))
		return COMM_ENOMEM;
	d->mem.to_host(h, send, sb);
	if ((rc = comm_allgather(d->inner, h, h + sb, sendcount, t)))
		return rc;
	d->mem.to_device(recv, h + sb, rb);
	return 0;
}

static int dev_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype t, int root)
{
	struct dev_comm *d = dev(c);
	size_t bytes = count * comm_dtype_size(t);
	void *h;
	int rc;

	if (!on_device(d, buf))
		return comm_broadcast(d->inner, buf, count, t, root);
	if (d->nccl)
		return comm_nccl_broadcast(d->nccl, d->inner, buf, count, t, root);
	if (!(h = stage(d, bytes)))
		return COMM_ENOMEM;
	if (c->rank == root)
		d->mem.to_host(h, buf, bytes);
	if ((rc = comm_broadcast(d->inner, h, count, t, root)))
		return rc;
	if (c->rank != root)
		d->mem.to_device(buf, h, bytes);
	return 0;
}

static int dev_barrier(struct comm *c)
{
	return comm_barrier(dev(c)->inner);
}

/*
 * Point-to-point messages go through the host communicator, device buffers
 * staged: comm_send's contract is a buffered send (two ranks may send to
 * each other at once), which NCCL's send, waiting for its receiver, does
 * not keep. The mirrored exchange (dev_sendrecv) takes NCCL.
 */
static int dev_send(struct comm *c, const void *buf, size_t bytes, int dst)
{
	struct dev_comm *d = dev(c);
	void *h;

	if (!on_device(d, buf))
		return comm_send(d->inner, buf, bytes, COMM_UINT8, dst);
	if (!(h = stage(d, bytes)))
		return COMM_ENOMEM;
	d->mem.to_host(h, buf, bytes);
	return comm_send(d->inner, h, bytes, COMM_UINT8, dst);
}

static int dev_recv(struct comm *c, void *buf, size_t bytes, int src)
{
	struct dev_comm *d = dev(c);
	void *h;
	int rc;

	if (!on_device(d, buf))
		return comm_recv(d->inner, buf, bytes, COMM_UINT8, src);
	if (!(h = stage(d, bytes)))
		return COMM_ENOMEM;
	if ((rc = comm_recv(d->inner, h, bytes, COMM_UINT8, src)))
		return rc;
	d->mem.to_device(buf, h, bytes);
	return 0;
}

/*
 * A send and a receive whose peers make the mirror call: one NCCL group
 * when both buffers are in device memory and the group has NCCL (GPU to
 * GPU, no host copy); else the staged send, then the staged receive.
 */
static int dev_sendrecv(struct comm *c, const void *sendbuf, size_t sendbytes, int dst,
			void *recvbuf, size_t recvbytes, int src)
{
	struct dev_comm *d = dev(c);
	int rc;

	if (d->nccl && on_device(d, sendbuf) && on_device(d, recvbuf))
		return comm_nccl_sendrecv(d->nccl, d->inner, sendbuf, sendbytes, dst, recvbuf,
					  recvbytes, src);
	if ((rc = dev_send(c, sendbuf, sendbytes, dst)))
		return rc;
	return dev_recv(c, recvbuf, recvbytes, src);
}

static int wrap(struct comm *inner, int owns_inner, const struct comm_device_memory *mem,
		struct comm_nccl *nccl, const char *describe, struct comm **out);

static int dev_split(struct comm *c, int color, int key, struct comm **out)
{
	struct dev_comm *d = dev(c);
	struct comm *inner = NULL;
	struct comm_nccl *nccl = NULL;
	int rc;

	*out = NULL;
	if ((rc = comm_split(d->inner, color, key, &inner)))
		return rc;
	/* every rank of the parent calls the NCCL split, the ones left out too */
	if (d->nccl && (rc = comm_nccl_split(d->nccl, d->inner, color, key, &nccl))) {
		if (inner)
			comm_free(inner);
		return rc;
	}
	if (!inner)
		return 0;
	if ((rc = wrap(inner, 1, &d->mem, nccl, d->describe, out))) {
		comm_nccl_free(nccl);
		comm_free(inner);
	}
	return rc;
}

static void dev_free(struct comm *c)
{
	struct dev_comm *d = dev(c);

	comm_nccl_free(d->nccl);
	if (d->stage)
		d->mem.host_free(d->stage);
	if (d->owns_inner)
		comm_free(d->inner);
	free(d);
}

/* A failing rank wakes the others on both paths: the host world and NCCL. */
static void dev_abort(struct comm *c, const char *reason)
{
	struct dev_comm *d = dev(c);

	comm_abort(d->inner, reason);
	comm_nccl_abort(d->nccl);
}

static const char *dev_abort_reason(const struct comm *c)
{
	return comm_abort_reason(((const struct dev_comm *)c)->inner);
}

static const struct comm_ops dev_ops = {
	.name = "device",
	.allreduce = dev_allreduce,
	.reduce_scatter = dev_reduce_scatter,
	.allgather = dev_allgather,
	.broadcast = dev_broadcast,
	.barrier = dev_barrier,
	.send = dev_send,
	.recv = dev_recv,
	.sendrecv = dev_sendrecv,
	.split = dev_split,
	.free = dev_free,
	.abort = dev_abort,
	.abort_reason = dev_abort_reason,
};

static int wrap(struct comm *inner, int owns_inner, const struct comm_device_memory *mem,
		struct comm_nccl *nccl, const char *describe, struct comm **out)
{
	struct dev_comm *d = calloc(1, sizeof *d);

	if (!d)
		return COMM_ENOMEM;
	d->base.ops = &dev_ops;
	d->base.rank = inner->rank;
	d->base.size = inner->size;
	d->inner = inner;
	d->owns_inner = owns_inner;
	d->mem = *mem;
	d->nccl = nccl;
	snprintf(d->describe, sizeof d->describe, "%s", describe);
	*out = &d->base;
	return 0;
}

/*
 * Whether any two ranks name the same GPU (NCCL refuses them): every rank
 * contributes its device id, padded to a fixed length, to one all-gather.
 */
#define DEVICE_ID_LEN 96
static int gpus_shared(struct comm *inner, const char *device_id, int *shared)
{
	char mine[DEVICE_ID_LEN] = { 0 }, *all;
	int rc, n = inner->size;

	snprintf(mine, sizeof mine, "%s", device_id);
	if (!(all = calloc((size_t)n, DEVICE_ID_LEN)))
		return COMM_ENOMEM;
	rc = comm_allgather(inner, mine, all, DEVICE_ID_LEN, COMM_UINT8);
	*shared = 0;
	for (int i = 0; !rc && i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (!strncmp(all + (size_t)i * DEVICE_ID_LEN, all + (size_t)j * DEVICE_ID_LEN,
				     DEVICE_ID_LEN))
				*shared = 1;
	free(all);
	return rc;
}

int comm_device_wrap(struct comm *inner, const struct comm_device_memory *mem,
		     enum comm_device_path want, struct comm **out, char *err, size_t errlen)
{
	struct comm_nccl *nccl = NULL;
	char describe[160];
	int shared = 0, rc;

	*out = NULL;
	if ((rc = gpus_shared(inner, mem->device_id, &shared))) {
		snprintf(err, errlen, "comparing the ranks' GPUs: %s", comm_strerror(rc));
		return rc;
	}
	/* the same inputs on every rank (the all-gather), so the same choice */
	if (want != COMM_DEVICE_STAGED && !shared && comm_nccl_available()) {
		if ((rc = comm_nccl_create(inner, &nccl, err, errlen)))
			return rc;
		snprintf(describe, sizeof describe, "nccl %s on device buffers",
			 comm_nccl_version());
	} else if (want == COMM_DEVICE_NCCL) {
		snprintf(err, errlen, "NCCL was asked for device buffers, but %s",
			 shared ? "two ranks share a GPU (NCCL needs one GPU per rank)" :
				  "this build has no NCCL");
		return COMM_EINVAL;
	} else {
		snprintf(describe, sizeof describe, "host-staged (%s)",
			 want == COMM_DEVICE_STAGED ? "asked for" :
			 shared ? "ranks share a GPU, NCCL needs one GPU per rank" :
				  "this build has no NCCL");
	}
	if ((rc = wrap(inner, 0, mem, nccl, describe, out))) {
		comm_nccl_free(nccl);
		snprintf(err, errlen, "%s", comm_strerror(rc));
	}
	return rc;
}

const char *comm_device_describe(const struct comm *c)
{
	return c->ops == &dev_ops ? ((const struct dev_comm *)c)->describe : "host";
}
