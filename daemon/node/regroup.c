/* daemon/node/regroup.c - see regroup.h. */
#include "config.h"
#include "daemon/node/regroup.h"

#include "daemon/node/join.h"
#include "daemon/node/node.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/config/stork_config.h"
#include "lib/io/atomic_file.h"
#include "lib/log.h"
#include "lib/slurm/slurm_job.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a node waits for node 0's verdict beyond restart.in_place_wait. */
#define VERDICT_MARGIN_S 30.0
#define POLL_NS (50 * 1000 * 1000)

int regroup_init(struct regroup *g, const struct train_node *node, int nnodes)
{
	memset(g, 0, sizeof *g);
	if (!(g->alive = calloc((size_t)nnodes, sizeof *g->alive)))
		return -1;
	for (int i = 0; i < nnodes; i++)
		g->alive[i] = 1;
	g->nnodes = nnodes;
	g->self = node->node_rank;
	g->files = (struct membership_run){ .run_dir = node->run_dir, .job_id = node->job_id,
					    .restart_count = node->restart_count,
					    .attempt = node->attempt };
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->woken, NULL);
	return 0;
}

void regroup_free(struct regroup *g)
{
	if (!g->alive)
		return;
	free(g->alive);
	g->alive = NULL;
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->woken);
}

/* ------------------------------------------------ the rank threads' side */

int regroup_park(struct regroup *g, struct rank_progress *p, int64_t steps_done)
{
	int epoch, verdict;

	pthread_mutex_lock(&g->lock);
	epoch = g->epoch;
	g->parked++;
	if (steps_done > g->step)
		g->step = steps_done;
	if (g->since == 0)
		g->since = clock_monotonic();
	while (g->epoch == epoch) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 100 * 1000 * 1000;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->woken, &g->lock, &until);
		p->beat = clock_monotonic(); /* waiting here is not a hang */
	}
	verdict = g->verdict;
	pthread_mutex_unlock(&g->lock);
	return verdict;
}

/* ------------------------------------------------ the main thread's side */

int regroup_due(struct regroup *g, int started, int done)
{
	int due;

	pthread_mutex_lock(&g->lock);
	due = g->parked > 0 && g->parked + done == started;
	pthread_mutex_unlock(&g->lock);
	return due;
}

int regroup_called(struct regroup *g)
{
	char path[4200];

	return membership_path(path, sizeof path, &g->files, "regroup", g->epoch + 1, -1) == 0 &&
	       access(path, F_OK) == 0;
}

static void hex_encode(char *dst, const unsigned char *src, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		dst[2 * i] = digits[src[i] >> 4];
		dst[2 * i + 1] = digits[src[i] & 15];
	}
	dst[2 * n] = '\0';
}

/* Decode hex into a new buffer of *n bytes; NULL when malformed or out of memory. */
static unsigned char *hex_decode(const char *s, size_t *n)
{
	size_t len = strspn(s, "0123456789abcdef");
	unsigned char *b;

	if (len == 0 || len % 2 || !(b = malloc(len / 2)))
		return NULL;
	for (size_t i = 0; i < len / 2; i++)
		sscanf(s + 2 * i, "%2hhx", &b[i]);
	*n = len / 2;
	return b;
}

/* This node's offer for epoch: "ranks N\nucx HEX\n" (no address on a node alone). */
static int post_offer(struct regroup *g, int epoch, int local_ranks, const void *addr, size_t len)
{
	char path[4200], *text = malloc(2 * len + 64);
	int rc = -1;

	if (text && membership_path(path, sizeof path, &g->files, "member", epoch, g->self) == 0) {
		int head = snprintf(text, 64, "ranks %d\nucx ", local_ranks);

		hex_encode(text + head, addr, len);
		strcat(text, "\n");
		rc = atomic_post_once(path, text, strlen(text)) < 0 ? -1 : 0;
	}
	free(text);
	return rc;
}

/* Node k's offer for epoch: its rank count and UCX address (*addr: malloc'ed). 0 or -1. */
static int read_offer(struct regroup *g, int epoch, int k, int *ranks, void **addr, size_t *len)
{
	char path[4200], text[16384];
	const char *ucx;

	*addr = NULL;
	if (membership_path(path, sizeof path, &g->files, "member", epoch, k) < 0 ||
	    !membership_read(path, text, sizeof text) || sscanf(text, "ranks %d", ranks) != 1 ||
	    !(ucx = strstr(text, "\nucx ")))
		return -1;
	*addr = hex_decode(ucx + 5, len);
	if (!*addr)
		*len = 0;
	return 0;
}

