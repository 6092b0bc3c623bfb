/*
 * lib/rendezvous/rendezvous.c - the rendezvous's entry points: parameters from a Slurm
 * task's environment, the choice of path (PMIx or TCP, see
 * rendezvous_pmix.c and rendezvous_tcp.c) and the result table. What the
 * dispatcher and both paths use lives below them, in rendezvous_common.c.
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
