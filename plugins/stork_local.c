/*
 * plugins/stork_local.c - srun, sbatch and salloc: the options are
 * registered so these commands accept them (sbatch and salloc forward them
 * to the job's steps), and STORK_BIND / STORK_ENV are checked here so a bad
 * value stops the command with a message instead of failing on the nodes.
 */
#include "config.h"

#include "plugins/stork_args.h"
#include "plugins/plugin_args.h"
#include "plugins/stork_local.h"

static struct plugin_args plugstack;

int stork_local_init(spank_t sp, int ac, char **av)
{
	char err[512];

	if (plugin_args_parse(&plugstack, ac, av, err, sizeof(err)) < 0) {
		slurm_error("stork: %s; fix plugstack.conf", err);
		return -1;
	}
	if (stork_args_register(sp) == NULL)
		return -1;
	return 0;
}

int stork_local_post_opt(spank_t sp, int ac, char **av)
{
	char err[512];

	if (stork_args_resolve(sp, &plugstack, err, sizeof(err)) < 0) {
		slurm_error("stork: %s", err);
		return -1;
	}
	return 0;
}

int stork_local_exit(spank_t sp, int ac, char **av)
{
	stork_args_reset();
	return 0;
}