static void nap(void)
{
	nanosleep(&(struct timespec){ 0, POLL_NS }, NULL);
}

/*
 * Whether the lost ranks are whole data-parallel replicas of the current
 * world (stage-major, then replica, then tensor rank: layout.c), and how
 * many replicas remain; -1 when a lost rank breaks a replica that remains.
 */
static int replicas_left(const struct stork_config *cfg, const int *lost_rank, int world)
{
	int tp = cfg->parallel.tensor, pp = cfg->parallel.pipeline, dp = world / (tp * pp);
	int left = 0;

	for (int d = 0; d < dp; d++) {
		int lost = 0;

		for (int s = 0; s < pp; s++)
			for (int t = 0; t < tp; t++)
				lost += lost_rank[s * tp * dp + d * tp + t];
		if (lost && lost != tp * pp)
			return -1;
		left += !lost;
	}
	return left;
}

/* A node Slurm took away leaves no word: slurmctld is asked twice a second. */
static int slurm_says_lost(const char *host, unsigned poll)
{
	return poll % 10 == 9 && slurm_job_id_from_env() &&
	       slurm_job_lost_node(slurm_job_id_from_env(), host) == 1;
}

/*
 * Node 0: wait for every node still in the run to offer itself or be
 * reported gone (its launcher's post) within restart.in_place_wait, and
 * write the verdict: "go ACCUM K1 K2 ...\n" then "lost K WHY\n" lines, or
 * "end WHY\n".
 */
static void decide(struct regroup *g, const struct regroup_node *n, int epoch)
{
	const struct run_layout *l = n->layout;
	const struct stork_config *cfg = n->cfg;
	int *state = calloc((size_t)g->nnodes, sizeof *state), *lost_rank = NULL;
	char (*why)[160] = calloc((size_t)g->nnodes, sizeof *why);
	double deadline = clock_monotonic() + cfg->restart.in_place_wait;
	char path[4200], text[8192], reason[512] = "";
	int world = 0, left, dp, accum, pending;
	size_t used = 0;

	if (!state || !why)
		goto out;
	for (unsigned poll = 0;; poll++) { /* state: 0 not heard of, 1 offered, 2 gone */
		pending = 0;
		for (int k = 0; k < g->nnodes; k++) {
			if (!g->alive[k] || state[k])
				continue;
			if (k == g->self ||
			    (membership_path(path, sizeof path, &g->files, "member", epoch, k) == 0 &&
			     access(path, F_OK) == 0))
				state[k] = 1;
			else if (membership_path(path, sizeof path, &g->files, "gone", -1, k) == 0 &&
				 membership_read(path, why[k], sizeof why[k]))
				state[k] = 2;
			else if (slurm_says_lost(l->nodes[k].host, poll))
				state[k] = 2;
			else
				pending++;
			if (state[k] == 2 && !why[k][0])
				snprintf(why[k], sizeof why[k], "storkd died with its node: Slurm "
					 "took %s away", l->nodes[k].host);
		}
		if (!pending || clock_monotonic() >= deadline)
			break;
		nap();
	}
	for (int k = 0; k < g->nnodes; k++) {
		if (!g->alive[k])
			continue;
		world += l->nodes[k].local_ranks;
		if (state[k] == 0)
			snprintf(why[k], sizeof why[k], "no word from it in %g s (restart.in_place_wait)",
				 cfg->restart.in_place_wait);
		why[k][strcspn(why[k], "\n")] = '\0';
		/* a daemon that ended on its own failure ends the run, as without in_place */
		if (state[k] == 2 && strncmp(why[k], "storkd died", 11) && !reason[0])
			snprintf(reason, sizeof reason, "%s ended: %s", l->nodes[k].host, why[k]);
	}
	if (!reason[0] && (lost_rank = calloc((size_t)world, sizeof *lost_rank))) {
		for (int k = 0, base = 0; k < g->nnodes; k++) {
			if (!g->alive[k])
				continue;
			for (int i = 0; i < l->nodes[k].local_ranks; i++)
				lost_rank[base + i] = state[k] != 1;
			base += l->nodes[k].local_ranks;
		}
		dp = world / (cfg->parallel.tensor * cfg->parallel.pipeline);
		left = replicas_left(cfg, lost_rank, world);
		accum = left > 0 ? cfg->train.grad_accum * dp / left : 0;
		if (left < 0)
			snprintf(reason, sizeof reason, "the lost ranks take part of a replica that "
				 "remains (tensor or pipeline groups across nodes)");
		else if (left == 0)
			snprintf(reason, sizeof reason, "no data-parallel replica is left");
		else if (cfg->train.grad_accum * dp % left || accum < cfg->parallel.pipeline)
			snprintf(reason, sizeof reason, "%d replica(s) cannot make the global batch of "
				 "%d x train.grad_accum %d", left, dp, cfg->train.grad_accum);
		if (!reason[0]) {
			used = (size_t)snprintf(text, sizeof text, "go %d", accum);
			for (int k = 0; k < g->nnodes && used < sizeof text; k++)
				if (g->alive[k] && state[k] == 1)
					used += (size_t)snprintf(text + used, sizeof text - used, " %d", k);
			for (int k = 0; k < g->nnodes && used < sizeof text; k++)
				if (g->alive[k] && state[k] != 1)
					used += (size_t)snprintf(text + used, sizeof text - used,
								 "\nlost %d %s", k, why[k]);
			if (used < sizeof text)
				used += (size_t)snprintf(text + used, sizeof text - used, "\n");
		}
	}
out:
	if (!used || used >= sizeof text)
		snprintf(text, sizeof text, "end %s\n", reason[0] ? reason : "out of memory");
	if (membership_path(path, sizeof path, &g->files, "members", epoch, -1) == 0)
		atomic_post_once(path, text, strlen(text));
	free(state);
	free(why);
	free(lost_rank);
}

