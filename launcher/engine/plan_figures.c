/*
 * launcher/engine/plan_figures.c - the figures `stork plan` estimates with
 * (plan.h), kept in the user's figures cache (lib/run/figures_cache.h), one
 * file per figure:
 *
 *   train-DEV-KEY.json   `stork bench train` of one model (KEY: a hash of
 *                        its shape, sequence length, precision and fused
 *                        kernels; DEV: cpu or cuda)
 *   probe-cpu-KEY-tN-rR-cC.json, probe-cuda-KEY-gpu.json  the compute probe of
 *                        that model: R ranks of N threads on C cores, or a GPU
 *   shm-RANKSr-CHUNKus.json  the in-node link probe between RANKS rank
 *                        threads, between chunks of CHUNK us of compute
 *   comm-inter-DEV.json  `stork bench comm` between hosts
 *   comm-intra-cuda.json `stork bench comm -d cuda` between the GPUs of one host
 *
 * A compute figure holds what was timed (forward and backward seconds,
 * AdamW seconds, parameters, threads) and the model FLOPs of one step
 * (layout_shard_flops of the whole model), so its rate per thread is
 * flops_per_step / fwd_bwd_s / threads. A link figure holds latency_s and
 * bytes_per_s.
 *
 * Also what the node is: its cores, its memory or its GPU's, whether a
 * configuration trains on GPUs here, and the machine the estimate takes
 * from all of it (plan_machine).
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include "daemon/engine/parallel/layout.h"
#include "kernels/device.h"
#include "lib/run/figures_cache.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Where nothing was measured (stork(1) documents them). */
#define DEFAULT_INTER_BPS 10e9      /* a 100 Gb/s network */
#define DEFAULT_INTER_LATENCY 20e-6
#define DEFAULT_GPU_INTRA_BPS 50e9  /* between a node's GPUs */
#define DEFAULT_GPU_INTRA_LATENCY 10e-6

/* "gpt2 L=12 H=12 KV=12 C=768 I=3072 Vp=50304 T=64 fp32 fused": what a compute figure is of. */
static void model_text(const struct gpt2_config *g, int T, enum ops_precision p, int fused,
		       char *buf, size_t len)
{
	snprintf(buf, len, "%s L=%d H=%d KV=%d C=%d I=%d Vp=%d T=%d %s%s",
		 model_arch_name(g->arch), g->num_layers, g->num_heads, model_kv_heads(g),
		 g->channels, model_mlp_width(g), g->padded_vocab_size, T, ops_precision_name(p),
		 fused ? " fused" : "");
}

/* The figure's file name: PREFIX-DEV-<FNV-1a 64 of text>SUFFIX. */
static void figure_name(const char *prefix, int cuda, const char *text, const char *suffix,
			char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const char *p = text; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	snprintf(buf, len, "%s-%s-%016llx%s", prefix, cuda ? "cuda" : "cpu", (unsigned long long)h,
		 suffix);
}

static json_t *host_json(void)
{
	char host[256] = "";

	gethostname(host, sizeof host - 1);
	return sj_text(host);
}

/* A compute figure's JSON from a benchmark's result r of model g (described by text). */
static json_t *compute_json(const char *source, const char *text, const struct gpt2_config *g,
			    enum gpt2_recompute rc, const struct bench_train_result *r)
{
	struct gpt2_shard s;

	gpt2_shard_whole(g, &s);
	return json_pack("{s:s, s:s, s:o, s:s, s:s, s:i, s:i, s:s, s:i, s:I, s:o, s:o, s:o, s:I}",
			 "figure", "compute", "source", source, "host", host_json(), "device",
			 r->device, "model", text, "B", r->B, "T", r->T, "recompute",
			 gpt2_recompute_name(rc), "threads", r->threads, "params",
			 (json_int_t)r->num_params, "flops_per_step",
			 sj_number(layout_shard_flops(g, &s, r->T, rc) * r->B * r->T),
			 "fwd_bwd_s", sj_number(r->fwd_bwd_s), "update_s", sj_number(r->update_s),
			 "time", (json_int_t)time(NULL));
}

/* Rates per thread (or GPU) from a compute figure; 0, or -1 when it lacks a field. */
static int compute_rates(const json_t *v, struct plan_figures *f)
{
	double flops = sj_real(v, "flops_per_step", 0), fb = sj_real(v, "fwd_bwd_s", 0);
	double upd = sj_real(v, "update_s", -1), params = sj_real(v, "params", 0);
	int threads = (int)sj_int(v, "threads", 0);

	if (flops <= 0 || fb <= 0 || upd < 0 || params <= 0 || threads < 1)
		return -1;
	f->flops_per_s = flops / fb / threads;
	f->update_s_per_param = upd * threads / params;
	return 0;
}

