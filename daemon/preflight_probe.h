/*
 * daemon/preflight_probe.h - before the first step, every rank measures
 * its device and the world its links; a node well below its peers is left
 * out of the job (preflight.enabled, preflight.tolerance in stork.yaml(5)).
 */
#ifndef STORK_DAEMON_PREFLIGHT_PROBE_H
#define STORK_DAEMON_PREFLIGHT_PROBE_H

#include <stddef.h>

struct rank;
struct gpt2_config;

/* What one rank measured; 0 where a figure was not taken. */
struct probe_figures {
	float node;            /* the rank's node index */
	float matmul_gflops;   /* a (N, C) x (C, OC) matrix product, best of several */
	float memory_gbs;      /* a large copy on the device: bytes read and written per second */
	float dp_gbs, tp_gbs, world_gbs; /* all-reduce algorithm bandwidth of each group */
	float failed;          /* 1: a probe failed on this rank */
};

/*
 * The verdict on node `node` among `nodes` nodes from every rank's figures
 * (world entries): 0 when it keeps up, else 1 with why (the figure, the
 * others' median and the tolerance) in buf. A node is judged on the
 * slowest of its ranks, against the median of the other nodes' slowest.
 */
int preflight_judge(const struct probe_figures *all, int world, int nodes, int node,
		    double tolerance, char *buf, size_t len);

/*
 * Run the probes (when preflight.enabled says so) for a model of shape mc
 * and act on the verdict:
 * 0 to go on training; else the rank's exit code, the same on every rank
 * (node_lost_requeued after rank 0 requeued the job without the slow
 * nodes, preflight_failed when it could not); -1 when preflight.enabled
 * is only and every node was kept (the message says so; no training).
 */
int preflight_run(struct rank *r, const struct gpt2_config *mc);

#endif
