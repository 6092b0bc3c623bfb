/*
 * daemon/engine/train/preflight_verdict.c - see preflight_verdict.h.
 *
 * The verdict can make a job start again without a node, so it errs on the
 * side of keeping: a node is left out on a figure that no noise explains
 * (a broken device) or on a majority's word; two nodes have no majority (on
 * a shared machine, whichever measured while the other computed looks
 * slow), so the slower one is only named.
 */
#include "config.h"
#include "daemon/engine/train/preflight_verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The two figures a node is judged on, as float offsets into probe_figures. */
static const struct {
	size_t off;
	const char *what, *unit;
} judged[] = {
	{ offsetof(struct probe_figures, matmul_gflops) / sizeof(float), "matrix product",
	  "GFLOP/s" },
	{ offsetof(struct probe_figures, memory_gbs) / sizeof(float), "memory bandwidth", "GB/s" },
};

#define NJUDGED (sizeof judged / sizeof judged[0])

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* The slowest rank's figure of node k (at float offset off), or -1 when a probe failed there. */
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

/*
 * Node k alone: PREFLIGHT_KEPT, or short (PREFLIGHT_WARNED, to be settled
 * by the majority rule) or broken (PREFLIGHT_LEFT_OUT), with why in text.
 */
static enum preflight_kind judge_node(const struct probe_figures *all, int world, int nodes,
				      int k, double tolerance, char *text, size_t len)
{
	enum preflight_kind kind = PREFLIGHT_KEPT;
	char why[64];

	snprintf(text, len, "ok");
	for (size_t j = 0; j < NJUDGED; j++) {
		float mine = node_figure(all, world, k, judged[j].off);
		float median = others_median(all, world, nodes, k, judged[j].off);
		int broken = mine < PREFLIGHT_FLOOR * median;

		if (mine < 0) {
			snprintf(text, len, "a probe failed on it");
			return PREFLIGHT_LEFT_OUT;
		}
		if (median <= 0 || mine >= (1 - tolerance) * median || (kind && !broken))
			continue; /* keeps up, or already short on the other figure */
		snprintf(why, sizeof why, "preflight.tolerance %.2f", tolerance);
		snprintf(text, len, "%s %.1f %s, %.0f%% of the other nodes' median %.1f (%s)",
			 judged[j].what, mine, judged[j].unit, 100.0 * mine / median, median,
			 broken ? "under a twentieth of it: a broken device" : why);
		if (broken)
			return PREFLIGHT_LEFT_OUT;
		kind = PREFLIGHT_WARNED;
	}
	return kind;
}

int preflight_verdicts(const struct probe_figures *all, int world, int nodes, double tolerance,
		       enum preflight_kind *kind, preflight_text *text)
{
	int nshort = 0, nbroken = 0, majority;

	for (int k = 0; k < nodes; k++) {
		kind[k] = judge_node(all, world, nodes, k, tolerance, text[k], sizeof text[k]);
		nshort += kind[k] == PREFLIGHT_WARNED;
		nbroken += kind[k] == PREFLIGHT_LEFT_OUT;
	}
	/* a clear majority of nodes that keep up says the short ones are slow */
	majority = nodes >= 3 && 2 * (nshort + nbroken) < nodes;
	for (int k = 0; k < nodes; k++) {
		if (kind[k] == PREFLIGHT_WARNED && majority) {
			kind[k] = PREFLIGHT_LEFT_OUT;
			nbroken++;
		} else if (kind[k] == PREFLIGHT_WARNED) {
			size_t used = strnlen(text[k], sizeof text[k]);

			snprintf(text[k] + used, sizeof text[k] - used, "; kept: %s",
				 nodes < 3 ? "two nodes have no majority to say which one is slow" :
					     "too many nodes are short for a majority to say which are slow");
		}
	}
	return nbroken;
}
