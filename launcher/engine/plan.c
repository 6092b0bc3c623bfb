/*
 * launcher/engine/plan.c - `stork plan`: every layout of a world that fits
 * in memory, with what it costs and how fast it should train, best first.
 *
 *   stork plan CONFIG --nodes N --gpus-per-node G [--gpu-memory GIB]
 *              [--cores-per-node C] [--nodes-per-machine K] [--host HOST] [--top K]
 *              [--set KEY=VALUE]... [KEY=VALUE]...
 *   stork plan --check RUN_DIR [--host HOST]
 *
 * A layout is parallel.tensor x parallel.pipeline x data-parallel replicas
 * = N x G ranks, ZeRO-1 or not (with more than one replica: it changes
 * nothing with one), a train.recompute mode, and the micro-batches: the
 * global batch of CONFIG (batch_size x grad_accum x its replicas on this
 * world) stays, each replica's share of it is cut into grad_accum
 * micro-batches of batch_size sequences, every way that divides it with at
 * least one micro-batch per stage. A layout is valid when CONFIG with its
 * keys set passes the configuration's checks and layout_make's (the rules
 * stork run applies); it is printed when its largest rank fits the memory.
 * Costs and times are daemon/engine/parallel/layout_cost.c's; the figures plan_figures.c's.
 * On CPU nodes "GPUs per node" is ranks per node (--ranks-per-node says
 * so), each rank with cores / ranks threads.
 */
#include "config.h"
#include "launcher/engine/commands.h"
#include "launcher/engine/plan.h"

#include "daemon/engine/parallel/layout.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct plan_args {
	int nodes, per_node, cores, top;
	int per_machine;           /* --nodes-per-machine; 0 = 1 */
	double gib;                /* --gpu-memory; 0 = the device's or node's */
	const char *host, *check;
};

/* One layout that fits, and what it costs. */
struct candidate {
	struct cost_layout l;
	struct cost_estimate e;
};

struct candidates {
	struct candidate *v;
	int n, cap;
	int valid;                 /* layouts that may run, fitting or not */
};

static int usage(FILE *out)
{
	fprintf(out, "usage: stork plan CONFIG --nodes N --gpus-per-node G [--gpu-memory GIB] "
		     "[--cores-per-node C] [--nodes-per-machine K] [--host HOST] [--top K] "
		     "[--set KEY=VALUE]... [KEY=VALUE]...\n"
		     "       stork plan --check RUN_DIR [--host HOST]\n"
		     "  on CPU nodes G is ranks per node (--ranks-per-node G is the same option)\n");
	return out == stdout ? STORK_EXIT_OK : STORK_EXIT_USAGE;
}

/* A positive integer option's value; -1 (with a message) when it is not one. */
static int positive(const char *opt, const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s && !*end && v >= 1 && v <= 1 << 20)
		return (int)v;
	stork_error("--%s: '%s' is not a positive number", opt, s);
	return -1;
}

static int parse_args(int argc, char **argv, const struct option *longopts, struct plan_args *a)
{
	int c, idx;
	char *end;

	memset(a, 0, sizeof *a);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == 'n' || c == 'g' || c == 'c' || c == 't' || c == 'M') {
			int v = positive(longopts[idx].name, optarg);

			if (v < 0)
				return -1;
			*(c == 'n' ? &a->nodes : c == 'g' ? &a->per_node : c == 'c' ? &a->cores :
			  c == 'M' ? &a->per_machine : &a->top) = v;
		} else if (c == 'm') {
			a->gib = strtod(optarg, &end);
			if (*end || !(a->gib > 0) || !isfinite(a->gib)) {
				stork_error("--gpu-memory: '%s' is not a positive number of GiB", optarg);
				return -1;
			}
		} else if (c == 'H') {
			a->host = optarg;
		} else if (c == 'k') {
			a->check = optarg;
		} else if (c != 's') {
			return -1;
		}
	}
	return 0;
}

