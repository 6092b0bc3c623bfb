/*
 * lib/comm_hier.c - the global communicator of storkd: rank threads of one
 * process talk through shared memory (lib/comm_shm.c), processes (nodes)
 * talk over UCX (lib/comm_ucx.c), and local rank 0 of each node is the only
 * thread that touches the node's UCX communicator.
 *
 * Every collective is a composition of three steps, so the reduction order
 * is the two-level fold documented in lib/comm.h (in-node rank order, then
 * node order) and each step keeps its backend's determinism:
 *
 *   all-reduce      shm all-reduce -> leaders' UCX all-reduce -> shm broadcast
 *   reduce-scatter  all-reduce of a copy of send, keep this rank's segment
 *   all-gather      shm all-gather into the node's slice of recv -> leaders
 *                   exchange node slices (UCX) -> shm broadcast of recv
 *   broadcast       root's node: shm broadcast from the root -> leaders' UCX
 *                   broadcast from the root's node -> shm broadcast elsewhere
 *   barrier         shm barrier -> leaders' UCX barrier -> shm barrier
 *
 * Errors: when the leader's UCX step fails (a peer process died, or the
 * comm_ucx was aborted) it aborts the node's shm world with a reason, which
 * wakes the local ranks waiting for it in the next shm step; an abort on any
 * rank aborts both the shm world and the comm_ucx.
 */
#include "config.h"
#include "lib/comm_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hier_comm {
	struct comm base;               /* global rank and size */
	struct comm_hier *h;
	struct comm *shm;               /* this rank in the node's world */
	int local;
};

struct comm_hier {
	struct comm_world *node;
	struct comm_ucx *u;
	struct comm *cross;             /* leaders' UCX communicator; NULL: 1 node */
	int node_index, nnodes, nlocal, size;
	int *count;                     /* local ranks of each node */
	int *base;                      /* first global rank of each node */
	struct hier_comm *ranks;
};

static const struct comm_ops hier_ops;

static struct hier_comm *hc(struct comm *c)
{
	return (struct hier_comm *)c;
}

/*
 * Run the leader's cross-node step: rc of fn, and on failure abort the
 * node's world (so the local ranks waiting in the next shm step wake) with a
 * reason that names the failed node when UCX knows it.
 */
static int leader_failed(struct comm_hier *h, int rc)
{
	char msg[256], why[128];
	int peer;

	if (!rc)
		return rc;
	peer = h->u ? comm_ucx_failed_peer(h->u, why, sizeof why) : -1;
	if (peer >= 0 && peer < h->nnodes)
		snprintf(msg, sizeof msg, "node %d (ranks %d-%d, peer process) failed: %s",
			 peer, h->base[peer], h->base[peer] + h->count[peer] - 1, why);
	else
		snprintf(msg, sizeof msg, "%s", rc == COMM_EABORTED ?
			 comm_abort_reason(h->cross) : comm_strerror(rc));
	comm_world_abort(h->node, msg);
	return rc;
}

/* ------------------------------------------------------------ collectives */

static int hier_allreduce(struct comm *c, void *buf, size_t count,
			  enum comm_dtype t, enum comm_op op)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int rc;

	if ((rc = comm_allreduce(r->shm, buf, count, t, op)))
		return rc;
	if (!h->cross)
		return COMM_OK;
	if (r->local == 0 && (rc = leader_failed(h, comm_allreduce(h->cross, buf, count, t, op))))
		return rc;
	return comm_broadcast(r->shm, buf, count, t, 0);
}

static int hier_reduce_scatter(struct comm *c, const void *send, void *recv,
			       size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	size_t es = comm_dtype_size(t), total = recvcount * (size_t)c->size;
	char *tmp = malloc(total * es);
	int rc;

	if (!tmp) {
		comm_abort(c, "reduce-scatter: out of memory");
		return COMM_ENOMEM;
	}
	memcpy(tmp, send, total * es);
	rc = hier_allreduce(c, tmp, total, t, op);
	if (!rc)
		memcpy(recv, tmp + (size_t)c->rank * recvcount * es, recvcount * es);
	free(tmp);
	return rc;
}

