/*
 * lib/comm/hier.c - the global communicator of storkd and its groups: rank
 * threads of one process talk through shared memory (lib/comm/shm.c),
 * processes (nodes) talk over UCX (lib/comm/ucx.c).
 *
 * A handle (struct hier_comm) describes one rank's place in a group: the
 * global communicator is the group of every rank; comm_split makes groups
 * of some ranks, which may span nodes. In every group a node's members form
 * a shared-memory group (shm), and the lowest of them is the node's leader:
 * only it runs the group's cross-node step, on a UCX communicator of the
 * group's leaders (cross). Every collective is a composition of three
 * steps, so the reduction order is the two-level fold of lib/comm/comm.h
 * (in-node member order, then node order) and each step keeps its
 * backend's determinism:
 *
 *   all-reduce      shm all-reduce -> leaders' UCX all-reduce -> shm broadcast
 *   reduce-scatter  (even nodes) shm reduce-scatter of each node's block ->
 *                   UCX reduce-scatter among the members of equal local rank
 *                   (column) of every node; (uneven) shm reduce-scatter of
 *                   the own block and of every other segment in pieces ->
 *                   each piece over UCX to its segment's owner -> the owner
 *                   folds the nodes' partial sums in node order
 *   all-gather      shm all-gather into the node's slice of recv -> leaders
 *                   exchange node slices (UCX) -> shm broadcast of recv
 *   broadcast       root's node: shm broadcast from the root -> leaders' UCX
 *                   broadcast from the root's node -> shm broadcast elsewhere
 *   barrier         shm barrier -> leaders' UCX barrier -> shm barrier
 *   send, recv      shm between members of one node; between nodes, UCX
 *                   straight from the sending thread to the receiving one's
 *                   process, tagged with both global ranks and a sequence
 *
 * The reduce-scatter's column step gives each rank (n-1)/n of its segment's
 * worth of traffic per node instead of the whole buffer, and needs only
 * nodes x recvcount of memory; the uneven one a few segments. Groups of one
 * node are plain shm groups.
 *
 * Threads: the comm_ucx is thread-safe (comm_ucx_is_multithreaded), so the
 * leaders and columns of different groups, all on their own threads, run at
 * the same time; each UCX communicator has its own id, given out in the
 * same order on every node (see hier_split), so their messages never mix.
 *
 * Errors: when a UCX step fails (a peer process died, or the comm_ucx was
 * aborted) the thread aborts the node's shm world with a reason naming the
 * failed node, which wakes the local ranks waiting for it; an abort on any
 * rank aborts both the shm world and the comm_ucx. comm_hier_watch lets a
 * supervising thread notice a dead peer while no rank talks over UCX.
 */
