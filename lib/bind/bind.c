/*
 * lib/bind/bind.c - the binding plan (which GPU, cores and NUMA node each local
 * task gets) and the small parsers and formatters of the rank environment.
 *
 * How the plan is made: the allowed cpus are cut into units, one per core
 * (the allowed PUs of that core), in hwloc's logical order, which keeps the
 * cores of a NUMA node together. A task receives a contiguous run of units
 * from a pool: the cores local to its GPU (gpu mode), the cores of its NUMA
 * node (cores mode), or all allowed cores. Every function except bind_apply
 * and bind_first_host's libslurm call is pure and tested over XML topologies
 * (t/unit/check_bind.c).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/mempolicy.h>
#include <hwloc/glibc-sched.h>
#include <slurm/slurm.h>

#include "lib/bind/bind.h"

/* The allowed cores of a pool, in logical order. */
struct units {
	hwloc_cpuset_t *set;	/* allowed PUs of each core */
	int *numa;		/* NUMA node of each core, -1 if unknown */
	int n;
};

static void units_free(struct units *u)
{
	for (int i = 0; i < u->n; i++)
		hwloc_bitmap_free(u->set[i]);
	free(u->set);
	free(u->numa);
	memset(u, 0, sizeof(*u));
}

/* Cores (PUs when hwloc knows no cores) meeting allowed, restricted to within if given. */
static int units_collect(const struct topo *t, hwloc_const_cpuset_t allowed,
			 hwloc_const_cpuset_t within, struct units *u)
{
	hwloc_topology_t hw = topo_hwloc(t);
	hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	int max = hwloc_get_nbobjs_by_type(hw, type);
	hwloc_obj_t o = NULL;

	memset(u, 0, sizeof(*u));
	u->set = calloc((size_t)max + 1, sizeof(*u->set));
	u->numa = calloc((size_t)max + 1, sizeof(*u->numa));
	if (u->set == NULL || u->numa == NULL)
		goto fail;
	while ((o = hwloc_get_next_obj_by_type(hw, type, o)) != NULL) {
		hwloc_cpuset_t s = hwloc_bitmap_alloc();

		if (s == NULL)
			goto fail;
		hwloc_bitmap_and(s, o->cpuset, allowed);
		if (within != NULL)
			hwloc_bitmap_and(s, s, within);
		if (hwloc_bitmap_iszero(s)) {
			hwloc_bitmap_free(s);
			continue;
		}
		u->set[u->n] = s;
		u->numa[u->n] = topo_numa_of(t, o->cpuset);
		u->n++;
	}
	return 0;
fail:
	units_free(u);
	return -1;
}

/* Block j of k of n items: [j*n/k, (j+1)*n/k); sizes differ by at most one. */
static void block_range(int n, int k, int j, int *first, int *end)
{
	*first = (int)((long)j * n / k);
	*end = (int)((long)(j + 1) * n / k);
}

static void take_units(const struct units *u, int first, int end, struct bind_plan *plan)
{
	for (int i = first; i < end; i++)
		hwloc_bitmap_or(plan->cpuset, plan->cpuset, u->set[i]);
	plan->omp_threads = end - first;
}

/*
 * Cores rule over the units u: see bind_plan_compute. Domains are runs of
 * units with the same NUMA node (units are in logical order).
 */
static void assign_cores(const struct topo *t, const struct units *u, int ntasks, int task,
			 struct bind_plan *plan)
{
	int dstart[u->n + 1], dlen[u->n + 1], quota[u->n + 1], m = 0, assigned, first, end;

