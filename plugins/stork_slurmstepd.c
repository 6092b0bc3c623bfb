/*
 * plugins/stork_slurmstepd.c - slurmstepd: bind every task of a step and set
 * its rank environment.
 *
 * Flow: init parses plugstack.conf and registers the options; post_opt
 * resolves them (command line > STORK_BIND/STORK_ENV > default=) and skips
 * the batch, extern and interactive steps; user_init (once per step, in
 * slurmstepd, before the tasks fork) loads the topology and records the
 * step's cpus; task_init (in each task, after Slurm's own task binding and
 * GRES environment, just before exec) computes the task's plan with lib/bind,
 * applies it and sets the environment. Slurm ignores errors of user_init
 * under srun, so they are kept and returned from task_init: the task then
 * fails and srun reports it, and the node stays up.
 */
#include "config.h"

#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hwloc/glibc-sched.h>
#include <slurm/slurm.h>

#include "lib/bind/bind.h"
#include "lib/bind/topology.h"
#include "plugins/stork_args.h"
#include "plugins/plugin_args.h"
#include "plugins/stork_slurmstepd.h"

#define MAX_GPUS 1024

struct step_info {
	uint32_t job_id;
	uint32_t step_id;
	uint32_t node_id;
	uint32_t local_tasks;
	uint32_t total_tasks;
};

static struct {
	struct plugin_args plugstack;
	struct stork_args *args;
	bool enabled;
	struct step_info step;
	struct topo *topo;
	hwloc_bitmap_t step_cpus;	/* slurmstepd's own affinity: never leave it */
	int user_init_rv;
	char error[1024];
} context;

int stork_slurmstepd_init(spank_t sp, int ac, char **av)
{
	char err[512];

	if (plugin_args_parse(&context.plugstack, ac, av, err, sizeof(err)) < 0) {
		slurm_error("stork: %s; fix plugstack.conf", err);
		return -1;
	}
	context.args = stork_args_register(sp);
	return context.args == NULL ? -1 : 0;
}