/* Node 0's verdict for epoch into text; -1 when none came in time. */
static int await_verdict(struct regroup *g, const struct stork_config *cfg, int epoch, char *text,
			 size_t len)
{
	double deadline = clock_monotonic() + cfg->restart.in_place_wait + VERDICT_MARGIN_S;
	char path[4200];

	if (membership_path(path, sizeof path, &g->files, "members", epoch, -1) < 0)
		return -1;
	while (!membership_read(path, text, len))
		if (clock_monotonic() >= deadline)
			return -1;
		else
			nap();
	return 0;
}

/* Record each "lost K WHY" line of the verdict, and the node as gone. */
static void record_losses(struct regroup *g, const struct run_layout *l, const char *text,
			  double seconds)
{
	for (const char *p = strstr(text, "\nlost "); p; p = strstr(p + 1, "\nlost ")) {
		struct regroup_loss *x;
		int k, at;

		if (sscanf(p, "\nlost %d %n", &k, &at) != 1 || k < 0 || k >= g->nnodes)
			continue;
		g->alive[k] = 0;
		if (g->nlosses == REGROUP_MAX_LOSSES)
			continue;
		x = &g->losses[g->nlosses++];
		x->node = k;
		snprintf(x->host, sizeof x->host, "%s", l->nodes[k].host);
		x->step = g->step;
		x->seconds = seconds;
		snprintf(x->why, sizeof x->why, "%.*s", (int)strcspn(p + at, "\n"), p + at);
	}
}

/*
 * Connect to the members of the verdict ("go ACCUM K1 K2 ..."): this
 * node's new place, the global communicator again, train.grad_accum.
 * 0, or -1 with the reason in g->message.
 */
static int reconnect(struct regroup *g, const struct regroup_node *n, int epoch, const char *text)
{
	struct train_node *node = n->node;
	int members[256], nm = 0, accum, at, index = -1, base = 0, world = 0, rc = -1;
	void *addrs[256] = { 0 };
	int counts[256];
	size_t lens[256];
	char err[512];

	if (sscanf(text, "go %d%n", &accum, &at) != 1)
		return -1;
	for (const char *p = text + at; nm < 256 && sscanf(p, " %d%n", &members[nm], &at) == 1; p += at)
		nm++;
	for (int i = 0; i < nm; i++) {
		if (members[i] == g->self)
			index = i;
		if (read_offer(g, epoch, members[i], &counts[i], &addrs[i], &lens[i]) < 0) {
			snprintf(g->message, sizeof g->message, "cannot read node %d's offer",
				 members[i]);
			goto out;
		}
		if (index < 0)
			base += counts[i];
		world += counts[i];
	}
	if (index < 0) {
		snprintf(g->message, sizeof g->message, "node 0 left this node out");
		goto out;
	}
	if (nm == 1) { /* alone now: shared memory only */
		comm_ucx_close(*n->ucx);
		*n->ucx = NULL;
	}
	if (node_connect(node, *n->ucx, index, nm, (const void *const *)addrs, counts, n->hier, err,
			 sizeof err)) {
		snprintf(g->message, sizeof g->message, "%s", err);
		goto out;
	}
	g->dp_before = node->world_size / (n->cfg->parallel.tensor * n->cfg->parallel.pipeline);
	g->accum_before = n->cfg->train.grad_accum;
	node->node_rank = index;
	node->rank_base = base;
	node->world_size = world;
	n->cfg->train.grad_accum = accum;
	rc = 0;
out:
	for (int i = 0; i < nm; i++)
		free(addrs[i]);
	return rc;
}