	for (int i = 0; i < u->n; i++) {
		if (i > 0 && u->numa[i] == u->numa[i - 1] && u->numa[i] >= 0) {
			dlen[m - 1]++;
			continue;
		}
		dstart[m] = i;
		dlen[m++] = 1;
	}
	if (ntasks < m) {
		block_range(u->n, ntasks, task, &first, &end);
		take_units(u, first, end, plan);
		plan->numa = topo_numa_of(t, plan->cpuset);
		return;
	}
	for (int d = 0; d < m; d++)
		quota[d] = 1;
	for (assigned = m; assigned < ntasks; assigned++) {
		int best = 0;

		/* D'Hondt: the next task goes where a task gets the most cores. */
		for (int d = 1; d < m; d++)
			if ((long)dlen[d] * quota[best] > (long)dlen[best] * quota[d])
				best = d;
		quota[best]++;
	}
	for (int d = 0, t0 = 0; d < m; t0 += quota[d], d++) {
		if (task >= t0 + quota[d])
			continue;
		block_range(dlen[d], quota[d], task - t0, &first, &end);
		take_units(u, dstart[d] + first, dstart[d] + end, plan);
		plan->numa = u->numa[dstart[d]];
		return;
	}
}

/* The locality of each task's GPU; -1 with a note when a GPU is unknown. */
static int gpu_domains(const struct topo *t, const struct bind_request *req,
		       hwloc_const_cpuset_t *dom, int *numa, struct bind_plan *plan)
{
	for (int i = 0; i < req->ntasks; i++) {
		int g = req->gpus[i % req->ngpus];

		if (topo_gpu_locality(t, g, &dom[i], &numa[i]) < 0) {
			snprintf(plan->note, sizeof(plan->note),
				 "GPU %d of the step is not in the topology (it lists %d NVIDIA GPUs); "
				 "cpus split as in cores mode", g, topo_gpu_count(t));
			return -1;
		}
	}
	return 0;
}

/*
 * Gpu rule: returns 0 when the task was placed, 1 when the plan must fall
 * back to the cores rule (note set), -1 on allocation failure.
 */
static int assign_gpu(const struct topo *t, const struct bind_request *req, struct bind_plan *plan)
{
	hwloc_const_cpuset_t dom[req->ntasks];
	int numa[req->ntasks], first, end, rc = -1;
	struct units u = { 0 };

	if (gpu_domains(t, req, dom, numa, plan) < 0)
		return 1;
	for (int i = 0; i < req->ntasks; i++) {
		int k = 0, j = 0;

		for (int o = 0; o < req->ntasks; o++) {
			if (!hwloc_bitmap_isequal(dom[o], dom[i]))
				continue;
			k++;
			j += o < i;
		}
		if (units_collect(t, req->allowed, dom[i], &u) < 0)
			return -1;
		if (u.n < k) {
			char where[32];

			if (numa[i] >= 0)
				snprintf(where, sizeof(where), "NUMA node %d", numa[i]);
			else
				snprintf(where, sizeof(where), "the locality");
			snprintf(plan->note, sizeof(plan->note),
				 "%s of GPU %d has %d allowed cores for %d tasks; cpus split as in cores mode",
				 where, req->gpus[i % req->ngpus], u.n, k);
			rc = 1;
			goto done;
		}
		if (i == req->task) {
			block_range(u.n, k, j, &first, &end);
			take_units(&u, first, end, plan);
			plan->numa = numa[i];
		}
		units_free(&u);
	}
	rc = 0;
done:
	units_free(&u);
	return rc;
}

static int check_request(const struct bind_request *req, char *err, size_t errlen)
{
	if (req->ntasks < 1 || req->task < 0 || req->task >= req->ntasks) {
		snprintf(err, errlen, "local task %d of %d: invalid task numbers", req->task, req->ntasks);
		return -1;
	}
	if (req->ngpus < 0 || (req->ngpus > 0 && req->gpus == NULL) || req->allowed == NULL) {
		snprintf(err, errlen, "invalid binding request (GPU list or allowed cpus missing)");
		return -1;
	}
	if (req->mode == BIND_GPU && req->ngpus == 0) {
		snprintf(err, errlen, "binding mode gpu, but the step has no GPUs on this node; "
			 "request GPUs (--gpus-per-node, --gres=gpu:N) or use --stork-bind=cores");
		return -1;
	}
	return 0;
}

int bind_plan_compute(const struct topo *t, const struct bind_request *req,
		      struct bind_plan *plan, char *err, size_t errlen)
{
	struct units all = { 0 };
	char list[256];
	int rc;