#include "config.h"
#include "lib/comm/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Communicator ids (lib/comm/ucx.c): 1 the nodes' world, HIER_ID_COLUMNS + l
 * global column l >= 1 (column 0 is the world, so HIER_ID_COLUMNS itself is
 * free: the global handles' point-to-point channel), then the groups; a
 * group's point-to-point channel is its leaders' id.
 */
#define HIER_ID_COLUMNS 0x4000
#define HIER_ID_P2P HIER_ID_COLUMNS
#define HIER_ID_GROUPS 0x8000
#define HIER_ID_END 0xfe00              /* collective tags stay below 0xfe << 56 */

struct hier_comm {
	struct comm base;               /* rank and size in the group */
	struct comm_hier *h;
	struct comm *shm;               /* this node's members, in group order */
	struct comm *cross;             /* the leader's: UCX among the group's nodes */
	struct comm *column;            /* UCX among the members of rank `local` of every
					 * node (even groups); the leader's is cross */
	int local;                      /* rank in shm */
	int nnodes, node;               /* the group's nodes; this one's index there */
	int *count, *first;             /* members per node; group rank of each node's first */
	int *gnode;                     /* each of the group's nodes among all nodes */
	int *granks;                    /* every member's global rank */
	uint16_t channel;               /* point-to-point tags: an id no other
					 * handle of the process uses */
	uint16_t *send_seq, *recv_seq;  /* point-to-point, per member */
	uint8_t rs_calls;               /* uneven reduce-scatters so far (tag check) */
	uint32_t serial;                /* global handles: group ids given out so far */
	int owned;                      /* a split result */
};

struct comm_hier {
	struct comm_world *node;
	struct comm_ucx *u;
	struct comm *cross;             /* UCX world of the nodes; NULL: one node */
	struct comm **columns;          /* nlocal: the global columns (0 is cross) */
	int node_index, nnodes, nlocal, size;
	int *count;                     /* local ranks of each node */
	int *base;                      /* first global rank of each node */
	int *identity;                  /* 0, 1, 2, ...: global ranks and node indices */
	struct hier_comm *ranks;
};

static const struct comm_ops hier_ops;

static struct hier_comm *hc(struct comm *c)
{
	return (struct hier_comm *)c;
}

/*
 * A UCX step of this process failed: abort the node's world (so the local
 * ranks waiting in a shm step wake) with a reason that names the failed
 * node when UCX knows it. Returns rc.
 */
static int ucx_failed(struct comm_hier *h, struct comm *ucx, int rc)
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
		snprintf(msg, sizeof msg, "%s", rc == COMM_EABORTED && ucx ?
			 comm_abort_reason(ucx) : comm_strerror(rc));
	comm_world_abort(h->node, msg);
	return rc;
}

/* The group node of group rank g. */
static int node_of(const struct hier_comm *r, int g)
{
	int k = 0;

	while (k + 1 < r->nnodes && r->first[k + 1] <= g)
		k++;
	return k;
}

static int even(const struct hier_comm *r)
{
	for (int k = 1; k < r->nnodes; k++)
		if (r->count[k] != r->count[0])
			return 0;
	return 1;
}

/* ------------------------------------------------------------ collectives */

static int hier_allreduce(struct comm *c, void *buf, size_t count,
			  enum comm_dtype t, enum comm_op op)
{
	struct hier_comm *r = hc(c);
	int rc;

	if ((rc = comm_allreduce(r->shm, buf, count, t, op)) || r->nnodes == 1)
		return rc;
	if (r->local == 0 &&
	    (rc = ucx_failed(r->h, r->cross, comm_allreduce(r->cross, buf, count, t, op))))
		return rc;
	return comm_broadcast(r->shm, buf, count, t, 0);
}

/* Reduce-scatter through a full copy: for a single-threaded UCX only. */
static int reduce_scatter_copy(struct comm *c, const void *send, void *recv, size_t recvcount,
			       enum comm_dtype t, enum comm_op op)
{
	size_t es = comm_dtype_size(t), total = recvcount * (size_t)c->size;
	char *tmp = malloc(total * es > 0 ? total * es : 1);
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

/* Elements [*lo, *lo + return) of piece l of an R-element segment cut in n pieces. */
static size_t piece_of(size_t R, int n, int l, size_t *lo)
{
	size_t p = (R + (size_t)n - 1) / (size_t)n;

	*lo = (size_t)l * p < R ? (size_t)l * p : R;
	return R - *lo < p ? R - *lo : p;
}

/*
 * Send this node's partial sums of the other nodes' segments: each segment
 * is reduce-scattered in the node in count[node] pieces, and member l sends
 * piece l straight to the segment's owner. Sends never wait, so every node
 * gets through this before anyone receives.
 */
static int send_node_pieces(struct hier_comm *r, const char *send, size_t R, enum comm_dtype t,
			    enum comm_op op, uint8_t seq)
{
	int n = r->count[r->node], rc = COMM_OK;
	size_t es = comm_dtype_size(t), p = (R + (size_t)n - 1) / (size_t)n, lo, len;
	char *pad = calloc((size_t)n * p + 1, es), *piece = malloc(p * es + 1);