static int get_step_info(spank_t sp, struct step_info *s)
{
	struct { spank_item_t item; uint32_t *out; const char *what; } items[] = {
		{ S_JOB_ID, &s->job_id, "job id" },
		{ S_JOB_STEPID, &s->step_id, "step id" },
		{ S_JOB_NODEID, &s->node_id, "node id" },
		{ S_JOB_LOCAL_TASK_COUNT, &s->local_tasks, "local task count" },
		{ S_JOB_TOTAL_TASK_COUNT, &s->total_tasks, "total task count" },
	};
	spank_err_t rc;

	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		rc = spank_get_item(sp, items[i].item, items[i].out);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("stork: couldn't get the %s: %s", items[i].what, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/* Keep the first error for task_init (see the file comment). */
static void keep_error(const char *msg)
{
	context.user_init_rv = -1;
	if (context.error[0] == '\0')
		snprintf(context.error, sizeof(context.error), "%s", msg);
}

int stork_slurmstepd_post_opt(spank_t sp, int ac, char **av)
{
	char err[512];

	if (get_step_info(sp, &context.step) < 0)
		return -1;
	if (context.step.step_id == SLURM_BATCH_SCRIPT || context.step.step_id == SLURM_EXTERN_CONT ||
	    context.step.step_id == SLURM_INTERACTIVE_STEP)
		return 0;
	context.enabled = true;
	if (stork_args_resolve(sp, &context.plugstack, err, sizeof(err)) < 0)
		keep_error(err);
	else if (context.args->mode == BIND_NONE && !context.args->env && !context.args->verbose)
		context.enabled = false;
	return 0;
}

static int load_step_cpus(void)
{
	cpu_set_t cpus;

	context.step_cpus = hwloc_bitmap_alloc();
	if (context.step_cpus == NULL || sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
		return -1;
	hwloc_cpuset_from_glibc_sched_affinity(NULL, context.step_cpus, &cpus, sizeof(cpus));
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	char err[768], msg[1024];
	const char *xml;

	if (!context.enabled || context.user_init_rv != 0 || context.args->mode == BIND_NONE)
		return 0;
	xml = context.plugstack.topology[0] ? context.plugstack.topology : NULL;
	context.topo = topo_load(xml, err, sizeof(err));
	if (context.topo == NULL) {
		snprintf(msg, sizeof(msg), "%s; fix topology= in plugstack.conf or run with "
			 "--stork-bind=none", err);
		keep_error(msg);
		return 0;
	}
	if (load_step_cpus() < 0)
		keep_error("cannot read slurmstepd's cpu affinity");
	return 0;
}

static const char *task_env(spank_t sp, const char *name, char *buf, size_t len)
{
	return spank_getenv(sp, name, buf, (int)len) == ESPANK_SUCCESS ? buf : NULL;
}

/*
 * The cpus the plan may use. For --stork-bind=none, the task's own mask.
 * Otherwise the union of the masks Slurm gave this node's tasks (the task's
 * own plus SLURM_CPU_BIND_LIST when Slurm bound with masks or maps), within
 * slurmstepd's own affinity (the step's cgroup, if any).
 */
static int allowed_cpus(spank_t sp, hwloc_bitmap_t allowed, char *err, size_t errlen)
{
	char type[128], list[4096];
	const char *t, *l;
	cpu_set_t cpus;

	if (sched_getaffinity(0, sizeof(cpus), &cpus) < 0) {
		snprintf(err, errlen, "sched_getaffinity: %m");
		return -1;
	}
	hwloc_cpuset_from_glibc_sched_affinity(NULL, allowed, &cpus, sizeof(cpus));
	if (context.args->mode == BIND_NONE)
		return 0;
	t = task_env(sp, "SLURM_CPU_BIND_TYPE", type, sizeof(type));
	l = task_env(sp, "SLURM_CPU_BIND_LIST", list, sizeof(list));
	if (t != NULL && l != NULL && bind_parse_cpu_bind_list(t, l, allowed) < 0) {
		snprintf(err, errlen, "SLURM_CPU_BIND_LIST: cannot parse '%.200s' (type '%.100s')", l, t);
		return -1;
	}
	if (context.step_cpus != NULL)
		hwloc_bitmap_and(allowed, allowed, context.step_cpus);
	return 0;
}

/* The step's GPUs on this node: SLURM_STEP_GPUS, else CUDA_VISIBLE_DEVICES. */
static int step_gpus(spank_t sp, int *gpus, char *err, size_t errlen)
{
	static const char *const names[] = { "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES" };
	char buf[4096];
	int n;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (task_env(sp, names[i], buf, sizeof(buf)) == NULL)
			continue;
		n = bind_parse_gpu_list(buf, gpus, MAX_GPUS);
		if (n < 0) {
			snprintf(err, errlen, "%s='%.200s': expected GPU indexes such as 0,1,2; "
				 "use --stork-bind=cores or none", names[i], buf);
			return -1;
		}
		return n;
	}
	return 0;
}

static int set_env(spank_t sp, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_env(spank_t sp, const char *name, const char *fmt, ...)
{
	char value[1024];
	spank_err_t rc;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	rc = spank_setenv(sp, name, value, 1);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("stork: couldn't set %s=%s: %s", name, value, spank_strerror(rc));
		return -1;
	}
	return 0;
}

static int set_rank_env(spank_t sp, uint32_t rank, int local, const struct bind_plan *plan)
{
	const struct step_info *s = &context.step;
	char nodes[8192], master[256];
	unsigned port;

	if (task_env(sp, "SLURM_STEP_NODELIST", nodes, sizeof(nodes)) == NULL &&
	    task_env(sp, "SLURM_JOB_NODELIST", nodes, sizeof(nodes)) == NULL) {
		slurm_error("stork: rank %u: neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set; "
			    "cannot derive MASTER_ADDR", rank);
		return -1;
	}
	if (bind_first_host(nodes, master, sizeof(master)) < 0) {
		slurm_error("stork: rank %u: cannot take the first host of node list '%s'", rank, nodes);
		return -1;
	}
	port = bind_master_port(s->job_id, s->step_id, context.plugstack.port_base,
				context.plugstack.port_range);
	if (set_env(sp, "RANK", "%u", rank) < 0 || set_env(sp, "LOCAL_RANK", "%d", local) < 0 ||
	    set_env(sp, "WORLD_SIZE", "%u", s->total_tasks) < 0 ||
	    set_env(sp, "LOCAL_WORLD_SIZE", "%u", s->local_tasks) < 0 ||
	    set_env(sp, "NODE_RANK", "%u", s->node_id) < 0 ||
	    set_env(sp, "GROUP_RANK", "%u", s->node_id) < 0 ||
	    set_env(sp, "MASTER_ADDR", "%s", master) < 0 || set_env(sp, "MASTER_PORT", "%u", port) < 0 ||
	    set_env(sp, "OMP_NUM_THREADS", "%d", plan->omp_threads) < 0)
		return -1;
	/* the rest of what torchrun gives each worker, as `stork run --
	 * PROGRAM` does: a step is one role, run once */
	if (set_env(sp, "ROLE_RANK", "%u", rank) < 0 ||
	    set_env(sp, "ROLE_WORLD_SIZE", "%u", s->total_tasks) < 0 ||
	    set_env(sp, "ROLE_NAME", "default") < 0 ||
	    set_env(sp, "TORCHELASTIC_RUN_ID", "%u", s->job_id) < 0 ||
	    set_env(sp, "TORCHELASTIC_RESTART_COUNT", "0") < 0 ||
	    set_env(sp, "TORCHELASTIC_MAX_RESTARTS", "0") < 0)
		return -1;
	if (plan->gpu >= 0)
		return set_env(sp, "STORK_GPU", "%d", plan->gpu);
	return spank_unsetenv(sp, "STORK_GPU") == ESPANK_SUCCESS ? 0 : -1;
}

/* The task's plan; with --stork-bind=none only its GPU and thread count. */
static int make_plan(spank_t sp, int local, struct bind_plan *plan, char *err, size_t errlen)
{
	int gpus[MAX_GPUS], ngpus;
	struct bind_request req = { 0 };
	hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
	int rc = -1;

	if (allowed == NULL || allowed_cpus(sp, allowed, err, errlen) < 0)
		goto fail;
	if ((ngpus = step_gpus(sp, gpus, err, errlen)) < 0)
		goto fail;
	req = (struct bind_request){
		.mode = context.args->mode, .allowed = allowed, .gpus = gpus, .ngpus = ngpus,
		.ntasks = (int)context.step.local_tasks, .task = local,
	};
	if (context.topo == NULL) {
		/* Mode none loads no topology: the plan is the task's own mask. */
		if ((context.topo = topo_load(context.plugstack.topology[0] ? context.plugstack.topology : NULL,
					      err, errlen)) == NULL)
			goto fail;
	}
	rc = bind_plan_compute(context.topo, &req, plan, err, errlen);
fail:
	hwloc_bitmap_free(allowed);
	return rc;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char err[1024], desc[1024], host[256];
	struct bind_plan plan = { 0 };
	uint32_t rank;
	int local, rc, rv = -1;

	if (!context.enabled)
		return 0;
	if (context.user_init_rv != 0) {
		slurm_error("stork: %s", context.error);
		return context.user_init_rv;
	}
	if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS) {
		slurm_error("stork: couldn't get the task's rank");
		goto fail;
	}
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "?");
	if (make_plan(sp, local, &plan, err, sizeof(err)) < 0) {
		slurm_error("stork: rank %u (local %d) on %s: %s", rank, local, host, err);
		goto fail;
	}
	rc = bind_apply(&plan, err, sizeof(err));
	if (rc < 0) {
		slurm_error("stork: rank %u (local %d) on %s: %s", rank, local, host, err);
		goto fail;
	}
	if (rc > 0)
		slurm_info("stork: rank %u (local %d) on %s: %s", rank, local, host, err);
	if (plan.note[0] != '\0' && context.args->verbose)
		fprintf(stderr, "stork: rank %u (local %d) on %s: %s\n", rank, local, host, plan.note);
	if (context.args->env && set_rank_env(sp, rank, local, &plan) < 0)
		goto fail;
	if (context.args->verbose && bind_plan_describe(&plan, desc, sizeof(desc)) == 0)
		fprintf(stderr, "stork: rank %u (local %d) on %s: %s\n", rank, local, host, desc);
	rv = 0;
fail:
	bind_plan_free(&plan);
	return rv;
}

int stork_slurmstepd_exit(spank_t sp, int ac, char **av)
{
	topo_free(context.topo);
	hwloc_bitmap_free(context.step_cpus);
	stork_args_reset();
	memset(&context, 0, sizeof(context));
	return 0;
}
