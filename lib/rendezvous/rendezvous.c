/*
 * lib/rendezvous/rendezvous.c - the rendezvous's entry points: parameters from a Slurm
 * task's environment, the choice of path (PMIx or TCP, see
 * rendezvous_pmix.c and rendezvous_tcp.c), the result table, and the names
 * of missing launchers' hosts from Slurm's task layout.
 *
 * Task layout: Slurm gives the step's nodes (SLURM_STEP_NODELIST), how many
 * tasks each runs (SLURM_STEP_TASKS_PER_NODE, "2(x3),1") and how tasks were
 * dealt to nodes (SLURM_DISTRIBUTION): "block" fills each node in turn,
 * "cyclic" deals one task per node round after round, skipping full nodes.
 * Other distributions (plane, arbitrary) do not tell a task's node from these
 * alone; missing launchers are then named by index only.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <slurm/slurm.h>

#include "lib/bind/bind.h"
#include "lib/env_number.h"
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

/* ------------------------------------------------------------ parameters */

/* A whole-string unsigned decimal variable; dflt when unset, -1 (err) if malformed. */
/* A count or id from the environment (lib/env_number.h); dflt when unset. */
static long env_uint(const char *name, long dflt, long max, char *err, size_t errlen)
{
	char why[256];
	long long v;

	if (env_number(name, 0, max, dflt, &v, why, sizeof why) < 0) {
		snprintf(err, errlen, "rendezvous: %s", why);
		return -1;
	}
	return (long)v;
}

static void copy_env(char *dst, size_t len, const char *name)
{
	const char *s = getenv(name);

	snprintf(dst, len, "%s", s ? s : "");
}

static int tcp_address(struct rdv_params *p, char *err, size_t errlen)
{
	long port;

	if (getenv("MASTER_ADDR") && *getenv("MASTER_ADDR"))
		copy_env(p->addr, sizeof p->addr, "MASTER_ADDR");
	else if (p->nodelist[0] && bind_first_host(p->nodelist, p->addr, sizeof p->addr) < 0) {
		snprintf(err, errlen, "rendezvous: cannot take the first host of SLURM_STEP_NODELIST='%s'",
			 p->nodelist);
		return -1;
	}
	if ((port = env_uint("MASTER_PORT", 0, 65535, err, errlen)) < 0)
		return -1;
	p->port = port ? (unsigned)port
		       : bind_master_port(p->job_id, p->step_id, RDV_PORT_BASE, RDV_PORT_RANGE);
	return 0;
}

int rdv_params_from_env(struct rdv_params *p, enum rdv_method method, double timeout,
			char *err, size_t errlen)
{
	long index, count, job, step;

	memset(p, 0, sizeof *p);
	p->method = method;
	p->timeout = timeout;
	p->count = 1;
	if (!getenv("SLURM_STEP_ID"))
		return 0; /* not a Slurm step: alone */
	if ((index = env_uint("SLURM_PROCID", 0, INT_MAX - 1, err, errlen)) < 0 ||
	    (count = env_uint("SLURM_STEP_NUM_TASKS", -2, INT_MAX, err, errlen)) == -1 ||
	    (count == -2 && (count = env_uint("SLURM_NTASKS", 1, INT_MAX, err, errlen)) < 0) ||
	    (job = env_uint("SLURM_JOB_ID", 0, UINT32_MAX, err, errlen)) < 0 ||
	    (step = env_uint("SLURM_STEP_ID", 0, UINT32_MAX, err, errlen)) < 0)
		return -1;
	if (count < 1 || index >= count) {
		snprintf(err, errlen, "rendezvous: SLURM_PROCID=%ld is not below the step's %ld tasks",
			 index, count);
		return -1;
	}
	p->index = (int)index;
	p->count = (int)count;
	p->job_id = (uint32_t)job;
	p->step_id = (uint32_t)step;
	copy_env(p->nodelist, sizeof p->nodelist, "SLURM_STEP_NODELIST");
	if (!p->nodelist[0])
		copy_env(p->nodelist, sizeof p->nodelist, "SLURM_JOB_NODELIST");
	copy_env(p->tasks_per_node, sizeof p->tasks_per_node, "SLURM_STEP_TASKS_PER_NODE");
	copy_env(p->distribution, sizeof p->distribution, "SLURM_DISTRIBUTION");
	return tcp_address(p, err, errlen);
}

void rdv_params_for_attempt(struct rdv_params *p, unsigned attempt)
{
	if (attempt == 0 || p->count <= 1)
		return;
	p->method = RDV_TCP;
	p->port = 1024 + (p->port - 1024 + attempt) % (65536 - 1024);
}

int rdv_method_parse(const char *s, enum rdv_method *m)
{
	static const char *names[] = { "auto", "pmix", "tcp" };

	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, names[i]) == 0) {
			*m = (enum rdv_method)i;
			return 0;
		}
	return -1;
}

/* ------------------------------------------------------------ exchange */

static bool pmix_in_env(void)
{
	return getenv("PMIX_RANK") && getenv("PMIX_NAMESPACE");
}

int rdv_exchange(const struct rdv_params *p, const void *blob, size_t len,
		 struct rdv_result *out, char *err, size_t errlen)
{
	struct rdv_params q = *p;
	double t0 = rdv_now(), deadline;
	enum rdv_method m = p->method;
	int rc;

	memset(out, 0, sizeof *out);
	if (q.timeout <= 0)
		q.timeout = RDV_DEFAULT_TIMEOUT;
	deadline = t0 + q.timeout;
	if (q.count < 1 || q.index < 0 || q.index >= q.count) {
		snprintf(err, errlen, "rendezvous: launcher index %d is not in 0..%d", q.index,
			 q.count - 1);
		return -1;
	}
	if (len > RDV_MAX_BLOB || (len && !blob)) {
		snprintf(err, errlen, "rendezvous: a blob of %zu bytes (the limit is %u)", len,
			 RDV_MAX_BLOB);
		return -1;
	}
	if (!(out->peers = calloc((size_t)q.count, sizeof *out->peers))) {
		snprintf(err, errlen, "rendezvous: out of memory for %d launchers", q.count);
		return -1;
	}
	out->n = q.count;
	for (int i = 0; i < q.count; i++)
		out->peers[i].index = i;
	if (m == RDV_AUTO)
		m = pmix_in_env() ? RDV_PMIX : RDV_TCP;
	if (q.count == 1) {
		out->method = "local";
		out->peers[0].len = len;
		rc = (out->peers[0].blob = rdv_dup(blob, len)) ? 0 : -1;
		if (rc)
			snprintf(err, errlen, "rendezvous: out of memory");
	} else if (m == RDV_PMIX) {
		out->method = "pmix";
		rc = rdv_pmix_exchange(&q, blob, len, out->peers, deadline, err, errlen);
	} else {
		out->method = "tcp";
		rc = rdv_tcp_exchange(&q, blob, len, out->peers, deadline, err, errlen);
	}
	out->seconds = rdv_now() - t0;
	if (rc < 0)
		rdv_result_free(out);
	return rc;
}

void rdv_result_free(struct rdv_result *r)
{
	for (int i = 0; r->peers && i < r->n; i++)
		free(r->peers[i].blob);
	free(r->peers);
	r->peers = NULL;
	r->n = 0;
}

void rdv_finalize(void)
{
	rdv_pmix_finalize();
}