/* The checks of CONFIG's arguments: CONFIG, the world, KEY=VALUE after it. */
static int check_args(int argc, char **argv, const struct plan_args *a)
{
	if (a->check && optind < argc) {
		stork_error("--check takes a run directory and no CONFIG");
		return -1;
	}
	if (a->check)
		return 0;
	if (optind >= argc) {
		stork_error("a configuration file is needed (or --check RUN_DIR)");
		return -1;
	}
	if (!a->nodes || !a->per_node) {
		stork_error("--nodes and --gpus-per-node (--ranks-per-node on CPU nodes) are needed");
		return -1;
	}
	for (int i = optind + 1; i < argc; i++)
		if (!strchr(argv[i], '=')) {
			stork_error("unexpected argument '%s': overrides look like train.steps=50",
				    argv[i]);
			return -1;
		}
	return 0;
}

/*
 * Whether yaml (a resolved configuration) with layout l's keys passes the
 * configuration's checks: the rules stork run applies before the layout's.
 */
static int config_allows(const char *yaml, const struct cost_layout *l)
{
	struct stork_config c;
	char set[5][64], err[1024];
	int ok;

	snprintf(set[0], sizeof set[0], "parallel.tensor=%d", l->tp);
	snprintf(set[1], sizeof set[1], "parallel.pipeline=%d", l->pp);
	snprintf(set[2], sizeof set[2], "train.batch_size=%d", l->B);
	snprintf(set[3], sizeof set[3], "train.grad_accum=%d", l->micro);
	snprintf(set[4], sizeof set[4], "parallel.zero=%d", l->zero);
	ok = config_load_string(&c, yaml, "plan", err, sizeof err) == 0;
	for (int i = 0; ok && i < 5; i++)
		ok = config_set(&c, set[i], err, sizeof err) == 0;
	ok = ok && config_validate(&c, err, sizeof err) == 0;
	config_free(&c);
	return ok;
}

/* Whether every layout that fits keeps its gradients or parameters in parts (ZeRO-2 or 3). */
static int only_sharded(const struct candidates *cs)
{
	for (int k = 0; k < cs->n; k++)
		if (cs->v[k].l.zero < 2)
			return 0;
	return cs->n > 0;
}

static int keep(struct candidates *cs, const struct cost_layout *l, const struct cost_estimate *e)
{
	if (cs->n == cs->cap) {
		int cap = cs->cap ? 2 * cs->cap : 64;
		struct candidate *v = realloc(cs->v, (size_t)cap * sizeof *v);

		if (!v)
			return -1;
		cs->v = v;
		cs->cap = cap;
	}
	cs->v[cs->n++] = (struct candidate){ *l, *e };
	return 0;
}

/* Every ZeRO and recompute choice of layout l (its micro-batches set), estimated. */
static int enumerate_modes(const char *yaml, const struct gpt2_config *g, struct cost_layout l,
			   const struct cost_machine *x, double limit, struct candidates *cs)
{
	static const enum gpt2_recompute modes[] = { GPT2_RECOMPUTE_NONE, GPT2_RECOMPUTE_GELU,
						     GPT2_RECOMPUTE_BLOCK };
	char err[512];

	/* ZeRO-2 and 3 only on CPU ranks (zero_paged.h) */
	for (l.zero = 0; l.zero <= (l.dp > 1 ? (x->gpu ? 1 : 3) : 0); l.zero++) {
		if (!config_allows(yaml, &l)) /* with the configuration's other keys */
			continue;
		for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
			struct cost_estimate e;

			l.recompute = modes[k];
			if (layout_estimate(g, &l, x, &e, err, sizeof err) < 0)
				return 0; /* the layout itself cannot run */
			cs->valid++;
			if (e.mem_bytes <= limit && keep(cs, &l, &e) < 0)
				return -1;
		}
	}
	return 0;
}

/*
 * Every valid layout of x's world for cfg's model g keeping `global`
 * sequences per step; those that fit `limit` bytes per rank in cs.
 */
