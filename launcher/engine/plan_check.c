/*
 * launcher/engine/plan_check.c - `stork plan --check RUN_DIR`: the plan's
 * estimate for the layout a run trained, beside its measured step time.
 *
 * The run directory says everything the estimate needs: config/stork.yaml
 * the model, layout and micro-batches; config/slurm_env.json the nodes,
 * their ranks, each rank's cores and threads and GPU, and which nodes ran
 * on one machine (the same "machine": a test cluster's nodes share its
 * cores); rank 0's log whether it trained on its GPU; the
 * logs/rank-*.metrics.jsonl the step times (lib/run/metrics_file.h), of
 * which the median over every rank's steps, each attempt's first left
 * out (it allocates and starts cold), is the measured one. The
 * figures are those of node 0's host first (--host names another), else
 * this one's, as for a plan.
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include "daemon/engine/parallel/layout.h"
#include "launcher/bench/bench_util.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/run/metrics_file.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CPUS 8192

/* What the run's slurm_env.json says of its nodes. */
struct run_nodes {
	int nodes, per_node, threads, gpu;
	int cores;                 /* of node 0's machine: its nodes' ranks' cpus */
	int nodes_per_machine;     /* nodes on node 0's machine */
	char host[256];            /* node 0's */
};

/* Mark the cpus of a list such as "0-3,8" in seen. */
static void mark_cpus(const char *list, unsigned char *seen)
{
	while (list && *list) {
		char *end;
		long a = strtol(list, &end, 10), b = a;

		if (end == list)
			return;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long c = a; c <= b && c >= 0 && c < MAX_CPUS; c++)
			seen[c] = 1;
		list = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return;
	}
}

/* Cores and threads of node j's ranks into seen (and *threads, *gpu from its first rank). */
static void node_ranks(const json_t *node, unsigned char *seen, int *threads, int *gpu)
{
	const json_t *ranks = json_object_get(node, "ranks");
	size_t i;
	json_t *r;

	json_array_foreach(ranks, i, r) {
		mark_cpus(json_string_value(json_object_get(r, "cpus")), seen);
		if (i == 0) {
			*threads = (int)sj_int(r, "threads", 1);
			*gpu = sj_int(r, "gpu", -1) >= 0;
		}
	}
}

/* The nodes of slurm_env.json (env) into rn; 0, or -1 with a message. */
static int read_nodes(const json_t *env, struct run_nodes *rn, char *err, size_t errlen)
{
	const json_t *nodes = json_object_get(env, "nodes"), *n0 = json_array_get(nodes, 0);
	const char *m0 = json_string_value(json_object_get(n0, "machine"));
	unsigned char *seen = calloc(MAX_CPUS, 1);
	size_t i;
	json_t *n;

	memset(rn, 0, sizeof *rn);
	if (!seen || !n0) {
		snprintf(err, errlen, "%s", seen ? "no nodes in it" : "out of memory");
		free(seen);
		return -1;
	}
	snprintf(rn->host, sizeof rn->host, "%s", json_string_value(json_object_get(n0, "host")) ?: "");
	json_array_foreach(nodes, i, n) {
		const char *m = json_string_value(json_object_get(n, "machine"));
		int k = (int)sj_int(n, "local_ranks", 0), threads = 1, gpu = 0;

		rn->nodes++;
		rn->per_node = k > rn->per_node ? k : rn->per_node;
		if (i > 0 && !(m && m0 && !strcmp(m, m0)))
			continue;
		rn->nodes_per_machine++;
		node_ranks(n, seen, &threads, &gpu);
		if (i == 0)
			rn->threads = threads, rn->gpu = gpu;
	}
	for (int c = 0; c < MAX_CPUS; c++)
		rn->cores += seen[c];
	free(seen);
	if (rn->per_node < 1 || rn->cores < 1) {
		snprintf(err, errlen, "its nodes have no ranks or no cpus");
		return -1;
	}
	if (sj_int(env, "world_size", 0) != (int64_t)rn->nodes * rn->per_node) {
		snprintf(err, errlen, "its %d nodes run different numbers of ranks (%lld in all): "
			 "the estimate is of nodes of equal ranks", rn->nodes,
			 (long long)sj_int(env, "world_size", 0));
		return -1;
	}
	return 0;
}

/* The step_time_ms of the run's metrics files but each attempt's first. */
struct samples {
	double *v;
	int n, cap;
	long long attempt;         /* requeue << 32 | attempt of the file's last line; -1: none yet */
};

static int push_sample(struct samples *s, double x)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 256;
		double *p = realloc(s->v, (size_t)cap * sizeof *p);

		if (!p)
			return -1;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return 0;
}

static int add_step_time(const char *line, void *arg)
{
	struct samples *s = arg;
	long long attempt;
	char err[256];
	json_t *v;
	int rc = 0;

	if (!metrics_line_is(line, "step_time_ms") ||
	    !(v = sj_parse(line, strlen(line), "metrics", err, sizeof err)))
		return 0;
	/* an attempt's first step allocates its buffers (and starts cold): left out */
	attempt = (long long)sj_int(v, "requeue", 0) << 32 | sj_int(v, "attempt", 0);
	if (attempt == s->attempt && json_is_number(json_object_get(v, "value")))
		rc = push_sample(s, sj_real(v, "value", 0));
	s->attempt = attempt;
	json_decref(v);
	return rc;
}

