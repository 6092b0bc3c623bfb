/*
 * lib/rendezvous/rendezvous_common.c - what the rendezvous's dispatcher
 * (rendezvous.c) and both its paths (rendezvous_pmix.c, rendezvous_tcp.c)
 * use: the clock of their deadlines, a copy of a blob, and the names of
 * missing launchers' hosts from Slurm's task layout.
 *
 * Task layout: Slurm gives the step's nodes (SLURM_STEP_NODELIST), how many
 * tasks each runs (SLURM_STEP_TASKS_PER_NODE, "2(x3),1") and how tasks were
 * dealt to nodes (SLURM_DISTRIBUTION): "block" fills each node in turn,
 * "cyclic" deals one task per node round after round, skipping full nodes.
 * Other distributions (plane, arbitrary) do not tell a task's node from these
 * alone; missing launchers are then named by index only.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <slurm/slurm.h>

#include "lib/bind/bind.h"
#include "lib/rendezvous/rendezvous_impl.h"
#include "lib/slurm/slurm_tasks.h"

#define MAX_NAMED 32

double rdv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void *rdv_dup(const void *src, size_t len)
{
	void *p = malloc(len ? len : 1);

	if (p && len)
		memcpy(p, src, len);
	return p;
}

/* ------------------------------------------------------------ task layout */

/* The node (position in the node list) of task index, or -1. */
static int task_node(const int *counts, int nnodes, bool cyclic, int index)
{
	int task = 0;

	if (!cyclic) {
		for (int node = 0; node < nnodes; node++) {
			if (index < task + counts[node])
				return node;
			task += counts[node];
		}
		return -1;
	}
	for (int round = 0;; round++) {
		bool any = false;
		for (int node = 0; node < nnodes; node++) {
			if (round >= counts[node])
				continue;
			any = true;
			if (task++ == index)
				return node;
		}
		if (!any)
			return -1;
	}
}

static int nth_host(const char *nodelist, int n, char *buf, size_t len)
{
	hostlist_t hl = slurm_hostlist_create(nodelist);
	char *host = NULL;
	int rc = -1;

	if (!hl)
		return -1;
	for (int i = 0; i <= n; i++) {
		free(host);
		if (!(host = slurm_hostlist_shift(hl)))
			break;
	}
	if (host && strlen(host) < len) {
		strcpy(buf, host);
		rc = 0;
	}
	free(host);
	slurm_hostlist_destroy(hl);
	return rc;
}

int rdv_task_host(const char *nodelist, const char *tasks_per_node, const char *distribution,
		  int index, char *buf, size_t len)
{
	enum { MAX_NODES = 65536 };
	size_t dlen = distribution ? strcspn(distribution, ":") : 0;
	bool cyclic;
	int *counts, nnodes, node;

	if (!nodelist || !*nodelist || !tasks_per_node || !*tasks_per_node || index < 0)
		return -1;
	if (dlen == 0 || strncmp(distribution, "block", dlen) == 0)
		cyclic = false;
	else if (strncmp(distribution, "cyclic", dlen) == 0)
		cyclic = true;
	else
		return -1;
	if (!(counts = malloc(MAX_NODES * sizeof *counts)))
		return -1;
	nnodes = slurm_tasks_per_node(tasks_per_node, counts, MAX_NODES);
	node = nnodes > 0 ? task_node(counts, nnodes, cyclic, index) : -1;
	free(counts);
	return node < 0 ? -1 : nth_host(nodelist, node, buf, len);
}

void rdv_describe_missing(const struct rdv_params *p, const bool *arrived, char *buf, size_t len)
{
	size_t off = 0;
	int named = 0, more = 0;

	buf[0] = '\0';
	for (int i = 0; i < p->count; i++) {
		char host[256];
		if (arrived[i])
			continue;
		if (named == MAX_NAMED) {
			more++;
			continue;
		}
		int n = rdv_task_host(p->nodelist, p->tasks_per_node, p->distribution, i, host,
				      sizeof host) == 0
				? snprintf(buf + off, len - off, "%slauncher %d (%s)", named ? ", " : "", i, host)
				: snprintf(buf + off, len - off, "%slauncher %d", named ? ", " : "", i);
		if (n < 0 || (size_t)n >= len - off)
			return;
		off += (size_t)n;
		named++;
	}
	if (more)
		snprintf(buf + off, len - off, " and %d more", more);
}
