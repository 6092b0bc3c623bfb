/*
 * launcher/preflight.h - the checks `stork run` makes before a run directory exists.
 */
#ifndef STORK_LAUNCHER_PREFLIGHT_H
#define STORK_LAUNCHER_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct stork_config;
struct slurm_job;

/* What the checks found of data.train's local shards. */
struct preflight_data {
	int shards;
	uint64_t tokens;
};

/*
 * The checks of preflight.c on configuration c; job: slurmctld's answer
 * about this job (NULL outside a job, or when there was none: its
 * --signal then goes unchecked); on_node: the checks run where the ranks
 * will (a job step, or a run outside Slurm), so this node's driver counts.
 * Returns 0 (with seen, if not NULL, counting data.train's local shards),
 * or the exit code (3 configuration, 4 data) with a message in err naming
 * the key, the file and what to do.
 */
int preflight(const struct stork_config *c, const struct slurm_job *job, int on_node,
	      struct preflight_data *seen, char *err, size_t errlen);

#endif
