/*
 * plugins/stork_slurmstepd.h - the plugin in slurmstepd (S_CTX_REMOTE):
 * binds each task and sets its rank environment. slurm_spank_user_init and
 * slurm_spank_task_init, which Slurm calls only there, live in the .c file.
 */
#ifndef STORK_PLUGIN_SLURMSTEPD_H
#define STORK_PLUGIN_SLURMSTEPD_H

#include <slurm/spank.h>

int stork_slurmstepd_init(spank_t sp, int ac, char **av);
int stork_slurmstepd_post_opt(spank_t sp, int ac, char **av);
int stork_slurmstepd_exit(spank_t sp, int ac, char **av);

#endif