	if (!pad || !piece) {
		rc = COMM_ENOMEM;
		goto out;
	}
	len = piece_of(R, n, r->local, &lo);
	for (int j = 0; j < r->nnodes && !rc; j++) {
		if (j == r->node)
			continue;
		for (int s = r->first[j]; s < r->first[j] + r->count[j] && !rc; s++) {
			memcpy(pad, send + (size_t)s * R * es, R * es);
			rc = comm_reduce_scatter(r->shm, pad, piece, p, t, op);
			if (!rc && len)
				rc = ucx_failed(r->h, r->h->cross, comm_ucx_send_tagged(
					r->h->cross, r->gnode[j],
					comm_ucx_coll_tag(r->channel, r->granks[r->base.rank],
							  r->granks[s], seq),
					piece, len * es));
		}
	}
out:
	free(pad);
	free(piece);
	return rc;
}

/* Receive node k's partial sum of this rank's segment (R elements) into x. */
static int recv_node_partial(struct hier_comm *r, int k, char *x, size_t R, size_t es,
			     uint8_t seq)
{
	int rc = COMM_OK;

	for (int l = 0; l < r->count[k] && !rc; l++) {
		size_t lo, len = piece_of(R, r->count[k], l, &lo), got;
		int src = r->granks[r->first[k] + l];

		if (!len)
			continue;
		rc = comm_ucx_recv_tagged(r->h->cross, r->gnode[k],
					  comm_ucx_coll_tag(r->channel, src, r->granks[r->base.rank],
							    seq),
					  x + lo * es, len * es, &got);
		if ((rc = ucx_failed(r->h, r->h->cross, rc)) == COMM_OK && got != len * es) {
			comm_abort(&r->base, "reduce-scatter: a piece of the wrong size arrived");
			rc = COMM_EINVAL;
		}
	}
	return rc;
}

/*
 * Reduce-scatter of groups whose nodes hold unequal numbers of members
 * (n_k on node k). Each node reduce-scatters its own block in shared
 * memory, so every member holds its node's partial sum of its segment;
 * the other nodes' segments go out in pieces (send_node_pieces); each
 * member then folds the nodes' partial sums of its segment in node order.
 * A member of node k sends about (size - n_k) / n_k segments and receives
 * (nodes - 1), and holds about four segments: never the whole buffer.
 */
static int reduce_scatter_uneven(struct hier_comm *r, const char *send, char *recv, size_t R,
				 enum comm_dtype t, enum comm_op op)
{
	size_t es = comm_dtype_size(t);
	char *mine = malloc(R * es + 1), *x = malloc(R * es + 1);
	uint8_t seq = r->rs_calls++;
	int rc;