	memset(plan, 0, sizeof(*plan));
	plan->gpu = plan->gpu_index = plan->numa = -1;
	if (check_request(req, err, errlen) < 0)
		return -1;
	plan->cpuset = hwloc_bitmap_alloc();
	if (plan->cpuset == NULL || units_collect(t, req->allowed, NULL, &all) < 0)
		goto oom;
	if (req->ngpus > 0) {
		plan->gpu = req->task % req->ngpus;
		plan->gpu_index = req->gpus[plan->gpu];
	}
	plan->mode = req->mode == BIND_AUTO ? (req->ngpus > 0 ? BIND_GPU : BIND_CORES) : req->mode;
	if (plan->mode == BIND_NONE) {
		hwloc_bitmap_copy(plan->cpuset, req->allowed);
		plan->omp_threads = all.n > 0 ? all.n : 1;
		units_free(&all);
		return 0;
	}
	if (req->ntasks > all.n) {
		bind_cpuset_format(req->allowed, list, sizeof(list));
		snprintf(err, errlen, "%d local tasks but only %d allowed cores (cpus %s): ask for fewer "
			 "tasks per node or more cpus per task, or use --stork-bind=none",
			 req->ntasks, all.n, list);
		goto fail;
	}
	rc = plan->mode == BIND_GPU ? assign_gpu(t, req, plan) : 1;
	if (rc < 0)
		goto oom;
	if (rc > 0) {
		hwloc_bitmap_zero(plan->cpuset);
		assign_cores(t, &all, req->ntasks, req->task, plan);
	}
	units_free(&all);
	return 0;
oom:
	snprintf(err, errlen, "out of memory computing the binding plan");
fail:
	units_free(&all);
	bind_plan_free(plan);
	return -1;
}

void bind_plan_free(struct bind_plan *plan)
{
	hwloc_bitmap_free(plan->cpuset);
	plan->cpuset = NULL;
}

static int set_preferred_node(int numa)
{
	unsigned long mask[(numa / (8 * (int)sizeof(unsigned long))) + 1];

	memset(mask, 0, sizeof(mask));
	mask[numa / (8 * sizeof(unsigned long))] = 1UL << (numa % (8 * sizeof(unsigned long)));
	return (int)syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, (unsigned long)(8 * sizeof(mask)));
}

int bind_apply(const struct bind_plan *plan, char *err, size_t errlen)
{
	char list[256];
	cpu_set_t cpus;

	if (plan->mode != BIND_NONE) {
		CPU_ZERO(&cpus);
		hwloc_cpuset_to_glibc_sched_affinity(NULL, plan->cpuset, &cpus, sizeof(cpus));
		if (sched_setaffinity(0, sizeof(cpus), &cpus) < 0) {
			bind_cpuset_format(plan->cpuset, list, sizeof(list));
			snprintf(err, errlen, "sched_setaffinity(cpus %s): %s; does the topology file "
				 "match this machine?", list, strerror(errno));
			return -1;
		}
	}
	if (plan->numa >= 0 && set_preferred_node(plan->numa) < 0) {
		snprintf(err, errlen, "set_mempolicy(MPOL_PREFERRED, node %d): %s; memory is not "
			 "steered to the task's NUMA node", plan->numa, strerror(errno));
		return 1;
	}
	return 0;
}