/* "stork bench train on n1 at 2026-11-27 14:59 (PATH)" */
static void describe(const json_t *v, const char *path, char *buf, size_t len)
{
	time_t t = (time_t)sj_int(v, "time", 0);
	struct tm tm;
	char when[32] = "?", how[64];

	if (localtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
	if (json_object_get(v, "ranks"))
		snprintf(how, sizeof how, "%d ranks", (int)sj_int(v, "ranks", 0));
	else if (sj_int(v, "copies", 1) > 1)
		snprintf(how, sizeof how, "%d ranks of %d thread(s) on %d core(s)",
			 (int)sj_int(v, "copies", 1), (int)sj_int(v, "threads", 0),
			 (int)sj_int(v, "cores", 0));
	else
		snprintf(how, sizeof how, "%d thread(s)", (int)sj_int(v, "threads", 0));
	snprintf(buf, len, "%.60s on %.64s at %s, %s (%.300s)",
		 json_string_value(json_object_get(v, "source")) ?: "?",
		 json_string_value(json_object_get(v, "host")) ?: "?", when, how, path);
}

/* The figure NAME of host, else of this host; NULL when neither has it (a bad file: a warning). */
static json_t *load_either(const char *host, const char *name, char *path, size_t plen)
{
	char err[512];
	json_t *v = host ? figures_load(host, name, path, plen, err, sizeof err) : NULL;

	if (host && !v && err[0])
		fprintf(stderr, "stork plan: %s: ignored\n", err);
	if (!v && !(v = figures_load(NULL, name, path, plen, err, sizeof err)) && err[0])
		fprintf(stderr, "stork plan: %s: ignored\n", err);
	return v;
}

/* Whether the ranks of a machine outnumber its cores (CPU nodes). */
static int shared(const struct plan_node *n)
{
	return !n->cuda && n->copies > n->cores;
}

/* Run the compute probe for n's ranks and keep its figure as name; the figure, or NULL. */
static json_t *probe_compute(const char *text, const char *name, const struct gpt2_config *g,
			     const struct bench_train_opts *o, const struct plan_node *n,
			     char *path, size_t plen, char *err, size_t errlen)
{
	struct bench_train_result r;
	struct gpt2_config g1;
	char why[512];
	json_t *v;

	if (n->cuda)
		fprintf(stderr, "stork plan: no figure of this model on this node: probing it on "
			"the GPU (stork bench train CONFIG measures it)\n");
	else
		fprintf(stderr, "stork plan: no figure of this model on this node: probing it as %d "
			"rank(s) of %d thread(s) on %d core(s)%s\n", n->copies, n->threads_per_rank,
			n->cores, shared(n) ? "" : " (stork bench train CONFIG measures it)");
	if (plan_probe_compute(g, o, n, &g1, &r, err, errlen) < 0)
		return NULL;
	snprintf(why, sizeof why, "stork plan's probe (%d of %d layers, vocabulary %d, B=%d)",
		 g1.num_layers, g->num_layers, g1.padded_vocab_size, r.B);
	if (!(v = compute_json(why, text, &g1, o->recompute, &r)) ||
	    json_object_set_new(v, "copies", json_integer(n->cuda ? 1 : n->copies)) < 0 ||
	    json_object_set_new(v, "cores", json_integer(n->cuda ? 0 : n->cores)) < 0) {
		json_decref(v);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (figures_save(NULL, name, v, path, plen, why, sizeof why) < 0)
		fprintf(stderr, "stork plan: %s (the probe's figure is not kept)\n", why);
	return v;
}

/* A probe that could not run: -1, with what to do on a GPU configuration away from GPUs. */
static int no_probe(const struct plan_node *n, char *err, size_t errlen)
{
	size_t len = strlen(err);

	if (n->cuda)
		snprintf(err + len, errlen - len, "; plan on a GPU node, or run stork bench train "
			 "CONFIG on one (its figure is kept) and plan with --host NODE");
	return -1;
}

/*
 * The precision a run's matrix products take on n: train.precision: auto
 * is what this host's GPU chooses (stork bench train keeps its figure
 * under that name), bf16 where this host has none (every GPU since 2020
 * has bf16 tensor cores); fp32 on CPUs.
 */
static enum ops_precision plan_precision(const struct stork_config *cfg, const struct plan_node *n)
{
	if (!n->cuda || cfg->train.precision != STORK_PRECISION_AUTO)
		return layout_precision(cfg);
	return kernels_cuda_device_count() > 0 ? layout_gpu_precision(cfg) : OPS_BF16;
}

/* bench train's figure of this model (not for ranks that share cores), else the probe's, cached or run now. */
static int compute_figure(const struct stork_config *cfg, const struct gpt2_config *g,
			  const struct plan_node *n, struct plan_figures *f, char *err,
			  size_t errlen)
{
	struct bench_train_opts o = { .B = cfg->train.batch_size, .T = cfg->train.seq_len,
				      .precision = plan_precision(cfg, n),
				      .recompute = GPT2_RECOMPUTE_NONE, .fused = cfg->train.fused };
	char text[256], name[128], path[4200], suffix[48];
	json_t *v;

	model_text(g, o.T, o.precision, o.fused, text, sizeof text);
	figure_name("train", n->cuda, text, "", name, sizeof name);
	/* bench train runs one process: ranks that share cores are the probe's to measure */
	v = shared(n) ? NULL : load_either(n->host, name, path, sizeof path);
	if (!v || compute_rates(v, f) < 0) {
		json_decref(v);
		if (n->cuda)
			snprintf(suffix, sizeof suffix, "-gpu");
		else
			snprintf(suffix, sizeof suffix, "-t%d-r%d-c%d", n->threads_per_rank, n->copies,
				 n->cores);
		/* the probe's way of cutting a model is part of its key: a figure an
		 * earlier stork kept of another cut is measured again */
		snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), "-p%d", PLAN_PROBE_VERSION);
		figure_name("probe", n->cuda, text, suffix, name, sizeof name);
		if (!(v = load_either(NULL, name, path, sizeof path)) || compute_rates(v, f) < 0) {
			json_decref(v);
			if (!(v = probe_compute(text, name, g, &o, n, path, sizeof path, err, errlen)))
				return no_probe(n, err, errlen);
			compute_rates(v, f);
		}
	}
	describe(v, path, f->compute_from, sizeof f->compute_from);
	json_decref(v);
	return 0;
}