	if (!mine || !x) {
		rc = COMM_ENOMEM;
		goto out;
	}
	if ((rc = comm_reduce_scatter(r->shm, send + (size_t)r->first[r->node] * R * es, mine,
				      R, t, op)) ||
	    (rc = send_node_pieces(r, send, R, t, op, seq)))
		goto out;
	for (int k = 0; k < r->nnodes && !rc; k++) {
		char *in = k == r->node ? mine : x;

		if (k != r->node && (rc = recv_node_partial(r, k, x, R, es, seq)))
			break;
		if (k == 0)
			memcpy(recv, in, R * es);
		else
			comm_reduce_local(recv, in, R, t, op);
	}
out:
	if (rc == COMM_ENOMEM)
		comm_abort(&r->base, "reduce-scatter: out of memory");
	free(mine);
	free(x);
	return rc;
}

/*
 * Every node holds n_l members. Node block j of send (the segments of node
 * j's members) is reduce-scattered in the node first: local rank l gets the
 * node's partial sum of segment j * n_l + l, for every j. Then the members
 * of local rank l of every node (the column) reduce-scatter those partial
 * sums over UCX, node j receiving block j: its member l gets segment
 * j * n_l + l, its own. Folds: in-node order, then node order.
 */
static int hier_reduce_scatter(struct comm *c, const void *send, void *recv,
			       size_t recvcount, enum comm_dtype t, enum comm_op op)
{
	struct hier_comm *r = hc(c);
	size_t es = comm_dtype_size(t), block;
	char *part;
	int rc = COMM_OK;

	if (r->nnodes == 1)
		return comm_reduce_scatter(r->shm, send, recv, recvcount, t, op);
	if (!r->column)
		return comm_ucx_is_multithreaded(r->h->cross) ?
			reduce_scatter_uneven(r, send, recv, recvcount, t, op) :
			reduce_scatter_copy(c, send, recv, recvcount, t, op);
	block = (size_t)r->count[0] * recvcount * es;
	if (!(part = malloc((size_t)r->nnodes * recvcount * es + 1))) {
		comm_abort(c, "reduce-scatter: out of memory");
		return COMM_ENOMEM;
	}
	for (int j = 0; j < r->nnodes && !rc; j++)
		rc = comm_reduce_scatter(r->shm, (const char *)send + (size_t)j * block,
					 part + (size_t)j * recvcount * es, recvcount, t, op);
	if (!rc)
		rc = ucx_failed(r->h, r->column,
				comm_reduce_scatter(r->column, part, recv, recvcount, t, op));
	free(part);
	return rc;
}

/* The leaders exchange their nodes' slices of recv (node k's at first_k). */
static int leaders_allgather(struct hier_comm *r, char *recv, size_t sendcount, size_t es,
			     enum comm_dtype t)
{
	int rc = COMM_OK;

	if (even(r))
		return comm_allgather(r->cross, recv + (size_t)r->first[r->node] * sendcount * es,
				      recv, (size_t)r->count[r->node] * sendcount, t);
	for (int k = 0; k < r->nnodes && !rc; k++)
		rc = comm_broadcast(r->cross, recv + (size_t)r->first[k] * sendcount * es,
				    (size_t)r->count[k] * sendcount, t, k);
	return rc;
}

static int hier_allgather(struct comm *c, const void *send, void *recv,
			  size_t sendcount, enum comm_dtype t)
{
	struct hier_comm *r = hc(c);
	size_t es = comm_dtype_size(t);
	char *slice = (char *)recv + (size_t)r->first[r->node] * sendcount * es;
	int rc;

	if ((rc = comm_allgather(r->shm, send, slice, sendcount, t)) || r->nnodes == 1)
		return rc;
	if (r->local == 0 &&
	    (rc = ucx_failed(r->h, r->cross, leaders_allgather(r, recv, sendcount, es, t))))
		return rc;
	return comm_broadcast(r->shm, recv, sendcount * (size_t)c->size, t, 0);
}

static int hier_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype t,
			  int root)
{
	struct hier_comm *r = hc(c);
	int rk = node_of(r, root), mine = rk == r->node, rc;

	/* on the root's node the data reaches the leader first */
	if (mine && (rc = comm_broadcast(r->shm, buf, count, t, root - r->first[rk])))
		return rc;
	if (r->nnodes == 1)
		return COMM_OK;
	if (r->local == 0 &&
	    (rc = ucx_failed(r->h, r->cross, comm_broadcast(r->cross, buf, count, t, rk))))
		return rc;
	if (!mine)
		return comm_broadcast(r->shm, buf, count, t, 0);
	return comm_barrier(r->shm);    /* keep every node's shm steps paired */
}

static int hier_barrier(struct comm *c)
{
	struct hier_comm *r = hc(c);
	int rc;

	if ((rc = comm_barrier(r->shm)) || r->nnodes == 1)
		return rc;
	if (r->local == 0 && (rc = ucx_failed(r->h, r->cross, comm_barrier(r->cross))))
		return rc;
	return comm_barrier(r->shm);
}

