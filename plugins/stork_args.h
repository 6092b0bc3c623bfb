/*
 * plugins/stork_args.h - the options srun, sbatch and salloc accept:
 *   --stork-bind=MODE[,verbose]   --stork-env   --no-stork-env
 * Values are tri-state (unset until an option or environment variable sets
 * them) so the precedence is: plugstack default < STORK_BIND / STORK_ENV <
 * command line.
 */
#ifndef STORK_PLUGINS_STORK_ARGS_H
#define STORK_PLUGINS_STORK_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <slurm/spank.h>

#include "lib/bind/bind.h"
#include "plugins/plugin_args.h"

struct stork_args {
	int bind_set;		/* -1 unset, 1 set */
	enum bind_mode mode;
	bool verbose;
	int env;		/* -1 unset, 0 off, 1 on */
};

/* Register every option with Slurm. Returns the (static) values, or NULL. */
struct stork_args *stork_args_register(spank_t sp);

/*
 * Fill what the command line left unset from STORK_BIND and STORK_ENV (read
 * from the job's environment in slurmstepd, from the process's elsewhere),
 * then from the plugstack default. Returns 0, or -1 with a message naming
 * the variable, its bad value and the valid ones in err.
 */
int stork_args_resolve(spank_t sp, const struct plugin_args *plugstack, char *err, size_t errlen);

/* Forget every value (exit). */
void stork_args_reset(void);

#endif
