/*
 * daemon/engine/train/preflight_probe.c - see preflight_probe.h.
 *
 * Each rank, on its own device: a matrix product of the size of a GPT-2
 * block's (CPU: 512 x 768 by 768 x 768; GPU: 4096 cubed), best of five
 * timings after a warm-up, in GFLOP/s; a copy of 64 MiB (GPU: 1 GiB), best
 * of five, counted as bytes read plus written per second. Then every
 * parallel group of more than one rank all-reduces a buffer of the size
 * its training step sends (data parallelism: the rank's parameters, at
 * most 16 MiB; tensor parallelism: one block's activations; the world:
 * 4 MiB), best of three, in GB/s of the buffer. Best-of timings keep a
 * node that is merely busy for a moment from looking slow; so does the
 * second measurement of every device when some node falls short (a node
 * is left out only if it falls short with the better of both).
 *
 * Every rank gets every rank's figures (one all-gather), so every rank
 * reaches the same verdict without another message: a node is judged on
 * the slowest of its ranks against the median of the other nodes' (two
 * nodes: the other one's), on the matrix product and the copy; more than
 * preflight.tolerance below, or a probe that failed, and it is left out.
 * The all-reduce figures are written down but judge no node: a slow link
 * slows every member of its group alike.
 *
 * Leaving out: rank 0 requeues the job (when it may be requeued) and
 * excludes the nodes (ExcNodeList), as for a lost node; every rank ends
 * with node_lost_requeued. When it cannot, the run ends with
 * preflight_failed naming the nodes and figures. Rank 0 writes every
 * rank's figures to metrics/preflight.csv either way.
 */
#include "config.h"
#include "daemon/engine/train/preflight_probe.h"
#include "daemon/engine/train/preflight_verdict.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"

#include "daemon/engine/parallel/layout.h"
#include "daemon/node/rank_log.h"
#include "kernels/ops.h"
#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/slurm/slurm_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFIG (sizeof(struct probe_figures) / sizeof(float))

/* ------------------------------------------------------------ the probes */

/*
 * Test builds: this host's matrix product does its work this many times per
 * count. Ten, not a few: the test cluster's nodes share one machine's cores,
 * so their honest figures differ by up to 2x, and a node slowed only 4x
 * could land inside the tolerance.
 */
static int slow_factor(const struct rank *r)
{
#ifdef STORK_FAULT_INJECTION
	const char *h = getenv("STORK_FAULT_PREFLIGHT_SLOW_HOST");

	if (h && !strcmp(h, r->node->host))
		return 10;
#else
	(void)r;
#endif
	return 1;
}

static double probe_matmul(const struct rank *r)
{
	const struct ops *o = r->ops;
	int gpu = o != &ops_cpu, N = gpu ? 4096 : 512, C = gpu ? 4096 : 768, slow = slow_factor(r);
	float *in = o->alloc((size_t)N * C * sizeof(float));
	float *w = o->alloc((size_t)C * C * sizeof(float));
	float *out = o->alloc((size_t)N * C * sizeof(float));
	double best = 0;

	if (!in || !w || !out)
		goto out;
	o->zero(in, (size_t)N * C);
	o->zero(w, (size_t)C * C);
	o->matmul_forward(out, in, w, NULL, N, C, C);
	o->sync();
	for (int k = 0; k < 5; k++) {
		double t0 = clock_monotonic(), t;

		for (int s = 0; s < slow; s++)
			o->matmul_forward(out, in, w, NULL, N, C, C);
		o->sync();
		t = clock_monotonic() - t0;
		if (t > 0 && 2.0 * N * C * C / t / 1e9 > best)
			best = 2.0 * N * C * C / t / 1e9;
	}
out:
	if (in)
		o->free(in);
	if (w)
		o->free(w);
	if (out)
		o->free(out);
	return best;
}

static double probe_memory(const struct rank *r)
{
	const struct ops *o = r->ops;
	size_t bytes = (o != &ops_cpu ? 1024u : 64u) << 20;
	float *a = o->alloc(bytes), *b = o->alloc(bytes);
	double best = 0;

	if (!a || !b)
		goto out;
	o->zero(a, bytes / sizeof(float));
	o->copy(b, a, bytes);
	o->sync();
	for (int k = 0; k < 5; k++) {
		double t0 = clock_monotonic(), t;

		o->copy(b, a, bytes);
		o->sync();
		t = clock_monotonic() - t0;
		if (t > 0 && 2.0 * bytes / t / 1e9 > best)
			best = 2.0 * bytes / t / 1e9;
	}
out:
	if (a)
		o->free(a);
	if (b)
		o->free(b);
	return best;
}

