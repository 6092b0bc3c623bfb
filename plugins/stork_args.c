/*
 * plugins/stork_args.c - option table, callbacks and environment fallbacks.
 *
 * Slurm calls an option's callback in srun/sbatch/salloc when the user gives
 * it, and again in slurmstepd with the forwarded value (remote = 1); the
 * callbacks only record values, so calling them twice is harmless. A bad
 * value is reported with the option, the value and the valid ones; srun,
 * sbatch and salloc then exit non-zero before anything reaches a node.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/stork_args.h"

static struct stork_args stork_args = {
	.bind_set = -1,
	.mode = BIND_AUTO,
	.verbose = false,
	.env = -1,
};

static int option_bind(int val, const char *optarg, int remote);
static int option_env(int val, const char *optarg, int remote);

struct spank_option stork_spank_opts[] = {
	{
		"stork-bind", "MODE[,verbose]",
		"[stork] bind each task to the cores and NUMA node of its GPU. MODE: auto (default: "
		"gpu when the step has GPUs, else cores), gpu, cores (even NUMA-aligned blocks of the "
		"allowed cores) or none; ,verbose prints each task's binding",
		1, 0, option_bind
	},
	{
		"stork-env", NULL,
		"[stork] set the torchrun rank environment: RANK, LOCAL_RANK, WORLD_SIZE, "
		"LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, "
		"TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, "
		"MASTER_ADDR, MASTER_PORT, STORK_GPU",
		0, 1, option_env
	},
	{
		"no-stork-env", NULL,
		"[stork] do not set the rank environment",
		0, 0, option_env
	},
	SPANK_OPTIONS_TABLE_END
};

static int option_bind(int val, const char *optarg, int remote)
{
	enum bind_mode mode;
	bool verbose;

	if (bind_mode_parse(optarg, &mode, &verbose) < 0) {
		slurm_error("stork: --stork-bind: invalid value '%s' (valid: %s)",
			    optarg ? optarg : "", BIND_MODE_VALID);
		return -1;
	}
	stork_args.bind_set = 1;
	stork_args.mode = mode;
	stork_args.verbose = verbose;
	return 0;
}

static int option_env(int val, const char *optarg, int remote)
{
	stork_args.env = val ? 1 : 0;
	return 0;
}

/* The job's environment in slurmstepd, the process's environment elsewhere. */
static const char *get_env(spank_t sp, const char *name, char *buf, size_t len)
{
	if (spank_context() == S_CTX_REMOTE)
		return spank_getenv(sp, name, buf, (int)len) == ESPANK_SUCCESS ? buf : NULL;
	return getenv(name);
}

struct stork_args *stork_args_register(spank_t sp)
{
	spank_err_t rc;

	for (int i = 0; stork_spank_opts[i].name != NULL; i++) {
		rc = spank_option_register(sp, &stork_spank_opts[i]);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("stork: couldn't register option --%s: %s",
				    stork_spank_opts[i].name, spank_strerror(rc));
			return NULL;
		}
	}
	return &stork_args;
}

int stork_args_resolve(spank_t sp, const struct plugin_args *plugstack, char *err, size_t errlen)
{
	char buf[256];
	const char *v;
	int on;

	if (stork_args.bind_set < 0 && (v = get_env(sp, "STORK_BIND", buf, sizeof(buf))) != NULL) {
		if (bind_mode_parse(v, &stork_args.mode, &stork_args.verbose) < 0) {
			snprintf(err, errlen, "STORK_BIND: invalid value '%s' (valid: %s)", v, BIND_MODE_VALID);
			return -1;
		}
		stork_args.bind_set = 1;
	}
	if (stork_args.env < 0 && (v = get_env(sp, "STORK_ENV", buf, sizeof(buf))) != NULL) {
		if ((on = bind_parse_bool(v)) < 0) {
			snprintf(err, errlen, "STORK_ENV: invalid value '%s' (valid: 1, 0, yes, no, true, "
				 "false, on, off)", v);
			return -1;
		}
		stork_args.env = on;
	}
	if (stork_args.bind_set < 0) {
		stork_args.mode = plugstack->default_on ? BIND_AUTO : BIND_NONE;
		stork_args.verbose = false;
	}
	if (stork_args.env < 0)
		stork_args.env = plugstack->default_on;
	return 0;
}

void stork_args_reset(void)
{
	stork_args.bind_set = -1;
	stork_args.mode = BIND_AUTO;
	stork_args.verbose = false;
	stork_args.env = -1;
}