/* Let go of the node's communicators (every rank has let go of its own). */
static void disconnect(const struct regroup_node *n)
{
	comm_hier_destroy(*n->hier);
	*n->hier = NULL;
	comm_world_destroy(n->node->world);
	n->node->world = NULL;
	comm_ucx_close(*n->ucx);
	*n->ucx = NULL;
}

static int agree(struct regroup *g, const struct regroup_node *n, int epoch, char *text, size_t len)
{
	const void *addr = NULL;
	size_t addr_len = 0;
	char path[4200], call[64];
	int others = 0;

	snprintf(call, sizeof call, "node %d\n", g->self);
	if (membership_path(path, sizeof path, &g->files, "regroup", epoch, -1) == 0)
		atomic_post_once(path, call, strlen(call));
	if (n->primary) {
		snprintf(g->message, sizeof g->message, "a rank of this node failed on its own");
		return -1;
	}
	disconnect(n);
	for (int k = 0; k < g->nnodes; k++)
		others += g->alive[k] && k != g->self;
	if (others && comm_ucx_open(n->ucx, &addr, &addr_len) < 0) {
		snprintf(g->message, sizeof g->message, "cannot open UCX again");
		return -1;
	}
	if (post_offer(g, epoch, n->node->local_ranks, addr, addr_len) < 0) {
		snprintf(g->message, sizeof g->message, "cannot write this node's offer in %s/logs: %s",
			 g->files.run_dir, strerror(errno));
		return -1;
	}
	if (g->self == 0)
		decide(g, n, epoch);
	if (await_verdict(g, n->cfg, epoch, text, len) < 0) {
		snprintf(g->message, sizeof g->message, "node 0 gave no verdict in %g s",
			 n->cfg->restart.in_place_wait + VERDICT_MARGIN_S);
		return -1;
	}
	if (!strncmp(text, "end ", 4)) {
		snprintf(g->message, sizeof g->message, "%.*s", (int)strcspn(text + 4, "\n"), text + 4);
		return -1;
	}
	return 0;
}

int regroup_run(struct regroup *g, const struct regroup_node *n)
{
	int epoch = g->epoch + 1, verdict;
	char text[8192];
	double t0 = g->since ? g->since : clock_monotonic();

	g->message[0] = '\0';
	verdict = agree(g, n, epoch, text, sizeof text) == 0 && reconnect(g, n, epoch, text) == 0 ?
			  0 : -1;
	if (verdict == 0) {
		int first = g->nlosses;

		record_losses(g, n->layout, text, clock_monotonic() - t0);
		for (int i = first; i < g->nlosses; i++)
			snprintf(g->message, sizeof g->message, "%s lost after step %lld: %s",
				 g->losses[i].host, (long long)g->losses[i].step, g->losses[i].why);
		if (g->self == 0)
			for (int i = first; i < g->nlosses; i++)
				stork_warn("%s lost after step %lld (%s): going on without it on %d "
					   "ranks, train.grad_accum %d -> %d keeps the global batch "
					   "(restart.in_place, %.1f s)", g->losses[i].host,
					   (long long)g->losses[i].step, g->losses[i].why,
					   n->node->world_size, g->accum_before, n->cfg->train.grad_accum,
					   g->losses[i].seconds);
	} else if (g->self == 0) {
		stork_error("the run cannot go on without the lost node(s): %s (restart.in_place)",
			    g->message);
	} else {
		stork_info("restart.in_place: this node ends: %s", g->message);
	}
	pthread_mutex_lock(&g->lock);
	g->verdict = verdict;
	g->last_since = t0;
	g->since = 0;
	g->parked = 0;
	g->epoch = epoch;
	pthread_cond_broadcast(&g->woken);
	pthread_mutex_unlock(&g->lock);
	return verdict;
}

json_t *regroup_losses_json(const struct regroup *g)
{
	json_t *a = json_array();

	for (int i = 0; a && i < g->nlosses; i++) {
		const struct regroup_loss *x = &g->losses[i];

		json_array_append_new(a, json_pack("{s:i, s:s, s:I, s:f, s:s}", "node", x->node,
						   "host", x->host, "after_step", (json_int_t)x->step,
						   "seconds", x->seconds, "why", x->why));
	}
	return a;
}
