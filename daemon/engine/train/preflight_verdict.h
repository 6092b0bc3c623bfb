/*
 * daemon/engine/train/preflight_verdict.h - what the preflight makes of every rank's
 * figures: which nodes keep up, which are only the slower ones (a warning),
 * which are left out. Pure: the same figures give the same verdict on every
 * rank, so no rank has to tell the others.
 */
#ifndef STORK_DAEMON_PREFLIGHT_VERDICT_H
#define STORK_DAEMON_PREFLIGHT_VERDICT_H

#include <stddef.h>

/* What one rank measured; 0 where a figure was not taken. */
struct probe_figures {
	float node;            /* the rank's node index */
	float matmul_gflops;   /* a (N, C) x (C, OC) matrix product, best of several */
	float memory_gbs;      /* a large copy on the device: bytes read and written per second */
	float dp_gbs, tp_gbs, world_gbs; /* all-reduce algorithm bandwidth of each group */
	float failed;          /* 1: a probe failed on this rank */
};

/*
 * A figure below this fraction of the other nodes' median is a broken
 * device, not noise: such a node is left out even where no majority can
 * say which node is slow (two nodes). Healthy nodes measured a third of
 * each other's figure at worst (stork(1), PREFLIGHT); a twentieth is far
 * below that, and half what a device slowed tenfold measures.
 */
#define PREFLIGHT_FLOOR 0.05

/* How many times every device is measured, at most, while a node looks short. */
#define PREFLIGHT_TRIES 3

enum preflight_kind {
	PREFLIGHT_KEPT,     /* keeps up */
	PREFLIGHT_WARNED,   /* short of the others, but kept: no majority says it is the slow one */
	PREFLIGHT_LEFT_OUT, /* short with a majority against it, or broken */
};

typedef char preflight_text[384]; /* "ok", or the figure that fell short and why */

/*
 * The verdict on every node (0 .. nodes-1) from every rank's figures (world
 * entries): kind[k] and text[k]. A node is judged on the slowest of its
 * ranks against the median of the other nodes', on the matrix product and
 * the memory bandwidth:
 *  - a probe that failed, or a figure under PREFLIGHT_FLOOR of the median:
 *    broken, left out (while some node remains);
 *  - more than tolerance below the median: short. Short nodes are left out
 *    only when the others are a clear majority (three nodes or more, and
 *    the short and broken together fewer than half); otherwise they are
 *    warned of and kept.
 * Returns the number of nodes left out.
 */
int preflight_verdicts(const struct probe_figures *all, int world, int nodes, double tolerance,
		       enum preflight_kind *kind, preflight_text *text);

#endif
