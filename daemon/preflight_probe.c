/*
 * daemon/preflight_probe.c - see preflight_probe.h.
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
#include "daemon/preflight_probe.h"
#include "daemon/train.h"
#include "daemon/train_rank.h"

#include "daemon/layout.h"
#include "daemon/rank_log.h"
#include "kernels/ops.h"
#include "lib/atomic_file.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/slurm_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFIG (sizeof(struct probe_figures) / sizeof(float))

/* ---------------------------------------------------------- the verdict */

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* The slowest rank's figure of node k (field at offset off), or -1 when a probe failed there. */
static float node_figure(const struct probe_figures *all, int world, int k, size_t off)
{
	float worst = -2;

	for (int i = 0; i < world; i++) {
		const float *f = (const float *)&all[i];

		if ((int)all[i].node != k)
			continue;
		if (all[i].failed)
			return -1;
		if (worst < -1 || f[off] < worst)
			worst = f[off];
	}
	return worst;
}

/* The median of node figures other than node's (ignoring failed ones), or 0. */
static float others_median(const struct probe_figures *all, int world, int nodes, int node,
			   size_t off)
{
	float v[nodes > 0 ? nodes : 1];
	int n = 0;

	for (int k = 0; k < nodes; k++) {
		float f = node_figure(all, world, k, off);

		if (k != node && f >= 0)
			v[n++] = f;
	}
	if (!n)
		return 0;
	qsort(v, (size_t)n, sizeof v[0], cmp_float);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int preflight_judge(const struct probe_figures *all, int world, int nodes, int node,
		    double tolerance, char *buf, size_t len)
{
	static const struct {
		size_t off;
		const char *what, *unit;
	} judged[] = {
		{ offsetof(struct probe_figures, matmul_gflops) / sizeof(float), "matrix product",
		  "GFLOP/s" },
		{ offsetof(struct probe_figures, memory_gbs) / sizeof(float), "memory bandwidth",
		  "GB/s" },
	};

	for (size_t j = 0; j < sizeof judged / sizeof judged[0]; j++) {
		float mine = node_figure(all, world, node, judged[j].off);
		float median = others_median(all, world, nodes, node, judged[j].off);

		if (mine < 0) {
			snprintf(buf, len, "a probe failed on it");
			return 1;
		}
		if (median > 0 && mine < (1 - tolerance) * median) {
			snprintf(buf, len, "%s %.1f %s, %.0f%% of the other nodes' median %.1f "
				 "(preflight.tolerance %.2f)", judged[j].what, mine, judged[j].unit,
				 100.0 * mine / median, median, tolerance);
			return 1;
		}
	}
	return 0;
}

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

/* This rank's figures; *broken set when a collective failed (the world is gone). */
static void measure(struct rank *r, const struct gpt2_config *mc, struct probe_figures *f,
		    int *broken)
{
	struct gpt2_shard s;
	size_t sizes[GPT2_NUM_TENSORS];
	size_t dp_n, tp_n = (size_t)r->cfg->train.batch_size * r->cfg->train.seq_len * mc->channels;
	double dp, tp, world;

	layout_shard(&r->lay, &s);
	dp_n = gpt2_shard_sizes(mc, &s, sizes);
	dp_n = dp_n < (4u << 20) ? dp_n : (4u << 20);
	memset(f, 0, sizeof *f);
	f->node = (float)r->node->node_rank;
	f->matmul_gflops = (float)probe_matmul(r);
	f->memory_gbs = (float)probe_memory(r);
	dp = probe_allreduce(r, r->grp.dp, dp_n);
	tp = probe_allreduce(r, r->grp.tp, tp_n);
	world = probe_allreduce(r, r->comm, 1u << 20);
	*broken = dp < 0 || tp < 0 || world < 0;
	f->dp_gbs = (float)dp;
	f->tp_gbs = (float)tp;
	f->world_gbs = (float)world;
	f->failed = f->matmul_gflops <= 0 || f->memory_gbs <= 0;
}

/* ------------------------------------------------------ what is written */

typedef char verdict_text[320]; /* "ok", or why a node is left out */

/* Rank 0: metrics/preflight.csv, every rank's figures and its node's verdict. */
static void write_csv(struct rank *r, const struct probe_figures *all, const char *const *hosts,
		      const verdict_text *verdicts)
{
	size_t cap = 256 + (size_t)r->node->world_size * 640, n;
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

/* -------------------------------------------------------------- the run */

/*
 * Some node fell short: every rank measures its device once more and keeps
 * the better of its two figures, so that a node is left out only when it
 * is short twice, a moment apart (a node busy for a moment, or two that
 * share a machine's cores, is not). 0, or the rank's exit code.
 */
static int measure_again(struct rank *r, struct probe_figures *mine, struct probe_figures *all,
			 const char *bad)
{
	float matmul = (float)probe_matmul(r), memory = (float)probe_memory(r);

	if (r->rank == 0)
		rank_logf(&r->log, "preflight: %s short of the others: measuring every device again", bad);
	mine->matmul_gflops = matmul > mine->matmul_gflops ? matmul : mine->matmul_gflops;
	mine->memory_gbs = memory > mine->memory_gbs ? memory : mine->memory_gbs;
	mine->failed = mine->matmul_gflops <= 0 || mine->memory_gbs <= 0;
	if (comm_allgather(r->comm, mine, all, NFIG, COMM_FLOAT32) < 0)
		return rank_fail_collective(r);
	return 0;
}

#define HOST_LEN 64

/* The nodes' verdicts into verdicts[] (node order), the left-out hosts into bad. Their count. */
static int judge_all(const struct rank *r, const struct probe_figures *all, int nodes,
		     verdict_text *verdicts, char *bad, size_t badlen, const char *const *hosts)
{
	int n = 0;
	size_t used = 0;

	bad[0] = 0;
	for (int k = 0; k < nodes; k++) {
		if (!preflight_judge(all, r->node->world_size, nodes, k, r->cfg->preflight.tolerance,
				     verdicts[k], sizeof verdicts[k])) {
			snprintf(verdicts[k], sizeof verdicts[k], "ok");
			continue;
		}
		n++;
		if (used < badlen)
			used += (size_t)snprintf(bad + used, badlen - used, "%s%s", used ? "," : "",
						 hosts[k]);
	}
	return n;
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

static void summarise(struct rank *r, const struct probe_figures *all, int nodes, double secs)
{
	float mlo, mhi, blo, bhi;
	char line[512];

	range_of(all, r->node->world_size, offsetof(struct probe_figures, matmul_gflops) / sizeof(float),
		 &mlo, &mhi);
	range_of(all, r->node->world_size, offsetof(struct probe_figures, memory_gbs) / sizeof(float),
		 &blo, &bhi);
	snprintf(line, sizeof line, "preflight: %d node(s) in %.2f s: matrix product %.1f..%.1f "
		 "GFLOP/s, memory %.1f..%.1f GB/s per rank; all-reduce dp %.2f, tp %.2f, world %.2f "
		 "GB/s (rank 0); metrics/preflight.csv", nodes, secs, mlo, mhi, blo, bhi,
		 all[0].dp_gbs, all[0].tp_gbs, all[0].world_gbs);
	rank_logf(&r->log, "%s", line);
	printf("%s\n", line);
}

/*
 * Leave the nodes in bad out: rank 0 requeues the job without them; every
 * rank learns how that went and ends with the same code and message.
 */
static int leave_out(struct rank *r, int nbad, int nodes, const char *bad, const char *why)
{
	const struct train_node *n = r->node;
	char err[512] = "", msg[1024];
	int32_t code = STORK_EXIT_PREFLIGHT;
	int rc;

	if (r->rank == 0) {
		if (r->cfg->preflight.enabled == STORK_PREFLIGHT_ONLY)
			snprintf(err, sizeof err, "preflight.enabled: only (stork check --all) "
				 "leaves nothing out");
		else if (!n->slurm_job)
			snprintf(err, sizeof err, "not a Slurm job: nothing to requeue");
		else if (nbad >= nodes)
			snprintf(err, sizeof err, "no node would be left");
		else if ((rc = slurm_job_requeue(n->slurm_job, err, sizeof err)) == 0 &&
			 slurm_job_exclude_nodes(n->slurm_job, bad, err, sizeof err) == 0)
			code = STORK_EXIT_NODE_LOST;
		else if (rc == SLURM_JOB_WAS_CANCELLED)
			code = STORK_EXIT_CANCELLED;
	}
	if (n->world_size > 1 && comm_broadcast(r->comm, &code, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	if (code == STORK_EXIT_NODE_LOST)
		msg_format(msg, sizeof msg, "preflight: node(s) %s left out (%s): job %u requeued "
			   "without them (ExcNodeList=%s)", bad, why, n->slurm_job, bad);
	else if (code == STORK_EXIT_CANCELLED)
		msg_format(msg, sizeof msg, "preflight: node(s) %s left out (%s), and the job was "
			   "cancelled meanwhile", bad, why);
	else
		msg_format(msg, sizeof msg, "preflight: node(s) %s fall short (%s) and the job cannot "
			   "go on without them: %s", bad, why, r->rank == 0 ? err :
			   "rank 0's log says why");
	rank_logf(&r->log, "%s", msg);
	if (r->rank == 0) {
		fprintf(stderr, "storkd: %s\n", msg);
		fflush(stderr);
	}
	return rank_fail_agreed(r, code, msg);
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

int preflight_run(struct rank *r, const struct gpt2_config *mc)
{
	int world = r->node->world_size, broken, want, nbad, code = 0;
	int32_t nodes;
	double t0 = clock_monotonic();
	struct probe_figures mine, *all = calloc((size_t)world, sizeof *all);
	char *names = calloc((size_t)world, HOST_LEN), host[HOST_LEN] = "";
	verdict_text *verdicts = NULL;
	const char **hosts = NULL;
	char bad[1024], why[1024];

	if ((want = wanted(r, &nodes)) <= 0) {
		code = want < 0 ? rank_fail_collective(r) : 0;
		goto out;
	}
	verdicts = calloc((size_t)nodes, sizeof *verdicts);
	hosts = calloc((size_t)nodes, sizeof *hosts);
	if (!all || !names || !verdicts || !hosts) {
		code = rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the preflight");
		goto out;
	}
	measure(r, mc, &mine, &broken);
	snprintf(host, sizeof host, "%s", r->node->host);
	if (broken || comm_allgather(r->comm, &mine, all, NFIG, COMM_FLOAT32) < 0 ||
	    comm_allgather(r->comm, host, names, HOST_LEN, COMM_UINT8) < 0) {
		code = rank_fail_collective(r);
		goto out;
	}
	for (int i = world - 1; i >= 0; i--)
		if ((int)all[i].node >= 0 && (int)all[i].node < nodes)
			hosts[(int)all[i].node] = names + (size_t)i * HOST_LEN;
	for (int k = 0; k < nodes; k++)
		hosts[k] = hosts[k] ? hosts[k] : "?";
	rank_logf(&r->log, "preflight: this rank: matrix product %.1f GFLOP/s, memory %.1f GB/s, "
		  "all-reduce dp %.3f, tp %.3f, world %.3f GB/s", mine.matmul_gflops, mine.memory_gbs,
		  mine.dp_gbs, mine.tp_gbs, mine.world_gbs);
	nbad = judge_all(r, all, nodes, verdicts, bad, sizeof bad, hosts);
	if (nbad && (code = measure_again(r, &mine, all, bad)))
		goto out;
	if (nbad)
		nbad = judge_all(r, all, nodes, verdicts, bad, sizeof bad, hosts);
	if (r->rank == 0) {
		write_csv(r, all, hosts, verdicts);
		summarise(r, all, nodes, clock_monotonic() - t0);
	}
	if (nbad) {
		size_t used = 0;

		why[0] = 0;
		for (int k = 0; k < nodes && used < sizeof why; k++)
			if (strcmp(verdicts[k], "ok"))
				used += (size_t)snprintf(why + used, sizeof why - used, "%s%s: %s",
							 used ? "; " : "", hosts[k], verdicts[k]);
		code = leave_out(r, nbad, nodes, bad, why);
	} else if (r->cfg->preflight.enabled == STORK_PREFLIGHT_ONLY) {
		msg_format(r->res->message, sizeof r->res->message, "preflight only: %d node(s), "
			   "every one kept (metrics/preflight.csv)", (int)nodes);
		code = -1; /* done: no training */
	}
	fflush(stdout);
out:
	free(all);
	free(names);
	free(verdicts);
	free(hosts);
	return code;
}