/* Best of three all-reduces of n floats over g, in GB/s; 0 without a group; -1 failed. */
static double probe_allreduce(const struct rank *r, struct comm *g, size_t n)
{
	const struct ops *o = r->ops;
	float *buf;
	double best = 0;

	if (!g || comm_size(g) < 2 || !n)
		return 0;
	if (!(buf = o->alloc(n * sizeof(float))))
		return -1;
	o->zero(buf, n);
	for (int k = 0; k < 4; k++) {
		double t0 = clock_monotonic(), t;

		if (comm_allreduce(g, buf, n, COMM_FLOAT32, COMM_SUM) < 0) {
			best = -1;
			break;
		}
		o->sync();
		t = clock_monotonic() - t0;
		if (k > 0 && t > 0 && n * sizeof(float) / t / 1e9 > best)
			best = n * sizeof(float) / t / 1e9;
	}
	o->free(buf);
	return best;
}

/* ---------------------------------------------------- who measures when */

#define HOST_LEN 64
#define MACHINE_LEN 40

/* What every rank tells the others before the probes: its host and its machine. */
struct rank_place {
	char host[HOST_LEN];
	char machine[MACHINE_LEN]; /* the kernel's boot id: one per running machine */
};

/*
 * This machine's boot id: two "nodes" that share it are slurmd's of one
 * machine (the test cluster, Slurm's multiple-slurmd setups, containers)
 * and share its cores and memory. /etc/machine-id is no better: cloned
 * images share it across machines.
 */
static void read_machine(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	snprintf(buf, len, "?");
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	if (f)
		fclose(f);
}

/*
 * turn[k]: when node k measures its devices. Nodes on machines of their
 * own all measure at once (turn 0); nodes that share a machine take turns,
 * so that none is measured while another computes on the same cores (the
 * one measured then would look slow). Returns the number of turns.
 */
static int measuring_turns(const struct probe_figures *all, const struct rank_place *place,
			   int world, int nodes, int *turn)
{
	const char *machine[nodes > 0 ? nodes : 1];
	int turns = 1;

	for (int k = 0; k < nodes; k++)
		machine[k] = NULL;
	for (int i = 0; i < world; i++)
		if ((int)all[i].node >= 0 && (int)all[i].node < nodes && !machine[(int)all[i].node])
			machine[(int)all[i].node] = place[i].machine;
	for (int k = 0; k < nodes; k++) {
		turn[k] = 0;
		for (int j = 0; j < k; j++)
			turn[k] += machine[j] && machine[k] && !strcmp(machine[j], machine[k]);
		turns = turn[k] + 1 > turns ? turn[k] + 1 : turns;
	}
	return turns;
}

/*
 * This rank's device, in its node's turn, into f (keeping the better of
 * this and earlier tries: a node is left out only when it is short every
 * time). Every rank passes every turn's barrier. 0, or -1 when the world
 * is gone.
 */
static int measure_devices(struct rank *r, const int *turn, int turns, struct probe_figures *f)
{
	for (int t = 0; t < turns; t++) {
		if (turn[r->node->node_rank] == t) {
			float matmul = (float)probe_matmul(r), memory = (float)probe_memory(r);

			f->matmul_gflops = matmul > f->matmul_gflops ? matmul : f->matmul_gflops;
			f->memory_gbs = memory > f->memory_gbs ? memory : f->memory_gbs;
		}
		if (r->node->world_size > 1 && comm_barrier(r->comm) < 0)
			return -1;
	}
	f->failed = f->matmul_gflops <= 0 || f->memory_gbs <= 0;
	return 0;
}