static int enumerate(const struct stork_config *cfg, const char *yaml,
		     const struct gpt2_config *g, const struct cost_machine *x, long long global,
		     double limit, struct candidates *cs)
{
	int world = x->nodes * x->ranks_per_node;

	for (int tp = 1; tp <= world; tp++)
		for (int pp = 1; world % tp == 0 && pp <= world / tp; pp++) {
			int dp = world / (tp * pp);
			long long share = global / dp;

			if ((world / tp) % pp || global % dp)
				continue;
			for (long long m = pp; m <= share; m++) {
				struct cost_layout l = { .tp = tp, .pp = pp, .dp = dp,
							 .T = cfg->train.seq_len,
							 .overlap = cfg->parallel.overlap,
							 .split = cfg->parallel.stage_split };

				if (share % m || share / m > INT_MAX || m > INT_MAX)
					continue;
				l.micro = (int)m;
				l.B = (int)(share / m);
				if (enumerate_modes(yaml, g, l, x, limit, cs) < 0)
					return -1;
			}
		}
	return 0;
}

static int by_speed(const void *a, const void *b)
{
	const struct candidate *p = a, *q = b;

	if (p->e.tokens_per_s != q->e.tokens_per_s)
		return p->e.tokens_per_s < q->e.tokens_per_s ? 1 : -1;
	return (p->e.mem_bytes > q->e.mem_bytes) - (p->e.mem_bytes < q->e.mem_bytes);
}

/* The lines of stork plan: what it plans for, the figures, the layouts, the best. */
static void print_plan(const struct stork_config *cfg, const struct cost_machine *x,
		       const struct plan_figures *f, long long global, double limit,
		       const struct candidates *cs, int top)
{
	const struct candidate *b = &cs->v[0];
	char lim[32];

	fprintf(stdout, "plan: %d node(s) x %d %s\n", x->nodes, x->ranks_per_node,
		x->gpu ? "GPUs" : "ranks");
	if (!x->gpu && x->nodes_per_machine > 1)
		fprintf(stdout, "cores: %d per machine of %d nodes, %d thread(s) per rank%s\n",
			x->cores, x->nodes_per_machine, x->threads_per_rank,
			x->ranks_per_node * x->nodes_per_machine > x->cores ? " (ranks share cores)" : "");
	else if (!x->gpu)
		fprintf(stdout, "cores: %d per node, %d thread(s) per rank%s\n", x->cores,
			x->threads_per_rank,
			x->ranks_per_node > x->cores ? " (ranks share cores)" : "");
	fprintf(stdout, "global batch: %lld sequences of %d tokens per step (train.batch_size %d x "
		"train.grad_accum %d x the configuration's replicas), in every layout\n", global,
		cfg->train.seq_len, cfg->train.batch_size, cfg->train.grad_accum);
	fprintf(stdout, "memory: at most %s per rank\n", plan_bytes_text(limit, lim, sizeof lim));
	plan_print_figures(stdout, f, x);
	fprintf(stdout, "%d valid layouts, %d fit; by estimated tokens/s:\n", cs->valid, cs->n);
	if (only_sharded(cs))
		fprintf(stdout, "only with parallel.zero 2 or 3 does the model fit this memory (the "
			"gradients, and the parameters, kept in parts over the replicas)\n");
	plan_print_header(stdout);
	for (int k = 0; k < cs->n && (!top || k < top); k++)
		plan_print_line(stdout, k + 1, &cs->v[k].l, &cs->v[k].e);
	fprintf(stdout, "best: --set parallel.tensor=%d --set parallel.pipeline=%d --set "
		"parallel.zero=%d --set train.recompute=%s --set train.batch_size=%d --set "
		"train.grad_accum=%d\n", b->l.tp, b->l.pp, b->l.zero,
		gpt2_recompute_name(b->l.recompute), b->l.B, b->l.micro);
}

