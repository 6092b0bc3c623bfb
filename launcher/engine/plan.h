/*
 * launcher/engine/plan.h - the parts of `stork plan` (stork(1)): the
 * command (plan.c), the measured figures it estimates with
 * (plan_figures.c), their probes (plan_probe.c, plan_link.c), the lines it
 * prints (plan_print.c) and the comparison with a measured run
 * (plan_check.c). The estimate itself is
 * daemon/engine/parallel/layout_cost.h's.
 */
#ifndef STORK_LAUNCHER_ENGINE_PLAN_H
#define STORK_LAUNCHER_ENGINE_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "daemon/engine/bench/bench_train.h"
#include "daemon/engine/parallel/layout_cost.h"

struct stork_config;

/* stork plan's exit codes besides 0, 2 (usage) and 3 (configuration). */
#define PLAN_EXIT_NONE_FITS 6   /* no layout of the world fits the memory */
#define PLAN_EXIT_NO_RUN 7      /* --check: the run directory lacks what the check reads */

/* The nodes a plan is for. */
struct plan_node {
	const char *host;            /* whose cached figures come first (NULL: this host's) */
	int ranks_per_node;
	int threads_per_rank;        /* CPU: each rank's cores */
	int cuda;                    /* ranks are GPUs */
	int cores;                   /* CPU: a machine's */
	int copies;                  /* CPU: ranks on a machine (they share its cores when more) */
};

/* The figures an estimate takes, and where each came from, in words. */
struct plan_figures {
	double flops_per_s;          /* forward and backward model FLOPs/s, per thread or GPU */
	double update_s_per_param;   /* AdamW, per thread or GPU */
	struct link_figure intra, inter;
	char compute_from[540], intra_from[500], inter_from[500];
};

/*
 * The figures for a run of cfg's model g on nodes n: the compute figure
 * `stork bench train` cached for this model (its host's, then this
 * host's), else a probe's (cached, or run now and cached); the in-node
 * link's from a probe (CPU) or `stork bench comm` (GPU), the network's
 * from `stork bench comm` across nodes; a documented default where none
 * was measured. Returns 0, or -1 with a message.
 */
int plan_figures(const struct stork_config *cfg, const struct gpt2_config *g,
		 const struct plan_node *n, struct plan_figures *f, char *err, size_t errlen);

/* After `stork bench train`: keep its figure of model g for stork plan (a line on out). */
void plan_keep_train_figure(const struct gpt2_config *g, const struct bench_train_opts *o,
			    int cuda, FILE *out);

/*
 * After `stork bench comm` on rank 0: keep its latency (the smallest
 * size's time) and bandwidth (the largest size's bus bandwidth) as the
 * network's figure (tasks on several hosts) or, on one host with GPUs,
 * the in-node one (a line on out).
 */
void plan_keep_comm_figure(int hosts, int cuda, int ranks, double latency_s, double bytes_per_s,
			   FILE *out);

/*
 * Probes. The compute probe trains g, or a copy cut to at most 16 GFLOP
 * per step (layers first, the micro-batch's rows last), at micro-batches
 * of B x T: on CPU nodes n->copies copies at
 * once, one per rank of a machine, each on n->threads_per_rank threads,
 * pinned as storkd pins its ranks and meeting after every step; on GPU
 * nodes one on the first GPU; for about a quarter of a second (the model
 * in *probed, the batch it took in r->B; the median step, or, where the
 * copies share cores, their wall time per step per core) (plan_probe.c); the link
 * probe all-reduces between `ranks` threads of this process over the
 * shared memory storkd uses, idle and between chunks of chunk_s seconds
 * of compute (plan_link.c). 0, or -1 with a message.
 */
/* Part of a compute probe's cache key: raised when the probe cuts models another way. */
#define PLAN_PROBE_VERSION 2

int plan_probe_compute(const struct gpt2_config *g, const struct bench_train_opts *o,
		       const struct plan_node *n, struct gpt2_config *probed,
		       struct bench_train_result *r, char *err, size_t errlen);
int plan_probe_shm(int ranks, double chunk_s, struct link_figure *f, char *err, size_t errlen);

/* Output shared by the plan and its check (plan_print.c); "1.5 GiB" into buf. */
const char *plan_bytes_text(double b, char *buf, size_t len);
void plan_print_header(FILE *out);
void plan_print_line(FILE *out, int k, const struct cost_layout *l, const struct cost_estimate *e);
void plan_print_figures(FILE *out, const struct plan_figures *f, const struct cost_machine *x);
/* x for nodes x per_node ranks (per_node sharing `cores` on CPU nodes) from figures f (plan_figures.c). */
void plan_machine(struct cost_machine *x, const struct plan_figures *f, int nodes, int per_node,
		  int cuda, int cores);
/* Whether cfg trains on GPUs here: run.device cuda, or auto with a GPU visible. */
int plan_on_gpu(const struct stork_config *cfg);

/* stork plan --check RUN_DIR [--host H] (plan_check.c). */
int plan_check(const char *run_dir, const char *host);

/*
 * The memory a rank may use: --gpu-memory's GiB (gib > 0), else the GPU's
 * (cuda), else this machine's memory over the ranks it runs.
 */
double plan_memory_limit(double gib, int cuda, int ranks_per_machine);

/* This process's cores (its CPU affinity); the first max of them in cpus, their number. */
int plan_cores(void);
int plan_allowed_cpus(int *cpus, int max);

/* Pin the calling thread to cpu (not when cpu < 0). */
void plan_pin(int cpu);

#endif