/* The links: every group's all-reduce, once. 0, or -1 when one failed (the world is gone). */
static int measure_links(struct rank *r, const struct gpt2_config *mc, struct probe_figures *f)
{
	struct gpt2_shard s;
	size_t sizes[GPT2_NUM_TENSORS];
	size_t dp_n, tp_n = (size_t)r->cfg->train.batch_size * r->cfg->train.seq_len * mc->channels;
	double dp, tp, world;

	layout_shard(&r->lay, &s);
	dp_n = gpt2_shard_sizes(mc, &s, sizes);
	dp_n = dp_n < (4u << 20) ? dp_n : (4u << 20);
	dp = probe_allreduce(r, r->grp.dp, dp_n);
	tp = probe_allreduce(r, r->grp.tp, tp_n);
	world = probe_allreduce(r, r->comm, 1u << 20);
	f->dp_gbs = (float)dp;
	f->tp_gbs = (float)tp;
	f->world_gbs = (float)world;
	return dp < 0 || tp < 0 || world < 0 ? -1 : 0;
}

/* ------------------------------------------------------ what is written */

/* Rank 0: metrics/preflight.csv, every rank's figures and its node's verdict. */
static void write_csv(struct rank *r, const struct probe_figures *all, const char *const *hosts,
		      const preflight_text *verdicts)
{
	size_t cap = 256 + (size_t)r->node->world_size * 768, n;
	char *csv = malloc(cap), path[4200], err[512];

	if (!csv)
		return;
	n = (size_t)snprintf(csv, cap, "rank,node,host,matmul_gflops,memory_gbs,dp_allreduce_gbs,"
			     "tp_allreduce_gbs,world_allreduce_gbs,verdict\n");
	for (int i = 0; i < r->node->world_size && n < cap; i++) {
		const struct probe_figures *f = &all[i];

		n += (size_t)snprintf(csv + n, cap - n, "%d,%d,%s,%.2f,%.2f,%.3f,%.3f,%.3f,\"%s\"\n",
				      i, (int)f->node, hosts[(int)f->node], f->matmul_gflops,
				      f->memory_gbs, f->dp_gbs, f->tp_gbs, f->world_gbs,
				      verdicts[(int)f->node]);
	}
	if (n < cap && path_join(path, sizeof path, r->node->run_dir, "metrics") == 0 &&
	    mkdir_p(path, 0755) == 0 &&
	    path_join(path, sizeof path, r->node->run_dir, "metrics/preflight.csv") == 0 &&
	    atomic_write_file(path, csv, n, err, sizeof err) < 0)
		rank_logf(&r->log, "preflight: %s", err);
	free(csv);
}

/* The range of a figure over the world, for the summary line. */
static void range_of(const struct probe_figures *all, int world, size_t off, float *lo, float *hi)
{
	*lo = *hi = ((const float *)&all[0])[off];
	for (int i = 1; i < world; i++) {
		float v = ((const float *)&all[i])[off];

		*lo = v < *lo ? v : *lo;
		*hi = v > *hi ? v : *hi;
	}
}

static void summarise(struct rank *r, const struct probe_figures *all, int nodes, int tries,
		      int turns, double secs)
{
	float mlo, mhi, blo, bhi;
	char line[640];

	range_of(all, r->node->world_size, offsetof(struct probe_figures, matmul_gflops) / sizeof(float),
		 &mlo, &mhi);
	range_of(all, r->node->world_size, offsetof(struct probe_figures, memory_gbs) / sizeof(float),
		 &blo, &bhi);
	snprintf(line, sizeof line, "preflight: %d node(s) in %.2f s: matrix product %.1f..%.1f "
		 "GFLOP/s, memory %.1f..%.1f GB/s per rank (best of %d tr%s%s); all-reduce dp %.2f, "
		 "tp %.2f, world %.2f GB/s (rank 0); metrics/preflight.csv", nodes, secs, mlo, mhi,
		 blo, bhi, tries, tries > 1 ? "ies" : "y",
		 turns > 1 ? ", nodes sharing a machine one after the other" : "", all[0].dp_gbs,
		 all[0].tp_gbs, all[0].world_gbs);
	rank_logf(&r->log, "%s", line);
	printf("%s\n", line);
}

/* Rank 0: a line for every node that is short but kept. */
static void warn_kept(struct rank *r, int nodes, const enum preflight_kind *kind,
		      const preflight_text *text, const char *const *hosts)
{
	for (int k = 0; k < nodes; k++) {
		if (kind[k] != PREFLIGHT_WARNED)
			continue;
		rank_logf(&r->log, "preflight: warning: node %s is the slower (%s)", hosts[k], text[k]);
		fprintf(stderr, "storkd: warning: preflight: node %s is the slower (%s)\n", hosts[k],
			text[k]);
	}
	fflush(stderr);
}

