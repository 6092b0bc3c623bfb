/*
 * lib/bind/bind.h - the binding plan of a node's local tasks and the pure helpers
 * of the torchrun-compatible rank environment. Shared by the SPANK plugin and
 * the launcher, so nothing here knows about Slurm's or SPANK's types.
 *
 * The plan, per local task (see bind_plan_compute for the rules):
 *   gpu          LOCAL_RANK mod #GPUs: the device ordinal within the step's
 *                GPU list (CUDA_VISIBLE_DEVICES stays the whole list);
 *   cpuset       a subset of the cpus Slurm allowed (never wider);
 *   numa         the NUMA node whose memory the task prefers (-1: none);
 *   omp_threads  the number of cores in cpuset (OMP_NUM_THREADS).
 */
#ifndef STORK_BIND_H
#define STORK_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <hwloc.h>

#include "lib/bind/topology.h"

enum bind_mode {
	BIND_AUTO = 0,	/* gpu when the step has GPUs on this node, else cores */
	BIND_GPU,	/* cores and memory of each task's GPU's NUMA node */
	BIND_CORES,	/* even NUMA-aligned blocks of the allowed cores */
	BIND_NONE,	/* leave Slurm's binding alone */
};

/* The accepted spellings, for error messages. */
#define BIND_MODE_VALID "auto, gpu, cores, none, each optionally followed by ,verbose"

/* The plan's inputs. */
struct bind_request {
	enum bind_mode mode;
	hwloc_const_cpuset_t allowed;	/* PUs Slurm allowed the step's tasks on this node */
	const int *gpus;	/* topology GPU index of each entry of the step's GPU list, in list order */
	int ngpus;
	int ntasks;		/* local tasks on this node */
	int task;		/* this task's local id, 0 <= task < ntasks */
};

struct bind_plan {
	enum bind_mode mode;	/* what was applied: BIND_GPU, BIND_CORES or BIND_NONE */
	int gpu;		/* device ordinal within the GPU list (STORK_GPU), -1 without GPUs */
	int gpu_index;		/* topology GPU index of that device, -1 without GPUs */
	hwloc_cpuset_t cpuset;	/* allocated; for BIND_NONE a copy of allowed */
	int numa;		/* preferred NUMA node (OS index), -1 for none */
	int omp_threads;	/* cores in cpuset, at least 1 */
	char note[256];		/* why the plan fell back from gpu to cores; "" otherwise */
};

/*
 * Compute task req->task's plan. Rules:
 *  - gpu: task t uses device t mod ngpus. Tasks whose GPUs share a locality
 *    (normally a NUMA node) split that locality's allowed cores into
 *    contiguous blocks whose sizes differ by at most one, in local id order.
 *    If some locality has fewer allowed cores than tasks, or a GPU of the
 *    list is not in the topology, the cpus fall back to the cores rule (the
 *    GPU stays) and plan->note says why.
 *  - cores: with at least as many tasks as NUMA nodes holding allowed cores,
 *    each such node gets one task, then each further task goes to the node
 *    where a task gets the most cores (D'Hondt; ties to the lower node);
 *    tasks fill nodes in local id order and split each node's cores evenly.
 *    With fewer tasks than such nodes, the allowed cores are split into
 *    contiguous blocks and a block spanning nodes prefers none.
 *  - auto: gpu when ngpus > 0, else cores. none: cpuset = allowed.
 * A core counts when any of its PUs is allowed; a task gets only allowed PUs.
 * Returns 0, or -1 with a message in err (more local tasks than allowed cores,
 * mode gpu without GPUs, bad arguments). plan is owned by the caller; release
 * it with bind_plan_free.
 */
int bind_plan_compute(const struct topo *t, const struct bind_request *req,
		      struct bind_plan *plan, char *err, size_t errlen);

void bind_plan_free(struct bind_plan *plan);

/*
 * Apply a plan to the calling process: sched_setaffinity to plan->cpuset
 * (skipped for BIND_NONE) and a preferred memory policy on plan->numa.
 * Returns 0; -1 when the affinity could not be set; 1 when only the memory
 * policy failed (the message in err is then a warning).
 */
int bind_apply(const struct bind_plan *plan, char *err, size_t errlen);

/* "gpu G, cpus LIST, numa N" ("none" for a missing GPU or NUMA node). */
int bind_plan_describe(const struct bind_plan *plan, char *buf, size_t len);

/* "MODE[,verbose]" -> mode and verbose. Returns 0, or -1 for anything else. */
int bind_mode_parse(const char *s, enum bind_mode *mode, bool *verbose);

/* 1|yes|true|on|y -> 1, 0|no|false|off|n -> 0, anything else -> -1. */
int bind_parse_bool(const char *s);

/* Non-negative decimal that fits in an int, whole string; -1 otherwise. */
int bind_parse_uint(const char *s, long max);

/*
 * Parse a GPU list such as CUDA_VISIBLE_DEVICES ("0,1,3") into at most max
 * indexes. Returns the count (0 for an empty string), or -1 when an entry is
 * not a non-negative integer (e.g. a GPU UUID) or there are too many.
 */
int bind_parse_gpu_list(const char *s, int *out, int max);

/*
 * Add to out the cpus of a Slurm task-binding list as found in
 * SLURM_CPU_BIND_TYPE / SLURM_CPU_BIND_LIST: "mask_cpu:" with hex masks
 * ("0x3,0xC") or "map_cpu:" with cpu ids ("0,2"). Returns the number of
 * entries added, 0 when type is another kind of binding, -1 on a malformed list.
 */
int bind_parse_cpu_bind_list(const char *type, const char *list, hwloc_bitmap_t out);

/*
 * MASTER_PORT of a step: port_base + (hash(job_id) + step_id) mod port_range.
 * The job's hash spreads jobs over the range; adding the step id (not hashing
 * it) guarantees that the first port_range steps of one job, which may run at
 * the same time, all get distinct ports. port_range 0 is treated as 1.
 */
unsigned bind_master_port(uint32_t job_id, uint32_t step_id, unsigned port_base, unsigned port_range);

/*
 * MASTER_ADDR: the first host of a Slurm hostlist ("n[3-5],m1" -> "n3"),
 * expanded with libslurm's slurm_hostlist_* (the caller links libslurm or runs
 * inside a Slurm process). Returns 0, or -1 for an empty or malformed list or
 * a too small buffer.
 */
int bind_first_host(const char *hostlist, char *buf, size_t len);

/* Format a cpuset as a list ("0-3,8"). Returns 0, or -1 if buf is too small. */
int bind_cpuset_format(hwloc_const_bitmap_t set, char *buf, size_t len);

#endif
