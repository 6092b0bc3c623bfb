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
#include "lib/run/exit_info.h"
#include "lib/slurm/slurm_job.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a node waits for the lead's verdict beyond restart.in_place_wait. */
#define VERDICT_MARGIN_S 30.0
#define POLL_NS (50 * 1000 * 1000)

int regroup_init(struct regroup *g, const struct train_node *node, int nnodes, int active)
{
	memset(g, 0, sizeof *g);
	g->alive = calloc((size_t)nnodes, sizeof *g->alive);
	g->spare = calloc((size_t)nnodes, sizeof *g->spare);
	g->rejoin = calloc((size_t)nnodes, sizeof *g->rejoin);
	if (!g->alive || !g->spare || !g->rejoin) {
		free(g->alive);
		free(g->spare);
		free(g->rejoin);
		return -1;
	}
	for (int i = 0; i < nnodes; i++) {
		g->alive[i] = 1;
		g->spare[i] = i >= active;
	}
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
	free(g->spare);
	free(g->rejoin);
	g->alive = g->spare = g->rejoin = NULL;
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->woken);
}

/* Whether this attempt's file of this kind, epoch and node (membership_path) is posted. */
static int posted(const struct regroup *g, const char *kind, int epoch, int node)
{
	char path[4200];

	return membership_path(path, sizeof path, &g->files, kind, epoch, node) == 0 &&
	       access(path, F_OK) == 0;
}

int regroup_lead(const struct regroup *g)
{
	for (int k = 0; k < g->nnodes; k++)
		if (g->alive[k] && !g->spare[k] && !posted(g, "gone", -1, k))
			return k;
	return -1;
}

/* ------------------------------------------------ restart.rejoin */

void regroup_expect(struct regroup *g, int node)
{
	char path[4200];

	g->alive[node] = g->spare[node] = g->rejoin[node] = 1;
	/* the launcher that died said so once; the new one may need to say it again */
	if (membership_path(path, sizeof path, &g->files, "gone", -1, node) == 0)
		unlink(path);
	if (membership_path(path, sizeof path, &g->files, "ready", -1, node) == 0)
		unlink(path);
}

void regroup_forget(struct regroup *g, int node)
{
	if (g->rejoin[node])
		g->alive[node] = g->spare[node] = g->rejoin[node] = 0;
}

int regroup_admit(struct regroup *g, int steps_left)
{
	char path[4200], call[64];

	for (int k = 0; k < g->nnodes; k++) {
		if (!g->rejoin[k] || !posted(g, "ready", -1, k))
			continue;
		if (steps_left < 2) { /* too late to be worth a regroup: the run ends without it */
			regroup_forget(g, k);
			continue;
		}
		snprintf(call, sizeof call, "node %d lets node %d in\n", g->self, k);
		if (membership_path(path, sizeof path, &g->files, "regroup", g->epoch + 1, -1) == 0)
			atomic_post_once(path, call, strlen(call));
		return 1;
	}
	return 0;
}

void regroup_rejoining(struct regroup *g, int epoch)
{
	g->spare[g->self] = g->rejoin[g->self] = 1;
	/* the regroups decided while its launcher started are not its own */
	g->epoch = epoch;
	while (posted(g, "members", g->epoch + 1, -1))
		g->epoch++;
}