/* -------------------------------------------------------------- the run */

/*
 * Whether the ranks of the nodes that stay can hold the layout: the same
 * tensor and pipeline groups, fewer replicas. *remain_nodes and the reason
 * when not, in why.
 */
static int layout_survives(const struct rank *r, const struct probe_figures *all, int nodes,
			   const enum preflight_kind *kind, int *remain_nodes, char *why,
			   size_t len)
{
	int ranks = 0, group = r->lay.tp * r->lay.pp;

	*remain_nodes = 0;
	for (int k = 0; k < nodes; k++)
		*remain_nodes += kind[k] != PREFLIGHT_LEFT_OUT;
	for (int i = 0; i < r->node->world_size; i++)
		ranks += kind[(int)all[i].node] != PREFLIGHT_LEFT_OUT;
	if (ranks > 0 && ranks % group == 0)
		return 1;
	if (!ranks)
		snprintf(why, len, "no node would be left");
	else
		snprintf(why, len, "the %d rank(s) that would remain cannot hold tensor %d x "
			 "pipeline %d", ranks, r->lay.tp, r->lay.pp);
	return 0;
}

/*
 * Rank 0's part of leaving the nodes in bad out: requeue the job without
 * them, when it can start again on the remain nodes that stay. A job whose
 * script asks for more (a fixed count, -N3), or says nothing of its count
 * (sbatch's command line), would wait for a node it cannot have (for good,
 * on a cluster of its size), and lowering its count from here would leave
 * its srun with the old task count (sbatch wrote SLURM_NTASKS into the
 * job's environment): it trains on, warned (0). Returns the code every
 * rank ends with; msg says what happened.
 */
static int32_t requeue_without(struct rank *r, const char *bad, int remain, int nodes,
			       const char *why, char *msg, size_t len)
{
	const struct train_node *n = r->node;
	char err[512] = "";
	int rc, min;

	if (!n->slurm_job) {
		msg_format(msg, len, "preflight: node(s) %s fall short (%s) and the job cannot go on "
			   "without them: not a Slurm job: nothing to requeue", bad, why);
		return STORK_EXIT_PREFLIGHT;
	}
	min = slurm_job_script_min_nodes(n->slurm_job);
	if (min <= 0 || min > remain) {
		if (min > 0)
			snprintf(err, sizeof err, "asks for %d node(s)", min);
		else
			snprintf(err, sizeof err, "gives no node count in its script");
		msg_format(msg, len, "preflight: warning: node(s) %s fall short (%s), kept: job %u "
			   "%s and could not be sure to start again on the %d that remain; submit "
			   "with a node range (#SBATCH --nodes=%d-%d) to let the preflight leave a "
			   "node out", bad, why, n->slurm_job, err, remain, remain, nodes);
		return 0;
	}
	if ((rc = slurm_job_requeue(n->slurm_job, err, sizeof err)) == 0 &&
	    slurm_job_exclude_nodes(n->slurm_job, bad, err, sizeof err) == 0) {
		msg_format(msg, len, "preflight: node(s) %s left out (%s): job %u requeued without "
			   "them (ExcNodeList=%s)", bad, why, n->slurm_job, bad);
		return STORK_EXIT_NODE_LOST;
	}
	if (rc == SLURM_JOB_WAS_CANCELLED) {
		msg_format(msg, len, "preflight: node(s) %s left out (%s), and the job was cancelled "
			   "meanwhile", bad, why);
		return STORK_EXIT_CANCELLED;
	}
	msg_format(msg, len, "preflight: node(s) %s fall short (%s) and the job cannot go on "
		   "without them: %s", bad, why, err);
	return STORK_EXIT_PREFLIGHT;
}

/*
 * The nodes in bad are left out: rank 0 requeues the job without them;
 * every rank learns how that went and ends with the same code and message
 * (0: the job trains on, rank 0 warned).
 */