/* ---------------------------------------------------------- point-to-point */

/*
 * Ready the point-to-point state of r: sequence numbers, and a UCX that
 * any rank thread may use (a single-threaded one is local rank 0's only).
 */
static int seqs(struct hier_comm *r)
{
	if (!comm_ucx_is_multithreaded(r->h->cross))
		return COMM_EINVAL;
	if (!r->send_seq) {
		r->send_seq = calloc((size_t)r->base.size, sizeof *r->send_seq);
		r->recv_seq = calloc((size_t)r->base.size, sizeof *r->recv_seq);
	}
	return r->send_seq && r->recv_seq ? COMM_OK : COMM_ENOMEM;
}

static int hier_send(struct comm *c, const void *buf, size_t bytes, int dst)
{
	struct hier_comm *r = hc(c);
	int k = node_of(r, dst), rc;

	if (k == r->node)
		return comm_send(r->shm, buf, bytes, COMM_UINT8, dst - r->first[k]);
	if ((rc = seqs(r)))
		return rc;
	return ucx_failed(r->h, r->h->cross,
			  comm_ucx_send_tagged(r->h->cross, r->gnode[k],
					       comm_ucx_p2p_tag(r->channel, r->granks[c->rank],
								r->granks[dst],
								r->send_seq[dst]++),
					       buf, bytes));
}

static int hier_recv(struct comm *c, void *buf, size_t bytes, int src)
{
	struct hier_comm *r = hc(c);
	int k = node_of(r, src), rc;
	size_t got;
	char why[200];

	if (k == r->node)
		return comm_recv(r->shm, buf, bytes, COMM_UINT8, src - r->first[k]);
	if ((rc = seqs(r)))
		return rc;
	rc = comm_ucx_recv_tagged(r->h->cross, r->gnode[k],
				  comm_ucx_p2p_tag(r->channel, r->granks[src], r->granks[c->rank],
						   r->recv_seq[src]++),
				  buf, bytes, &got);
	if (rc)
		return ucx_failed(r->h, r->h->cross, rc);
	if (got != bytes) {
		snprintf(why, sizeof why, "rank %d expected %zu bytes from rank %d, which sent %zu",
			 r->granks[c->rank], bytes, r->granks[src], got);
		comm_abort(c, why);
		return COMM_EINVAL;
	}
	return COMM_OK;
}

/* ------------------------------------------------------------------ split */

/*
 * What one split decides, the same on every rank: every rank's group
 * (index into the groups in order of their lowest rank, or -1), every
 * group's members in (key, rank) order, and the ids of groups that span
 * nodes.
 */
struct split_plan {
	int n, ngroups;
	int *group;                     /* n: each rank's group */
	int *pos;                       /* n: its place in the group */
	int *size;                      /* ngroups */
	int *id;                        /* ngroups: first UCX id, 0 for one-node groups */
	uint32_t ids_used;
};

static void plan_free(struct split_plan *p)
{
	free(p->group);
	free(p->pos);
	free(p->size);
	free(p->id);
}

static int before(const int32_t *all, int a, int b)
{
	return all[2 * a + 1] != all[2 * b + 1] ? all[2 * a + 1] < all[2 * b + 1] : a < b;
}

/* The global node of each rank of the global handle r (rank = global rank). */
static int gnode_of(const struct comm_hier *h, int g)
{
	int k = 0;

	while (k + 1 < h->nnodes && h->base[k + 1] <= g)
		k++;
	return k;
}

/*
 * Group the ranks by color (all: n pairs color, key); refuse groups whose
 * member order (key, rank) leaves a node and comes back to it, and give ids to groups
 * that span nodes: one per member of the node with most members (the
 * leaders' communicator and the columns).
 */
static int plan_split(const struct comm_hier *h, const int32_t *all, int n, uint32_t serial,
		      struct split_plan *p)
{
	int rc = COMM_OK, *order, *start;