void regroup_rejoin_ready(struct regroup *g, int started)
{
	char path[4200];
	int all;

	if (!g->rejoin[g->self] || g->ready_posted)
		return;
	pthread_mutex_lock(&g->lock);
	all = g->parked == started;
	pthread_mutex_unlock(&g->lock);
	if (all && membership_path(path, sizeof path, &g->files, "ready", -1, g->self) == 0 &&
	    atomic_post_once(path, "ready\n", 6) >= 0)
		g->ready_posted = 1;
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
	if (g->since == 0 && steps_done >= 0) /* a spare's wait is not a loss's cost */
		g->since = clock_monotonic();
	while (g->epoch == epoch) {
		struct timespec until = clock_wall_in_ms(100);

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
	return posted(g, "regroup", g->epoch + 1, -1);
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
static int read_offer(struct regroup *g, int epoch, int k, int *ranks, void **addr)
{
	char path[4200], text[16384];
	const char *ucx;
	size_t len;

	*addr = NULL;
	if (membership_path(path, sizeof path, &g->files, "member", epoch, k) < 0 ||
	    !atomic_post_read(path, text, sizeof text) || sscanf(text, "ranks %d", ranks) != 1 ||
	    !(ucx = strstr(text, "\nucx ")))
		return -1;
	*addr = hex_decode(ucx + 5, &len); /* a UCX address says its own length */
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
 * The lead: wait until every node still in the run (spares included) has
 * offered itself for epoch or is known gone (its launcher's post, or
 * slurmctld), at most restart.in_place_wait. state[k]: 1 offered, 2 gone,
 * 0 silent; why[k] what ended a node that did not offer itself.
 */
static void gather(struct regroup *g, const struct run_layout *l, double wait, int epoch,
		   int *state, char (*why)[160])
{
	double deadline = clock_monotonic() + wait;
	char path[4200];

	for (unsigned poll = 0;; poll++) {
		int pending = 0;

		for (int k = 0; k < g->nnodes; k++) {
			if (!g->alive[k] || state[k])
				continue;
			if (k == g->self || posted(g, "member", epoch, k))
				state[k] = 1;
			else if (membership_path(path, sizeof path, &g->files, "gone", -1, k) == 0 &&
				 atomic_post_read(path, why[k], sizeof why[k]))
				state[k] = 2;
			else if (g->rejoin[k] && !posted(g, "ready", -1, k))
				continue; /* not ready to come in: it waits for the next regroup */
			else if (slurm_says_lost(l->nodes[k].host, poll))
				state[k] = 2;
			else
				pending++;
			if (state[k] == 2 && !why[k][0])
				snprintf(why[k], sizeof why[k], MEMBERSHIP_DIED " with its node: "
					 "Slurm took %s away", l->nodes[k].host);
		}
		if (!pending || clock_monotonic() >= deadline)
			break;
		nap();
	}
	for (int k = 0; k < g->nnodes; k++) {
		if (g->alive[k] && state[k] == 0 && !g->rejoin[k])
			snprintf(why[k], sizeof why[k], "no word from it in %g s (restart.in_place_wait)",
				 wait);
		why[k][strcspn(why[k], "\n")] = '\0';
	}
}

/*
 * The new world's nodes in order (place, *nplace): each node of the
 * current world that offered itself, or in a lost one's place a spare
 * with as many ranks (replaced[k]: that spare, -1 none); lost_rank marks
 * the current world's ranks that nobody takes over.
 */
static void place_nodes(const struct regroup *g, const struct run_layout *l, const int *state,
			int *place, int *nplace, int *replaced, int *lost_rank)
{
	int *used = calloc((size_t)g->nnodes, sizeof *used);

	*nplace = 0;
	for (int k = 0, base = 0; k < g->nnodes; k++) {
		int ranks = l->nodes[k].local_ranks;

		replaced[k] = -1;
		if (g->rejoin[k]) { /* back in its own place, in order, once it offered */
			if (state[k] == 1)
				place[(*nplace)++] = k;
			continue;
		}
		if (!g->alive[k] || g->spare[k])
			continue;
		if (state[k] == 1) {
			place[(*nplace)++] = k;
		} else {
			for (int s = 0; used && s < g->nnodes && replaced[k] < 0; s++)
				if (g->alive[s] && g->spare[s] && !g->rejoin[s] && state[s] == 1 &&
				    !used[s] && l->nodes[s].local_ranks == ranks)
					replaced[k] = s;
			if (replaced[k] >= 0) {
				used[replaced[k]] = 1;
				place[(*nplace)++] = replaced[k];
			}
		}
		for (int i = 0; i < ranks; i++)
			lost_rank[base + i] = state[k] != 1 && replaced[k] < 0;
		base += ranks;
	}
	free(used);
}

/*
 * The verdict's text: "go ACCUM K1 K2 ..." (the new world's nodes in
 * order), then a line per node: "spare K" (still waiting), "replaced K
 * BY" and "lost K WHY"; or "" with reason set when the run cannot go on.
 */
static size_t verdict(const struct regroup *g, const struct regroup_node *n, const int *state,
		      char (*why)[160], char *text, size_t len, char *reason, size_t rlen)
{
	const struct run_layout *l = n->layout;
	const struct stork_config *cfg = n->cfg;
	size_t nn = g->nnodes > 0 ? (size_t)g->nnodes : 1;
	int *place = calloc(nn, sizeof *place), *replaced = calloc(nn, sizeof *replaced);
	int *lost_rank = NULL;
	int world = 0, nplace = 0, left, dp, accum, back = 0, group;
	size_t used = 0;

	for (int k = 0; k < g->nnodes; k++)
		world += g->alive[k] && !g->spare[k] ? l->nodes[k].local_ranks : 0;
	if (!place || !replaced || !(lost_rank = calloc((size_t)world, sizeof *lost_rank))) {
		snprintf(reason, rlen, "out of memory");
		goto out;
	}
	place_nodes(g, l, state, place, &nplace, replaced, lost_rank);
	group = cfg->parallel.tensor * cfg->parallel.pipeline;
	dp = world / group;
	left = replicas_left(cfg, lost_rank, world);
	for (int k = 0; k < g->nnodes; k++) /* the replicas that come back (restart.rejoin) */
		back += g->rejoin[k] && state[k] == 1 ? l->nodes[k].local_ranks : 0;
	if (left > 0 && back % group == 0)
		left += back / group;
	accum = left > 0 ? cfg->train.grad_accum * dp / left : 0;
	if (back % group)
		snprintf(reason, rlen, "the nodes that come back hold %d rank(s), not whole replicas "
			 "of %d", back, group);
	else if (left < 0)
		snprintf(reason, rlen, "the lost ranks take part of a replica that remains (tensor "
			 "or pipeline groups across nodes), and no spare of as many ranks took "
			 "their place");
	else if (left == 0)
		snprintf(reason, rlen, "no data-parallel replica is left");
	else if (cfg->train.grad_accum * dp % left || accum < cfg->parallel.pipeline)
		snprintf(reason, rlen, "%d replica(s) cannot make the global batch of %d x "
			 "train.grad_accum %d", left, dp, cfg->train.grad_accum);
	if (reason[0])
		goto out;
	used = (size_t)snprintf(text, len, "go %d", accum);
	for (int i = 0; i < nplace && used < len; i++)
		used += (size_t)snprintf(text + used, len - used, " %d", place[i]);
	for (int k = 0; k < g->nnodes && used < len; k++) {
		int kept = 0;

		for (int i = 0; i < nplace; i++)
			kept |= place[i] == k;
		if (g->rejoin[k] && kept)
			used += (size_t)snprintf(text + used, len - used, "\njoined %d", k);
		if (!g->alive[k] || kept || g->rejoin[k])
			continue;
		if (g->spare[k] && state[k] == 1)
			used += (size_t)snprintf(text + used, len - used, "\nspare %d", k);
		else
			used += (size_t)snprintf(text + used, len - used, "\nlost %d %s", k, why[k]);
		if (replaced[k] >= 0 && used < len)
			used += (size_t)snprintf(text + used, len - used, "\nreplaced %d %d", k,
						 replaced[k]);
	}
	if (used < len)
		used += (size_t)snprintf(text + used, len - used, "\n");
out:
	free(place);
	free(replaced);
	free(lost_rank);
	return used < len ? used : 0;
}

/*
 * The layout cannot take the nodes that came back (a global batch the
 * replicas would not divide): they stay out, and the regroup decides
 * without them. 1 when there were any.
 */
static int leave_out_rejoiners(struct regroup *g, int *state)
{
	int any = 0;

	for (int k = 0; state && k < g->nnodes; k++)
		if (g->rejoin[k] && state[k] == 1) {
			state[k] = 0;
			regroup_forget(g, k);
			any = 1;
		}
	return any;
}

/*
 * The lead: gather the offers, and post the verdict for every node: "go
 * ..." (verdict()), or "end WHY" when the run cannot go on.
 */
static void decide(struct regroup *g, const struct regroup_node *n, int epoch)
{
	int *state = calloc((size_t)g->nnodes, sizeof *state);
	char (*why)[160] = calloc((size_t)g->nnodes, sizeof *why);
	char path[4200], text[8192], reason[512] = "";
	size_t ok = 0;

	if (!state || !why) {
		snprintf(reason, sizeof reason, "out of memory");
	} else {
		gather(g, n->layout, n->cfg->restart.in_place_wait, epoch, state, why);
		/* a daemon that ended on its own failure ends the run, as without in_place */
		for (int k = 0; k < g->nnodes && !reason[0]; k++)
			if (g->alive[k] && !g->spare[k] && state[k] == 2 &&
			    strncmp(why[k], MEMBERSHIP_DIED, strlen(MEMBERSHIP_DIED)))
				snprintf(reason, sizeof reason, "%s ended: %s", n->layout->nodes[k].host,
					 why[k]);
	}
	if (!reason[0])
		ok = verdict(g, n, state, why, text, sizeof text, reason, sizeof reason);
	if (!ok && reason[0] && leave_out_rejoiners(g, state)) {
		stork_warn("restart.rejoin: the nodes that came back stay out: %s", reason);
		reason[0] = '\0';
		ok = verdict(g, n, state, why, text, sizeof text, reason, sizeof reason);
	}
	for (int k = 0; state && k < g->nnodes; k++) /* their launchers ended: forget them */
		if (g->rejoin[k] && state[k] == 2)
			regroup_forget(g, k);
	if (!ok)
		snprintf(text, sizeof text, "end %s\n", reason[0] ? reason : "the verdict is too long");
	if (membership_path(path, sizeof path, &g->files, "members", epoch, -1) == 0)
		atomic_post_once(path, text, strlen(text));
	free(state);
	free(why);
}

/*
 * Whether the lead node's launcher wrote its node's record: the attempt
 * is over. A launcher whose daemon was lost writes its record too, after
 * it said so (gone), so the lead is asked again once the record is seen.
 */
static int run_ended(const struct regroup *g)
{
	char path[4200];
	int lead = regroup_lead(g);

	return lead >= 0 &&
	       exit_info_node_path(path, sizeof path, g->files.run_dir, lead,
				   g->files.restart_count, g->files.attempt) == 0 &&
	       access(path, F_OK) == 0 && regroup_lead(g) == lead;
}

/*
 * The lead node's verdict for epoch into text; -1 when none came in time
 * (or the attempt ended). The lead decides: this node, when it is the
 * lead or becomes it while it waits (the lead's launcher said its daemon
 * was lost).
 */
static int await_verdict(struct regroup *g, const struct regroup_node *n, int epoch, char *text,
			 size_t len)
{
	double deadline = clock_monotonic() + n->cfg->restart.in_place_wait + VERDICT_MARGIN_S;
	char path[4200];

	if (membership_path(path, sizeof path, &g->files, "members", epoch, -1) < 0)
		return -1;
	for (unsigned poll = 0; !atomic_post_read(path, text, len); poll++) {
		if (!g->decided && regroup_lead(g) == g->self) {
			decide(g, n, epoch);
			g->decided = 1;
			deadline = clock_monotonic() + VERDICT_MARGIN_S;
			continue;
		}
		if (clock_monotonic() >= deadline || (poll % 20 == 19 && run_ended(g)))
			return -1;
		nap();
	}
	return 0;
}

/* The node a "WORD K" line of the verdict names (text + at: the rest), or -1. */
static int line_node(const struct regroup *g, const char *p, const char *word, int *at)
{
	size_t w = strlen(word);
	char *end;
	long k;

	if (p[0] != '\n' || strncmp(p + 1, word, w) || p[1 + w] != ' ')
		return -1;
	k = strtol(p + 2 + w, &end, 10);
	if (end == p + 2 + w || k < 0 || k >= g->nnodes)
		return -1;
	*at = (int)(end - p) + (*end == ' ');
	return (int)k;
}

/*
 * The verdict's word on every node: the members (members[], nm) and the
 * spares that wait stay in, the "lost" ones leave and are recorded, with
 * the spare that took a lost one's place ("replaced K BY").
 */
static void record_verdict(struct regroup *g, const struct run_layout *l, const char *text,
			   const int *members, int nm, double seconds)
{
	int first = g->nlosses;

	for (int k = 0; k < g->nnodes; k++) /* a rejoiner not let in yet waits on */
		g->alive[k] = g->spare[k] = g->rejoin[k];
	for (int i = 0; i < nm; i++)
		g->alive[members[i]] = 1;
	for (const char *p = strchr(text, '\n'); p; p = strchr(p + 1, '\n')) {
		struct regroup_loss *x;
		int k, by, at;

		if ((k = line_node(g, p, "spare", &at)) >= 0) {
			g->alive[k] = g->spare[k] = 1;
		} else if ((k = line_node(g, p, "joined", &at)) >= 0) {
			g->spare[k] = g->rejoin[k] = 0;
			if (g->njoins < REGROUP_MAX_LOSSES) {
				struct regroup_join *j = &g->joins[g->njoins++];

				j->node = k;
				snprintf(j->host, sizeof j->host, "%s", l->nodes[k].host);
				j->seconds = seconds;
			}
		} else if ((k = line_node(g, p, "replaced", &at)) >= 0) {
			by = atoi(p + at);
			for (int i = first; i < g->nlosses && by >= 0 && by < g->nnodes; i++)
				if (g->losses[i].node == k)
					snprintf(g->losses[i].by, sizeof g->losses[i].by, "%s",
						 l->nodes[by].host);
		} else if ((k = line_node(g, p, "lost", &at)) >= 0 &&
			   g->nlosses < REGROUP_MAX_LOSSES) {
			x = &g->losses[g->nlosses++];
			x->node = k;
			snprintf(x->host, sizeof x->host, "%s", l->nodes[k].host);
			x->step = g->step;
			x->seconds = seconds;
			x->by[0] = '\0';
			snprintf(x->why, sizeof x->why, "%.*s", (int)strcspn(p + at, "\n"), p + at);
		}
	}
}

/* A spare that waits on: alone again, without UCX. */
static int wait_on(struct regroup *g, const struct regroup_node *n)
{
	int ranks = n->node->local_ranks;
	const void *none = NULL;
	char err[512];

	comm_ucx_close(*n->ucx);
	*n->ucx = NULL;
	if (node_connect(n->node, NULL, 0, 1, &none, &ranks, n->hier, err, sizeof err)) {
		snprintf(g->message, sizeof g->message, "%s", err);
		return REGROUP_END;
	}
	return REGROUP_WAIT;
}

/*
 * Connect to the members of the verdict ("go ACCUM K1 K2 ..."): this
 * node's new place, the global communicator again, train.grad_accum; a
 * spare the verdict keeps waiting waits on. Returns the verdict for this
 * node (REGROUP_END with the reason in g->message).
 */
static int reconnect(struct regroup *g, const struct regroup_node *n, int epoch, const char *text,
		     double seconds)
{
	struct train_node *node = n->node;
	int members[256], nm = 0, accum, at, index = -1, base = 0, world = 0, rc = REGROUP_END;
	void *addrs[256] = { 0 };
	int counts[256];
	char err[512], mine[32];

	if (sscanf(text, "go %d%n", &accum, &at) != 1)
		return REGROUP_END;
	for (const char *p = text + at; nm < 256 && sscanf(p, " %d%n", &members[nm], &at) == 1; p += at)
		nm++;
	snprintf(mine, sizeof mine, "\nspare %d\n", g->self);
	if (strstr(text, mine)) {
		record_verdict(g, n->layout, text, members, nm, seconds);
		return wait_on(g, n);
	}
	for (int i = 0; i < nm; i++) {
		if (members[i] == g->self)
			index = i;
		if (read_offer(g, epoch, members[i], &counts[i], &addrs[i]) < 0) {
			snprintf(g->message, sizeof g->message, "cannot read node %d's offer",
				 members[i]);
			goto out;
		}
		if (index < 0)
			base += counts[i];
		world += counts[i];
	}
	if (index < 0) {
		snprintf(g->message, sizeof g->message, "the verdict left this node out");
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
	node->spare = node->rejoining = 0;
	n->cfg->train.grad_accum = accum;
	record_verdict(g, n->layout, text, members, nm, seconds);
	rc = REGROUP_GO;
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
	if (await_verdict(g, n, epoch, text, len) < 0) {
		snprintf(g->message, sizeof g->message, "the lead node gave no verdict in %g s",
			 n->cfg->restart.in_place_wait + VERDICT_MARGIN_S);
		return -1;
	}
	if (!strncmp(text, "end ", 4)) {
		snprintf(g->message, sizeof g->message, "%.*s", (int)strcspn(text + 4, "\n"), text + 4);
		return -1;
	}
	return 0;
}

/* Wake the parked ranks with the verdict. */
static void wake(struct regroup *g, int verdict, double since)
{
	pthread_mutex_lock(&g->lock);
	g->verdict = verdict;
	g->last_since = since;
	g->since = 0;
	g->parked = 0;
	g->epoch++;
	pthread_cond_broadcast(&g->woken);
	pthread_mutex_unlock(&g->lock);
}

/* The decider's line for each loss this regroup recorded (from index first). */
static void say_losses(const struct regroup *g, const struct regroup_node *n, int first)
{
	for (int i = first; i < g->nlosses; i++) {
		const struct regroup_loss *x = &g->losses[i];

		if (x->by[0])
			stork_warn("%s lost after step %lld (%s): %s, a spare, takes its place; %d "
				   "ranks go on (restart.in_place, %.1f s)", x->host,
				   (long long)x->step, x->why, x->by, n->node->world_size,
				   x->seconds);
		else
			stork_warn("%s lost after step %lld (%s): going on without it on %d ranks, "
				   "train.grad_accum %d -> %d keeps the global batch "
				   "(restart.in_place, %.1f s)", x->host, (long long)x->step, x->why,
				   n->node->world_size, g->accum_before, n->cfg->train.grad_accum,
				   x->seconds);
	}
}

/* The decider's line for each node the last regroup let back in (restart.rejoin). */
static void say_joins(const struct regroup *g, const struct regroup_node *n)
{
	for (int i = g->last_join_first; i < g->njoins; i++)
		stork_warn("%s is back in the run (restart.rejoin): %d ranks go on, train.grad_accum "
			   "%d -> %d keeps the global batch (%.1f s)", g->joins[i].host,
			   n->node->world_size, g->accum_before, n->cfg->train.grad_accum,
			   g->joins[i].seconds);
}

int regroup_run(struct regroup *g, const struct regroup_node *n)
{
	int epoch = g->epoch + 1, verdict, first = g->nlosses;
	char text[8192];
	double t0 = g->since ? g->since : clock_monotonic();

	g->message[0] = '\0';
	g->last_join_first = g->njoins;
	g->decided = 0;
	verdict = agree(g, n, epoch, text, sizeof text) == 0 ?
			  reconnect(g, n, epoch, text, clock_monotonic() - t0) : REGROUP_END;
	if (verdict == REGROUP_GO && g->decided) {
		say_losses(g, n, first);
		say_joins(g, n);
	}
	else if (verdict == REGROUP_END && g->decided)
		stork_error("the run cannot go on without the lost node(s): %s (restart.in_place)",
			    g->message);
	else if (verdict == REGROUP_END)
		stork_info("restart.in_place: this node ends: %s", g->message);
	g->last_first = first;
	wake(g, verdict, t0);
	return verdict;
}

int regroup_spare_released(struct regroup *g, int stopped)
{
	if (!stopped && !run_ended(g))
		return 0;
	snprintf(g->message, sizeof g->message, "%s", stopped ?
		 "a stop signal came before the run needed this spare" :
		 "the run ended without needing this spare");
	wake(g, REGROUP_END, 0);
	return 1;
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
