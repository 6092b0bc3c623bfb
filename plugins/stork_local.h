/*
 * plugins/stork_local.h - the plugin in srun (S_CTX_LOCAL) and in sbatch and
 * salloc (S_CTX_ALLOCATOR): register the options and reject bad values
 * before a job or step is created.
 */
#ifndef STORK_PLUGIN_LOCAL_H
#define STORK_PLUGIN_LOCAL_H

#include <slurm/spank.h>

int stork_local_init(spank_t sp, int ac, char **av);
int stork_local_post_opt(spank_t sp, int ac, char **av);
int stork_local_exit(spank_t sp, int ac, char **av);

#endif