/* The median step_time_ms over every rank's steps (ms); -1 when there is none. */
static double measured_step_ms(const char *run_dir, int *steps, int *ranks)
{
	struct samples s = { 0 };
	char pattern[4200];
	glob_t gl;
	double med = -1;

	snprintf(pattern, sizeof pattern, "%s/logs/rank-*.metrics.jsonl", run_dir);
	*ranks = 0;
	if (glob(pattern, 0, NULL, &gl) == 0) {
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			s.attempt = -1;
			*ranks += metrics_file_lines(gl.gl_pathv[i], add_step_time, &s) == 0;
		}
		globfree(&gl);
	}
	if (s.n > 0)
		med = bench_median(s.v, s.n);
	*steps = s.n;
	free(s.v);
	return med;
}

/*
 * Whether rank 0 trained on a GPU: its log's first word on the matter,
 * "device: cpu (why)" or "bound: gpu N (its name)" (a binding's GPU alone
 * says nothing: the test cluster's GPUs are declared, not there).
 */
static int ran_on_gpu(const char *run_dir)
{
	char path[4200], line[1024];
	FILE *f;
	int gpu = 0;

	snprintf(path, sizeof path, "%s/logs/rank-000.log", run_dir);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof line, f)) {
		const char *b = strstr(line, "] bound: gpu ");
		int dev;
		char paren;

		if (strstr(line, "] device: cpu ("))
			break;
		if (b && sscanf(b, "] bound: gpu %d %c", &dev, &paren) == 2 && paren == '(') {
			gpu = 1;
			break;
		}
	}
	fclose(f);
	return gpu;
}

/* The run's layout from its configuration on its world. */
static void run_layout(const struct stork_config *cfg, int world, struct cost_layout *l)
{
	*l = (struct cost_layout){ .tp = cfg->parallel.tensor, .pp = cfg->parallel.pipeline,
				   .zero = cfg->parallel.zero, .recompute = layout_recompute(cfg),
				   .B = cfg->train.batch_size, .T = cfg->train.seq_len,
				   .micro = cfg->train.grad_accum, .overlap = cfg->parallel.overlap,
				   .split = cfg->parallel.stage_split };
	l->dp = world / (l->tp * l->pp);
}

/* The estimate for the run's layout, printed beside its median step time. */
static int check_estimate(const char *run_dir, const struct stork_config *cfg,
			  const struct run_nodes *rn, const char *host, double ms, int steps,
			  int ranks)
{
	struct gpt2_config g;
	struct plan_node n = { .host = host ? host : rn->host, .ranks_per_node = rn->per_node,
			       .threads_per_rank = rn->threads,
			       .cuda = rn->gpu && ran_on_gpu(run_dir), .cores = rn->cores,
			       .copies = rn->per_node * rn->nodes_per_machine };
	struct plan_figures f;
	struct cost_machine x;
	struct cost_layout l;
	struct cost_estimate e;
	char err[1024];

	if (layout_model_shape(cfg, &g, err, sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_CONFIG;
	}
	if (plan_figures(cfg, &g, &n, &f, err, sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_INTERNAL;
	}
	plan_machine(&x, &f, rn->nodes, rn->per_node, n.cuda, rn->cores);
	x.threads_per_rank = rn->threads;
	x.nodes_per_machine = rn->nodes_per_machine;
	run_layout(cfg, rn->nodes * rn->per_node, &l);
	if (layout_estimate(&g, &l, &x, &e, err, sizeof err) < 0) {
		stork_error("%s: %s", run_dir, err);
		return STORK_EXIT_CONFIG;
	}
	printf("check: %s: %d node(s) x %d ranks", run_dir, rn->nodes, rn->per_node);
	if (!n.cuda)
		printf(", %d core(s) for the %d ranks of %d node(s) on node 0's machine, %d thread(s) "
		       "per rank", rn->cores, rn->per_node * rn->nodes_per_machine,
		       rn->nodes_per_machine, rn->threads);
	printf("\n");
	plan_print_figures(stdout, &f, &x);
	plan_print_header(stdout);
	plan_print_line(stdout, 1, &l, &e);
	printf("measured: %.2f ms per step (median step_time_ms of %d steps over %d ranks, "
	       "each attempt's first left out)\n", ms, steps, ranks);
	printf("estimate / measured: %.2f\n", 1e3 * e.step_s / ms);
	return STORK_EXIT_OK;
}

int plan_check(const char *run_dir, const char *host)
{
	struct stork_config cfg;
	struct run_nodes rn;
	char path[4200], err[1024];
	json_t *env;
	double ms;
	int steps, ranks, code;

	snprintf(path, sizeof path, "%s/config/stork.yaml", run_dir);
	if (access(path, F_OK) < 0) {
		stork_error("--check: %s has no config/stork.yaml: not a run directory of stork run",
			    run_dir);
		return PLAN_EXIT_NO_RUN;
	}
	if (config_load(&cfg, path, err, sizeof err) < 0 || config_validate(&cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	snprintf(path, sizeof path, "%s/config/slurm_env.json", run_dir);
	if (!(env = sj_load_file(path, err, sizeof err)) || read_nodes(env, &rn, err, sizeof err) < 0) {
		stork_error("--check: %s%s%s", env ? path : "", env ? ": " : "", err);
		json_decref(env);
		config_free(&cfg);
		return PLAN_EXIT_NO_RUN;
	}
	json_decref(env);
	if ((ms = measured_step_ms(run_dir, &steps, &ranks)) <= 0) {
		stork_error("--check: %s/logs has no step_time_ms after an attempt's first step: the "
			    "run trained too few steps", run_dir);
		config_free(&cfg);
		return PLAN_EXIT_NO_RUN;
	}
	code = check_estimate(run_dir, &cfg, &rn, host, ms, steps, ranks);
	config_free(&cfg);
	return code;
}