	memset(p, 0, sizeof *p);
	p->n = n;
	p->group = malloc(sizeof(int) * (size_t)n);
	p->pos = malloc(sizeof(int) * (size_t)n);
	p->size = calloc((size_t)n, sizeof(int));
	p->id = calloc((size_t)n, sizeof(int));
	if (!p->group || !p->pos || !p->size || !p->id)
		return COMM_ENOMEM;
	for (int a = 0; a < n; a++) {
		p->group[a] = -1;
		if (all[2 * a] == COMM_UNDEFINED)
			continue;
		for (int b = 0; b < a && p->group[a] < 0; b++)
			if (all[2 * b] == all[2 * a])
				p->group[a] = p->group[b];
		if (p->group[a] < 0)
			p->group[a] = p->ngroups++;
	}
	for (int a = 0; a < n; a++) {
		int pos = 0;

		if (p->group[a] < 0)
			continue;
		for (int b = 0; b < n; b++)
			pos += p->group[b] == p->group[a] && before(all, b, a);
		p->pos[a] = pos;
		p->size[p->group[a]]++;
	}
	/* every group's members in group order, groups one after the other */
	if (!(order = malloc(sizeof(int) * (size_t)(n + p->ngroups + 1))))
		return COMM_ENOMEM;
	start = order + n;
	start[0] = 0;
	for (int g = 0; g < p->ngroups; g++)
		start[g + 1] = start[g] + p->size[g];
	for (int a = 0; a < n; a++)
		if (p->group[a] >= 0)
			order[start[p->group[a]] + p->pos[a]] = a;
	for (int g = 0; g < p->ngroups && !rc; g++) {
		int maxl = 0, nodes = 0, last = -1, cnt = 0;
		char *seen = calloc((size_t)h->nnodes, 1);

		if (!seen) {
			free(order);
			return COMM_ENOMEM;
		}
		/* walk the members in group order: a node's members come together */
		for (int q = start[g]; q < start[g + 1]; q++) {
			int k = gnode_of(h, order[q]);

			if (k != last) {
				if (seen[k])
					rc = COMM_EINVAL;
				seen[k] = 1;
				last = k;
				nodes++;
				cnt = 0;
			}
			if (++cnt > maxl)
				maxl = cnt;
		}
		free(seen);
		if (nodes > 1) {
			p->id[g] = HIER_ID_GROUPS + (int)(serial + p->ids_used);
			p->ids_used += (uint32_t)maxl;
			if (p->id[g] + maxl > HIER_ID_END)
				rc = COMM_EINVAL;       /* ids run out: too many groups */
		}
	}
	free(order);
	return rc;
}

/* The handle of rank `me` (global) in group g of plan p, whose shm part is sub. */
static int make_group(struct hier_comm *parent, const struct split_plan *p, int me,
		      struct comm *sub, struct comm **out)
{
	struct comm_hier *h = parent->h;
	int g = p->group[me], n = p->size[g], rc = COMM_ENOMEM, k = -1;
	struct hier_comm *r = calloc(1, sizeof *r);
	int *members = NULL;