static int leave_out(struct rank *r, const char *bad, int remain, int nodes, const char *why)
{
	char msg[1024] = "";
	int32_t code = STORK_EXIT_PREFLIGHT;

	if (r->rank == 0)
		code = requeue_without(r, bad, remain, nodes, why, msg, sizeof msg);
	if (r->node->world_size > 1 && comm_broadcast(r->comm, &code, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	if (r->rank != 0)
		msg_format(msg, sizeof msg, "preflight: node(s) %s left out (%s): rank 0's log says "
			   "what became of the job", bad, why);
	if (!code && r->rank != 0)
		return 0;
	rank_logf(&r->log, "%s", msg);
	if (r->rank == 0) {
		fprintf(stderr, "storkd: %s\n", msg);
		fflush(stderr);
	}
	return code ? rank_fail_agreed(r, code, msg) : 0;
}

static int wanted(struct rank *r, int32_t *nodes)
{
	int mode = r->cfg->preflight.enabled;

	*nodes = r->node->node_rank + 1;
	if (mode == STORK_PREFLIGHT_OFF)
		return 0;
	if (r->node->world_size > 1 && comm_allreduce(r->comm, nodes, 1, COMM_INT32, COMM_MAX) < 0)
		return -1;
	return mode == STORK_PREFLIGHT_ON || mode == STORK_PREFLIGHT_ONLY || *nodes >= 2;
}

/* The nodes left out, "n2,n5", into bad, and why each, into why. */
static void name_left_out(int nodes, const enum preflight_kind *kind, const preflight_text *text,
			  const char *const *hosts, char *bad, size_t badlen, char *why,
			  size_t whylen)
{
	size_t b = 0, w = 0;

	bad[0] = why[0] = 0;
	for (int k = 0; k < nodes; k++) {
		if (kind[k] != PREFLIGHT_LEFT_OUT)
			continue;
		if (b < badlen)
			b += (size_t)snprintf(bad + b, badlen - b, "%s%s", b ? "," : "", hosts[k]);
		if (w < whylen)
			w += (size_t)snprintf(why + w, whylen - w, "%s%s: %s", w ? "; " : "",
					      hosts[k], text[k]);
	}
}

/* What one preflight holds while it runs. */
struct preflight {
	int world, nodes, turns, tries;
	struct probe_figures mine, *all;
	struct rank_place *place;
	const char **hosts;
	int *turn;
	enum preflight_kind *kind;
	preflight_text *text;
};

static int preflight_alloc(struct preflight *p, int world, int nodes)
{
	p->world = world;
	p->nodes = nodes;
	p->all = calloc((size_t)world, sizeof *p->all);
	p->place = calloc((size_t)world, sizeof *p->place);
	p->hosts = calloc((size_t)nodes, sizeof *p->hosts);
	p->turn = calloc((size_t)nodes, sizeof *p->turn);
	p->kind = calloc((size_t)nodes, sizeof *p->kind);
	p->text = calloc((size_t)nodes, sizeof *p->text);
	return p->all && p->place && p->hosts && p->turn && p->kind && p->text ? 0 : -1;
}

static void preflight_free(struct preflight *p)
{
	free(p->all);
	free(p->place);
	free(p->hosts);
	free(p->turn);
	free(p->kind);
	free(p->text);
}

/*
 * Every rank's place (host, machine) and node index, so that every rank
 * knows the nodes' names and turns. 0, or -1 when the world is gone.
 */
static int share_places(struct rank *r, struct preflight *p)
{
	struct rank_place me = { 0 };

	p->mine.node = (float)r->node->node_rank;
	snprintf(me.host, sizeof me.host, "%s", r->node->host);
	read_machine(me.machine, sizeof me.machine);
	if (comm_allgather(r->comm, &me, p->place, sizeof me, COMM_UINT8) < 0 ||
	    comm_allgather(r->comm, &p->mine, p->all, NFIG, COMM_FLOAT32) < 0)
		return -1;
	for (int i = p->world - 1; i >= 0; i--)
		if ((int)p->all[i].node >= 0 && (int)p->all[i].node < p->nodes)
			p->hosts[(int)p->all[i].node] = p->place[i].host;
	for (int k = 0; k < p->nodes; k++)
		p->hosts[k] = p->hosts[k] ? p->hosts[k] : "?";
	p->turns = measuring_turns(p->all, p->place, p->world, p->nodes, p->turn);
	return 0;
}

/*
 * Measure every device, and again (every device, not only the suspects')
 * while some node looks short, up to PREFLIGHT_TRIES times; then the
 * links once. Returns the nodes left out, or -1 when the world is gone.
 */
static int measure_and_judge(struct rank *r, const struct gpt2_config *mc, struct preflight *p)
{
	int nbad = 0, any_short = 1;

	for (p->tries = 0; p->tries < PREFLIGHT_TRIES && any_short; p->tries++) {
		if (p->tries && r->rank == 0)
			rank_logf(&r->log, "preflight: a node short of the others: measuring every "
				  "device again (try %d of %d)", p->tries + 1, PREFLIGHT_TRIES);
		if (measure_devices(r, p->turn, p->turns, &p->mine) < 0 ||
		    comm_allgather(r->comm, &p->mine, p->all, NFIG, COMM_FLOAT32) < 0)
			return -1;
		nbad = preflight_verdicts(p->all, p->world, p->nodes, r->cfg->preflight.tolerance,
					  p->kind, p->text);
		any_short = 0;
		for (int k = 0; k < p->nodes; k++)
			any_short |= p->kind[k] != PREFLIGHT_KEPT;
	}
	if (measure_links(r, mc, &p->mine) < 0 ||
	    comm_allgather(r->comm, &p->mine, p->all, NFIG, COMM_FLOAT32) < 0)
		return -1;
	rank_logf(&r->log, "preflight: this rank: matrix product %.1f GFLOP/s, memory %.1f GB/s, "
		  "all-reduce dp %.3f, tp %.3f, world %.3f GB/s", p->mine.matmul_gflops,
		  p->mine.memory_gbs, p->mine.dp_gbs, p->mine.tp_gbs, p->mine.world_gbs);
	return nbad;
}

/*
 * The nodes the verdict leaves out go, where they can: a run that cannot
 * lose them (its layout would not fit, or preflight.enabled: only) trains
 * on with them, warned. 0 to go on, or the rank's exit code.
 */
static int act_on(struct rank *r, struct preflight *p)
{
	char bad[1024], why[2048], cannot[256];
	int remain;

	name_left_out(p->nodes, p->kind, p->text, p->hosts, bad, sizeof bad, why, sizeof why);
	if (r->cfg->preflight.enabled == STORK_PREFLIGHT_ONLY)
		snprintf(cannot, sizeof cannot, "preflight.enabled: only (stork check --all) leaves "
			 "nothing out");
	else if (layout_survives(r, p->all, p->nodes, p->kind, &remain, cannot, sizeof cannot))
		return leave_out(r, bad, remain, p->nodes, why);
	if (r->rank == 0) {
		rank_logf(&r->log, "preflight: warning: node(s) %s fall short (%s), kept: %s", bad,
			  why, cannot);
		fprintf(stderr, "storkd: warning: preflight: node(s) %s fall short (%s), kept: %s\n",
			bad, why, cannot);
		fflush(stderr);
	}
	return 0;
}

int preflight_run(struct rank *r, const struct gpt2_config *mc)
{
	struct preflight p = { 0 };
	double t0 = clock_monotonic();
	int32_t nodes;
	int want, nbad, code = 0;

	if ((want = wanted(r, &nodes)) <= 0)
		return want < 0 ? rank_fail_collective(r) : 0;
	if (preflight_alloc(&p, r->node->world_size, nodes) < 0) {
		preflight_free(&p);
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the preflight");
	}
	if (share_places(r, &p) < 0 || (nbad = measure_and_judge(r, mc, &p)) < 0) {
		preflight_free(&p);
		return rank_fail_collective(r);
	}
	if (r->rank == 0) {
		write_csv(r, p.all, p.hosts, p.text);
		summarise(r, p.all, nodes, p.tries, p.turns, clock_monotonic() - t0);
		warn_kept(r, nodes, p.kind, p.text, p.hosts);
	}
	if (nbad)
		code = act_on(r, &p);
	if (!code && r->cfg->preflight.enabled == STORK_PREFLIGHT_ONLY) {
		msg_format(r->res->message, sizeof r->res->message, "preflight only: %d node(s), "
			   "none left out (metrics/preflight.csv)", (int)nodes);
		code = -1; /* done: no training */
	}
	fflush(stdout);
	preflight_free(&p);
	return code;
}