/* The sequences of one step of cfg on `world` ranks; -1 (with a message) when its layout does not divide it. */
static long long global_batch(const struct stork_config *cfg, int world)
{
	int per_replica = cfg->parallel.tensor * cfg->parallel.pipeline;

	if (world % per_replica) {
		stork_error("parallel.tensor (%d) x parallel.pipeline (%d) of %s does not divide the "
			    "%d ranks: the global batch (batch_size x grad_accum x replicas) is kept "
			    "from the configuration's layout; set one that fits the world",
			    cfg->parallel.tensor, cfg->parallel.pipeline,
			    config_origin(cfg, "parallel.tensor"), world);
		return -1;
	}
	return (long long)cfg->train.batch_size * cfg->train.grad_accum * (world / per_replica);
}

static int plan(const struct stork_config *cfg, const struct plan_args *a)
{
	struct gpt2_config g;
	struct plan_figures f;
	struct cost_machine x;
	struct candidates cs = { 0 };
	struct plan_node n = { .host = a->host, .ranks_per_node = a->per_node,
			       .cuda = plan_on_gpu(cfg) };
	int cores = a->cores ? a->cores : plan_cores(), code = STORK_EXIT_CONFIG;
	long long global = global_batch(cfg, a->nodes * a->per_node);
	char err[1024], *yaml = NULL;
	double limit;

	if (global < 0)
		return STORK_EXIT_CONFIG;
	if (layout_model_shape(cfg, &g, err, sizeof err) < 0)
		goto fail;
	n.threads_per_rank = cores / a->per_node > 1 ? cores / a->per_node : 1;
	n.cores = cores;
	n.copies = a->per_node * (a->per_machine ? a->per_machine : 1);
	code = STORK_EXIT_INTERNAL;
	if (plan_figures(cfg, &g, &n, &f, err, sizeof err) < 0)
		goto fail;
	plan_machine(&x, &f, a->nodes, a->per_node, n.cuda, cores);
	x.nodes_per_machine = a->per_machine ? a->per_machine : 1;
	limit = plan_memory_limit(a->gib, n.cuda, a->per_node * x.nodes_per_machine);
	if (!(yaml = config_to_yaml(cfg)) || enumerate(cfg, yaml, &g, &x, global, limit, &cs) < 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	free(yaml);
	if (!cs.n) {
		stork_error("none of the %d valid layouts of %d x %d ranks fits %.2f GiB per rank%s",
			    cs.valid, a->nodes, a->per_node, limit / (1 << 30),
			    cs.valid ? ": more ranks, a smaller batch or a larger --gpu-memory" :
				       ": the global batch divides no layout's replicas");
		free(cs.v);
		return PLAN_EXIT_NONE_FITS;
	}
	qsort(cs.v, (size_t)cs.n, sizeof *cs.v, by_speed);
	print_plan(cfg, &x, &f, global, limit, &cs, a->top);
	free(cs.v);
	return STORK_EXIT_OK;
fail:
	stork_error("%s", err);
	free(yaml);
	free(cs.v);
	return code;
}

int cmd_plan(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "gpus-per-node", required_argument, NULL, 'g' },
		{ "ranks-per-node", required_argument, NULL, 'g' },
		{ "gpu-memory", required_argument, NULL, 'm' },
		{ "cores-per-node", required_argument, NULL, 'c' },
		{ "nodes-per-machine", required_argument, NULL, 'M' },
		{ "host", required_argument, NULL, 'H' },
		{ "top", required_argument, NULL, 't' },
		{ "check", required_argument, NULL, 'k' },
		{ "set", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct stork_config cfg;
	struct plan_args a;
	char err[1024];
	int rc = parse_args(argc, argv, longopts, &a), code;

	if (rc)
		return rc > 0 ? STORK_EXIT_OK : usage(stderr);
	if (check_args(argc, argv, &a) < 0)
		return usage(stderr);
	if (a.check)
		return plan_check(a.check, a.host);
	if (engine_config_load(&cfg, argc, argv, longopts, optind, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	code = plan(&cfg, &a);
	config_free(&cfg);
	return code;
}