	if (!r)
		return COMM_ENOMEM;
	r->base = (struct comm){ .ops = &hier_ops, .rank = p->pos[me], .size = n };
	r->h = h;
	r->shm = sub;
	r->local = comm_rank(sub);
	r->owned = 1;
	r->channel = (uint16_t)p->id[g];
	r->granks = malloc(sizeof(int) * (size_t)n);
	r->count = calloc((size_t)n, sizeof(int));
	r->first = calloc((size_t)n, sizeof(int));
	r->gnode = calloc((size_t)n, sizeof(int));
	if (!r->granks || !r->count || !r->first || !r->gnode)
		goto fail;
	for (int a = 0; a < p->n; a++)
		if (p->group[a] == g)
			r->granks[p->pos[a]] = a;
	for (int q = 0; q < n; q++) {
		int gn = gnode_of(h, r->granks[q]);

		if (k < 0 || r->gnode[k] != gn) {
			r->gnode[++k] = gn;
			r->first[k] = q;
		}
		r->count[k]++;
		if (r->granks[q] == me)
			r->node = k;
	}
	r->nnodes = k + 1;
	if (!(members = malloc(sizeof(int) * (size_t)r->nnodes)))
		goto fail;
	memcpy(members, r->gnode, sizeof(int) * (size_t)r->nnodes);
	/* the leaders' communicator is column 0; other columns only when even */
	if (r->local == 0 || even(r)) {
		if ((rc = comm_ucx_group(h->cross, r->nnodes, members, (uint16_t)(p->id[g] + r->local),
					 &r->column)))
			goto fail;
		if (r->local == 0)
			r->cross = r->column;
		if (!even(r))
			r->column = NULL;
	}
	free(members);
	*out = &r->base;
	return COMM_OK;
fail:
	free(members);
	r->shm = NULL;          /* the caller's */
	comm_free(&r->base);
	return rc;
}

/*
 * Collective over the global communicator (groups cannot be split again).
 * Every rank learns every rank's color and key, so every node makes the
 * same groups in the same order and gives their UCX communicators the same
 * ids without another exchange.
 */
static int hier_split(struct comm *c, int color, int key, struct comm **out)
{
	struct hier_comm *r = hc(c);
	struct comm_hier *h = r->h;
	int n = c->size, rc, g;
	int32_t *all = calloc(2 * (size_t)n, sizeof *all), mine[2] = { color, key };
	struct split_plan p = { 0 };
	struct comm *sub = NULL;

	if (!all) {
		comm_abort(c, "split: out of memory");
		return COMM_ENOMEM;
	}
	if (r->owned) {
		rc = COMM_EINVAL;
		goto out;
	}
	if ((rc = hier_allgather(c, mine, all, 2, COMM_INT32)))
		goto out;
	rc = plan_split(h, all, n, r->serial, &p);
	for (int q = 0; rc == COMM_OK && q < p.ngroups; q++)
		if (p.id[q] && (!h->cross || !comm_ucx_is_multithreaded(h->cross)))
			rc = COMM_EINVAL;       /* groups across nodes need thread-safe UCX */
	if (rc) {
		if (rc == COMM_ENOMEM)
			comm_abort(c, "split: out of memory");
		goto out;
	}
	r->serial += p.ids_used;
	g = p.group[c->rank];
	/* this node's members of each group, in group order */
	if ((rc = comm_split(r->shm, g < 0 ? COMM_UNDEFINED : g, g < 0 ? 0 : p.pos[c->rank], &sub)) ||
	    g < 0)
		goto out;
	if (!p.id[g]) {                 /* the group lies in this node */
		*out = sub;
		goto out;
	}
	if ((rc = make_group(r, &p, c->rank, sub, out))) {
		comm_free(sub);
		comm_abort(c, "split: cannot make a group across nodes");
	}
out:
	plan_free(&p);
	free(all);
	return rc;
}