static json_t *link_json(const char *source, int ranks, const struct link_figure *l)
{
	return json_pack("{s:s, s:s, s:o, s:i, s:o, s:o, s:I}", "figure", "link", "source", source,
			 "host", host_json(), "ranks", ranks, "latency_s", sj_number(l->latency_s),
			 "bytes_per_s", sj_number(l->bytes_per_s), "time", (json_int_t)time(NULL));
}

/* A link figure of name into l and its origin into from; 0, or -1 when there is none. */
static int cached_link(const char *host, const char *name, struct link_figure *l, char *from,
		       size_t len)
{
	char path[4200];
	json_t *v = load_either(host, name, path, sizeof path);

	l->latency_s = v ? sj_real(v, "latency_s", -1) : -1;
	l->bytes_per_s = v ? sj_real(v, "bytes_per_s", 0) : 0;
	if (v && l->latency_s >= 0 && l->bytes_per_s > 0)
		describe(v, path, from, len);
	json_decref(v);
	return l->latency_s >= 0 && l->bytes_per_s > 0 ? 0 : -1;
}

/*
 * The compute between two of a layer's tensor-parallel all-reduces of one
 * micro-batch (a quarter of its forward and backward) on one rank of n, in
 * seconds, as a power of two microseconds between 16 us and 4 ms: the
 * chunk of the link probe.
 */
static double tp_chunk(const struct gpt2_config *g, int B, int T, const struct plan_node *n,
		       const struct plan_figures *f)
{
	struct gpt2_shard layer0 = { .tp_size = 1, .first_layer = 0, .last_layer = 1 };
	double us = 16;

	while (us < 4096 && us * 2 <= 1e6 * layout_shard_flops(g, &layer0, T, GPT2_RECOMPUTE_NONE) *
					    B * T / 4 / (f->flops_per_s * n->threads_per_rank))
		us *= 2;
	return us * 1e-6;
}

/* The link between a node's ranks: CPU threads' shared memory (probed), GPUs' (bench comm). */
static int intra_figure(const struct gpt2_config *g, int B, int T, const struct plan_node *n,
			struct plan_figures *f, char *err, size_t errlen)
{
	double chunk = tp_chunk(g, B, T, n, f);
	char name[64], path[4200];
	json_t *v;

	if (n->cuda) {
		if (cached_link(n->host, "comm-intra-cuda", &f->intra, f->intra_from,
				sizeof f->intra_from) == 0)
			return 0;
		f->intra = (struct link_figure){ DEFAULT_GPU_INTRA_LATENCY, DEFAULT_GPU_INTRA_BPS };
		snprintf(f->intra_from, sizeof f->intra_from, "default, not measured (srun -N1 "
			 "--ntasks-per-node=GPUS stork bench comm -d cuda measures it)");
		return 0;
	}
	if (n->ranks_per_node < 2) {
		f->intra = (struct link_figure){ 0, 1 };
		snprintf(f->intra_from, sizeof f->intra_from, "none: one rank per node");
		return 0;
	}
	snprintf(name, sizeof name, "shm-%dr-%.0fus", n->ranks_per_node, chunk * 1e6);
	if (cached_link(NULL, name, &f->intra, f->intra_from, sizeof f->intra_from) == 0)
		return 0;
	if (plan_probe_shm(n->ranks_per_node, chunk, &f->intra, err, errlen) < 0)
		return -1;
	if (!(v = link_json("stork plan's probe of shared memory", n->ranks_per_node, &f->intra)) ||
	    json_object_set_new(v, "chunk_s", sj_number(chunk)) < 0 ||
	    figures_save(NULL, name, v, path, sizeof path, err, errlen) < 0)
		fprintf(stderr, "stork plan: %s (the probe's figure is not kept)\n",
			v ? err : "out of memory");
	if (v)
		describe(v, path, f->intra_from, sizeof f->intra_from);
	json_decref(v);
	return 0;
}