int bind_plan_describe(const struct bind_plan *plan, char *buf, size_t len)
{
	char gpu[16] = "none", numa[16] = "none", list[512];
	int n;

	if (plan->gpu >= 0)
		snprintf(gpu, sizeof(gpu), "%d", plan->gpu);
	if (plan->numa >= 0)
		snprintf(numa, sizeof(numa), "%d", plan->numa);
	if (bind_cpuset_format(plan->cpuset, list, sizeof(list)) < 0)
		return -1;
	n = snprintf(buf, len, "gpu %s, cpus %s, numa %s", gpu, list, numa);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static const char *const mode_names[] = {
	[BIND_AUTO] = "auto", [BIND_GPU] = "gpu", [BIND_CORES] = "cores", [BIND_NONE] = "none",
};

int bind_mode_parse(const char *s, enum bind_mode *mode, bool *verbose)
{
	const char *comma = s ? strchr(s, ',') : NULL;
	size_t n = comma ? (size_t)(comma - s) : (s ? strlen(s) : 0);

	if (s == NULL || (comma != NULL && strcmp(comma + 1, "verbose") != 0))
		return -1;
	for (size_t m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++) {
		if (strlen(mode_names[m]) == n && strncmp(s, mode_names[m], n) == 0) {
			*mode = (enum bind_mode)m;
			*verbose = comma != NULL;
			return 0;
		}
	}
	return -1;
}

int bind_parse_bool(const char *s)
{
	static const char *const yes[] = { "1", "yes", "true", "on", "y" };
	static const char *const no[] = { "0", "no", "false", "off", "n" };

	if (s == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

int bind_parse_uint(const char *s, long max)
{
	char *end;
	long v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max || v > INT_MAX)
		return -1;
	return (int)v;
}

int bind_parse_gpu_list(const char *s, int *out, int max)
{
	int n = 0;

	if (s == NULL || *s == '\0')
		return 0;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		char item[16];
		int v;

		if (len == 0 || len >= sizeof(item) || n >= max)
			return -1;
		memcpy(item, s, len);
		item[len] = '\0';
		if ((v = bind_parse_uint(item, INT_MAX)) < 0)
			return -1;
		out[n++] = v;
		if (comma == NULL)
			return n;
		s = comma + 1;
	}
}

/* One hex mask ("0x3", "C") into out. */
static int add_hex_mask(const char *s, size_t len, hwloc_bitmap_t out)
{
	int bit = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
		len -= 2;
	}
	if (len == 0)
		return -1;
	for (size_t i = len; i-- > 0; bit += 4) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (v < 0)
			return -1;
		for (int b = 0; b < 4; b++)
			if (v & (1 << b))
				hwloc_bitmap_set(out, (unsigned)(bit + b));
	}
	return 0;
}

int bind_parse_cpu_bind_list(const char *type, const char *list, hwloc_bitmap_t out)
{
	bool mask = type && strstr(type, "mask_cpu") != NULL;
	bool map = type && strstr(type, "map_cpu") != NULL;
	int n = 0;

	if ((!mask && !map) || list == NULL || *list == '\0')
		return 0;
	for (const char *s = list;; n++) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		char item[32];
		int v;

		if (len == 0 || len >= sizeof(item))
			return -1;
		memcpy(item, s, len);
		item[len] = '\0';
		if (mask && add_hex_mask(item, len, out) < 0)
			return -1;
		if (map) {
			if ((v = bind_parse_uint(item, INT_MAX)) < 0)
				return -1;
			hwloc_bitmap_set(out, (unsigned)v);
		}
		if (comma == NULL)
			return n + 1;
		s = comma + 1;
	}
}

/* 32-bit finalizer of MurmurHash3: a cheap, well-mixing hash of the job id. */
static uint32_t mix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

unsigned bind_master_port(uint32_t job_id, uint32_t step_id, unsigned port_base, unsigned port_range)
{
	uint64_t r = port_range ? port_range : 1;

	return port_base + (unsigned)(((uint64_t)mix32(job_id) + step_id) % r);
}

int bind_first_host(const char *hostlist, char *buf, size_t len)
{
	hostlist_t hl;
	char *host;
	int rc = -1;

	if (hostlist == NULL || *hostlist == '\0')
		return -1;
	hl = slurm_hostlist_create(hostlist);
	if (hl == NULL)
		return -1;
	host = slurm_hostlist_shift(hl);
	if (host != NULL && *host != '\0' && strlen(host) < len) {
		strcpy(buf, host);
		rc = 0;
	}
	free(host);
	slurm_hostlist_destroy(hl);
	return rc;
}

int bind_cpuset_format(hwloc_const_bitmap_t set, char *buf, size_t len)
{
	int n = hwloc_bitmap_list_snprintf(buf, len, set);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}