static void hier_free(struct comm *c)
{
	struct hier_comm *r = hc(c);

	if (!r->owned)
		return;         /* the global handles belong to the comm_hier */
	if (r->cross != r->column)
		comm_free(r->cross);
	comm_free(r->column);
	comm_free(r->shm);
	free(r->granks);
	free(r->count);
	free(r->first);
	free(r->gnode);
	free(r->send_seq);
	free(r->recv_seq);
	free(r);
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

/* The global columns: local rank l of every node, when every node has as many ranks. */
static int make_columns(struct comm_hier *h)
{
	int rc;

	for (int k = 1; k < h->nnodes; k++)
		if (h->count[k] != h->count[0])
			return COMM_OK;
	if (!comm_ucx_is_multithreaded(h->cross))
		return COMM_OK;         /* only local rank 0 may touch UCX */
	h->columns[0] = h->cross;
	for (int l = 1; l < h->nlocal; l++)
		if ((rc = comm_ucx_group(h->cross, h->nnodes, h->identity,
					 (uint16_t)(HIER_ID_COLUMNS + l), &h->columns[l])))
			return rc;
	return COMM_OK;
}

int comm_hier_create(struct comm_world *node, struct comm_ucx *u, int node_index,
		     int nnodes, const void *const *node_addrs,
		     const int *local_ranks_per_node, struct comm_hier **out)
{
	struct comm_hier *h;
	int rc = COMM_ENOMEM, n = 0;

	*out = NULL;
	if (!node || nnodes < 1 || node_index < 0 || node_index >= nnodes ||
	    (nnodes > 1 && (!u || !node_addrs)) || !local_ranks_per_node ||
	    !comm_world_rank(node, 0) ||
	    comm_size(comm_world_rank(node, 0)) != local_ranks_per_node[node_index])
		return COMM_EINVAL;
	for (int k = 0; k < nnodes; k++) {
		if (local_ranks_per_node[k] < 1)
			return COMM_EINVAL;
		n += local_ranks_per_node[k];
	}
	if (!(h = calloc(1, sizeof *h)))
		return COMM_ENOMEM;
	h->node = node;
	h->u = u;
	h->node_index = node_index;
	h->nnodes = nnodes;
	h->nlocal = local_ranks_per_node[node_index];
	h->count = calloc((size_t)nnodes, sizeof *h->count);
	h->base = calloc((size_t)nnodes, sizeof *h->base);
	h->identity = calloc((size_t)n, sizeof *h->identity);
	h->columns = calloc((size_t)h->nlocal, sizeof *h->columns);
	h->ranks = calloc((size_t)h->nlocal, sizeof *h->ranks);
	if (!h->count || !h->base || !h->identity || !h->columns || !h->ranks)
		goto fail;
	for (int k = 0; k < nnodes; k++) {
		h->count[k] = local_ranks_per_node[k];
		h->base[k] = h->size;
		h->size += h->count[k];
	}
	for (int g = 0; g < n; g++)
		h->identity[g] = g;
	if (nnodes > 1) {
		if ((rc = comm_ucx_world(u, node_index, nnodes, node_addrs, &h->cross)))
			goto fail;
		if ((rc = layout_agrees(h)) || (rc = make_columns(h)))
			goto fail;
	}
	for (int i = 0; i < h->nlocal; i++)
		h->ranks[i] = (struct hier_comm){
			.base = { .ops = &hier_ops, .rank = h->base[node_index] + i, .size = h->size },
			.h = h, .shm = comm_world_rank(node, i), .local = i,
			.cross = i == 0 ? h->cross : NULL, .column = h->columns[i],
			.nnodes = nnodes, .node = node_index, .count = h->count, .first = h->base,
			.channel = HIER_ID_P2P,
			.gnode = h->identity, .granks = h->identity,
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

void comm_hier_watch(struct comm_hier *h)
{
	if (h->cross && comm_ucx_poll(h->u) != COMM_OK && !comm_abort_reason(
		    comm_world_rank(h->node, 0))[0])
		ucx_failed(h, h->cross, COMM_EABORTED);
}

void comm_hier_destroy(struct comm_hier *h)
{
	if (!h)
		return;
	for (int i = 0; h->ranks && i < h->nlocal; i++) {
		free(h->ranks[i].send_seq);
		free(h->ranks[i].recv_seq);
	}
	for (int l = 1; h->columns && l < h->nlocal; l++)
		comm_free(h->columns[l]);
	comm_free(h->cross);
	free(h->columns);
	free(h->count);
	free(h->base);
	free(h->identity);
	free(h->ranks);
	free(h);
}