/* The network between nodes: bench comm's, else the default. */
static void inter_figure(const struct plan_node *n, struct plan_figures *f)
{
	char name[64];

	snprintf(name, sizeof name, "comm-inter-%s", n->cuda ? "cuda" : "cpu");
	if (cached_link(n->host, name, &f->inter, f->inter_from, sizeof f->inter_from) == 0)
		return;
	f->inter = (struct link_figure){ DEFAULT_INTER_LATENCY, DEFAULT_INTER_BPS };
	snprintf(f->inter_from, sizeof f->inter_from, "default, not measured (srun -N2 "
		 "--ntasks-per-node=1 stork bench comm%s measures it)", n->cuda ? " -d cuda" : "");
}

int plan_figures(const struct stork_config *cfg, const struct gpt2_config *g,
		 const struct plan_node *n, struct plan_figures *f, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	if (compute_figure(cfg, g, n, f, err, errlen) < 0 ||
	    intra_figure(g, cfg->train.batch_size, cfg->train.seq_len, n, f, err, errlen) < 0)
		return -1;
	inter_figure(n, f);
	return 0;
}

void plan_keep_train_figure(const struct gpt2_config *g, const struct bench_train_opts *o,
			    int cuda, FILE *out)
{
	char text[256], name[128], path[4200], err[512];
	json_t *v;

	model_text(g, o->T, o->precision, o->fused, text, sizeof text);
	figure_name("train", cuda, text, "", name, sizeof name);
	v = compute_json("stork bench train of this model", text, g, o->recompute, o->result);
	if (v && figures_save(NULL, name, v, path, sizeof path, err, sizeof err) == 0)
		fprintf(out, "kept for stork plan: %s\n", path);
	else
		fprintf(out, "not kept for stork plan: %s\n", v ? err : "out of memory");
	json_decref(v);
}

void plan_keep_comm_figure(int hosts, int cuda, int ranks, double latency_s, double bytes_per_s,
			   FILE *out)
{
	struct link_figure l = { latency_s, bytes_per_s };
	const char *name = hosts > 1 ? (cuda ? "comm-inter-cuda" : "comm-inter-cpu") :
			   cuda      ? "comm-intra-cuda" : NULL;
	char path[4200], err[512];
	json_t *v;

	if (!name) {
		fprintf(out, "# not kept for stork plan: tasks of one host meet over UCX, the "
			"ranks of one storkd over shared memory (stork plan probes that)\n");
		return;
	}
	v = link_json(hosts > 1 ? "stork bench comm between hosts" :
				  "stork bench comm between a host's GPUs", ranks, &l);
	if (v && figures_save(NULL, name, v, path, sizeof path, err, sizeof err) == 0)
		fprintf(out, "# kept for stork plan: %s\n", path);
	else
		fprintf(out, "# not kept for stork plan: %s\n", v ? err : "out of memory");
	json_decref(v);
}

double plan_memory_limit(double gib, int cuda, int ranks_per_machine)
{
	size_t free_b = 0, total = 0;
	char desc[160], err[256];

	if (gib > 0)
		return gib * (1 << 30);
#ifdef HAVE_CUDA
	if (cuda && kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) == 0) {
		ops_cuda.mem_info(&free_b, &total);
		return (double)total;
	}
#else
	(void)desc, (void)err, (void)free_b;
#endif
	(void)cuda;
	total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
	return (double)total / ranks_per_machine;
}

void plan_machine(struct cost_machine *x, const struct plan_figures *f, int nodes, int per_node,
		  int cuda, int cores)
{
	*x = (struct cost_machine){ .nodes = nodes, .ranks_per_node = per_node, .gpu = cuda,
				    .cores = cores, .nodes_per_machine = 1,
				    .threads_per_rank = cores / per_node > 1 ? cores / per_node : 1,
				    .flops_per_s = f->flops_per_s,
				    .update_s_per_param = f->update_s_per_param,
				    .intra = f->intra, .inter = f->inter };
}

int plan_on_gpu(const struct stork_config *cfg)
{
	return cfg->run.device == STORK_DEVICE_CUDA ||
	       (cfg->run.device == STORK_DEVICE_AUTO && kernels_cuda_device_count() > 0);
}