/* The leaders exchange their nodes' slices of recv (node k's at base_k). */
static int leaders_allgather(struct comm_hier *h, char *recv, size_t sendcount, size_t es,
			     enum comm_dtype t)
{
	int even = 1, rc = COMM_OK;

	for (int k = 1; k < h->nnodes; k++)
		even &= h->count[k] == h->count[0];
	if (even)
		return comm_allgather(h->cross, recv + (size_t)h->base[h->node_index] * sendcount * es,
				      recv, (size_t)h->nlocal * sendcount, t);
	for (int k = 0; k < h->nnodes && !rc; k++)
		rc = comm_broadcast(h->cross, recv + (size_t)h->base[k] * sendcount * es,
				    (size_t)h->count[k] * sendcount, t, k);
	return rc;
}

static int hier_allgather(struct comm *c, const void *send, void *recv,
			  size_t sendcount, enum comm_dtype t)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	size_t es = comm_dtype_size(t);
	char *slice = (char *)recv + (size_t)h->base[h->node_index] * sendcount * es;
	int rc;

	if ((rc = comm_allgather(r->shm, send, slice, sendcount, t)))
		return rc;
	if (!h->cross)
		return COMM_OK;
	if (r->local == 0 && (rc = leader_failed(h, leaders_allgather(h, recv, sendcount, es, t))))
		return rc;
	return comm_broadcast(r->shm, recv, sendcount * (size_t)c->size, t, 0);
}

/* The node of global rank g. */
static int node_of(const struct comm_hier *h, int g)
{
	int k = 0;

	while (k + 1 < h->nnodes && h->base[k + 1] <= g)
		k++;
	return k;
}

static int hier_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype t,
			  int root)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int rk = node_of(h, root), mine = rk == h->node_index, rc;

	/* on the root's node the data reaches local rank 0 first */
	if (mine && (rc = comm_broadcast(r->shm, buf, count, t, root - h->base[rk])))
		return rc;
	if (!h->cross)
		return COMM_OK;
	if (r->local == 0 && (rc = leader_failed(h, comm_broadcast(h->cross, buf, count, t, rk))))
		return rc;
	if (!mine)
		return comm_broadcast(r->shm, buf, count, t, 0);
	return comm_barrier(r->shm);    /* keep every node's shm steps paired */
}

static int hier_barrier(struct comm *c)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int rc;

	if ((rc = comm_barrier(r->shm)) || !h->cross)
		return rc;
	if (r->local == 0 && (rc = leader_failed(h, comm_barrier(h->cross))))
		return rc;
	return comm_barrier(r->shm);
}

/*
 * Point-to-point between ranks of one node goes through the node's shared
 * memory; between nodes it is not supported yet (COMM_EINVAL).
 */
static int hier_send(struct comm *c, const void *buf, size_t bytes, int dst)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int base = h->base[h->node_index];

	if (node_of(h, dst) != h->node_index)
		return COMM_EINVAL;
	return comm_send(r->shm, buf, bytes, COMM_UINT8, dst - base);
}

static int hier_recv(struct comm *c, void *buf, size_t bytes, int src)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int base = h->base[h->node_index];

	if (node_of(h, src) != h->node_index)
		return COMM_EINVAL;
	return comm_recv(r->shm, buf, bytes, COMM_UINT8, src - base);
}

/*
 * Groups that each lie inside one node become shared-memory groups of the
 * node's world; others would need a UCX leader per group and are refused.
 */
static int hier_split(struct comm *c, int color, int key, struct comm **out)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int n = c->size, rc, ok = 1;
	int32_t *all = calloc((size_t)n, sizeof *all), mine = color;

	if (!all) {
		comm_abort(c, "split: out of memory");
		return COMM_ENOMEM;
	}
	if ((rc = hier_allgather(c, &mine, all, 1, COMM_INT32)))
		goto out;
	for (int a = 0; a < n && ok; a++)
		for (int b = a + 1; b < n && ok; b++)
			if (all[a] != COMM_UNDEFINED && all[a] == all[b] &&
			    node_of(h, a) != node_of(h, b))
				ok = 0;
	rc = ok ? comm_split(r->shm, color, key, out) : COMM_EINVAL;
out:
	free(all);
	return rc;
}

static void hier_free(struct comm *c)
{
	(void)c;        /* the handles belong to the comm_hier */
}

