/*
 * plugins/stork_dispatch.c - spank_stork.so's entry points: each Slurm
 * context is handed to the file that runs there. srun, sbatch and salloc:
 * stork_local.c; slurmstepd (the tasks of a step): stork_slurmstepd.c, which
 * also defines slurm_spank_user_init and slurm_spank_task_init. slurmd
 * itself needs nothing.
 */
#include "config.h"

#include <slurm/spank.h>

#include "plugins/stork_local.h"
#include "plugins/stork_slurmstepd.h"

SPANK_PLUGIN(stork, 1)

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return stork_local_init(sp, ac, av);
	case S_CTX_REMOTE:
		return stork_slurmstepd_init(sp, ac, av);
	default:
		return 0;
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return stork_local_post_opt(sp, ac, av);
	case S_CTX_REMOTE:
		return stork_slurmstepd_post_opt(sp, ac, av);
	default:
		return 0;
	}
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return stork_local_exit(sp, ac, av);
	case S_CTX_REMOTE:
		return stork_slurmstepd_exit(sp, ac, av);
	default:
		return 0;
	}
}