static void hier_abort(struct comm *c, const char *reason)
{
	struct comm_hier *h = hc(c)->h;

	comm_world_abort(h->node, reason);
	if (h->cross)
		comm_abort(h->cross, reason);
}

static const char *hier_abort_reason(const struct comm *c)
{
	return comm_abort_reason(((const struct hier_comm *)c)->shm);
}

static const struct comm_ops hier_ops = {
	.name = "hier",
	.allreduce = hier_allreduce,
	.reduce_scatter = hier_reduce_scatter,
	.allgather = hier_allgather,
	.broadcast = hier_broadcast,
	.barrier = hier_barrier,
	.send = hier_send,
	.recv = hier_recv,
	.split = hier_split,
	.free = hier_free,
	.abort = hier_abort,
	.abort_reason = hier_abort_reason,
};

/* ------------------------------------------------------------------ setup */

/* Every node must pass the same layout: check it over UCX. */
static int layout_agrees(struct comm_hier *h)
{
	int64_t sum[2] = { 0, 0 }, mx[2];
	int rc;

	for (int k = 0; k < h->nnodes; k++) {
		sum[0] += (int64_t)h->count[k] * (k + 1);
		sum[1] += h->count[k];
	}
	mx[0] = -sum[0], mx[1] = -sum[1];
	if ((rc = comm_allreduce(h->cross, sum, 2, COMM_INT64, COMM_MAX)) ||
	    (rc = comm_allreduce(h->cross, mx, 2, COMM_INT64, COMM_MAX)))
		return rc;
	return sum[0] == -mx[0] && sum[1] == -mx[1] ? COMM_OK : COMM_EINVAL;
}

int comm_hier_create(struct comm_world *node, struct comm_ucx *u, int node_index,
		     int nnodes, const void *const *node_addrs,
		     const int *local_ranks_per_node, struct comm_hier **out)
{
	struct comm_hier *h;
	int rc = COMM_ENOMEM;

	*out = NULL;
	if (!node || nnodes < 1 || node_index < 0 || node_index >= nnodes ||
	    (nnodes > 1 && (!u || !node_addrs)) || !local_ranks_per_node ||
	    !comm_world_rank(node, 0) ||
	    comm_size(comm_world_rank(node, 0)) != local_ranks_per_node[node_index])
		return COMM_EINVAL;
	for (int k = 0; k < nnodes; k++)
		if (local_ranks_per_node[k] < 1)
			return COMM_EINVAL;
	if (!(h = calloc(1, sizeof *h)))
		return COMM_ENOMEM;
	h->node = node;
	h->u = u;
	h->node_index = node_index;
	h->nnodes = nnodes;
	h->nlocal = local_ranks_per_node[node_index];
	h->count = calloc((size_t)nnodes, sizeof *h->count);
	h->base = calloc((size_t)nnodes, sizeof *h->base);
	h->ranks = calloc((size_t)h->nlocal, sizeof *h->ranks);
	if (!h->count || !h->base || !h->ranks)
		goto fail;
	for (int k = 0; k < nnodes; k++) {
		h->count[k] = local_ranks_per_node[k];
		h->base[k] = h->size;
		h->size += h->count[k];
	}
	if (nnodes > 1) {
		if ((rc = comm_ucx_world(u, node_index, nnodes, node_addrs, &h->cross)))
			goto fail;
		if ((rc = layout_agrees(h)))
			goto fail;
	}
	for (int i = 0; i < h->nlocal; i++)
		h->ranks[i] = (struct hier_comm){
			.base = { .ops = &hier_ops, .rank = h->base[node_index] + i, .size = h->size },
			.h = h, .shm = comm_world_rank(node, i), .local = i,
		};
	*out = h;
	return COMM_OK;
fail:
	comm_hier_destroy(h);
	return rc;
}

struct comm *comm_hier_rank(struct comm_hier *h, int local)
{
	if (local < 0 || local >= h->nlocal)
		return NULL;
	return &h->ranks[local].base;
}

int comm_hier_rank_base(const struct comm_hier *h)
{
	return h->base[h->node_index];
}

void comm_hier_destroy(struct comm_hier *h)
{
	if (!h)
		return;
	comm_free(h->cross);
	free(h->count);
	free(h->base);
	free(h->ranks);
	free(h);
}
