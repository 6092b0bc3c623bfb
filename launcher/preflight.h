/*
 * launcher/preflight.h - the checks `stork run` makes before a run directory exists.
 */
#ifndef STORK_LAUNCHER_PREFLIGHT_H
#define STORK_LAUNCHER_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct stork_config;

/* What the checks found of data.train's local shards. */
struct preflight_data {
	int shards;
	uint64_t tokens;
};

/*
 * The checks of preflight.c on configuration c; on_node: they run where
 * the ranks will (a job step, or a run outside Slurm), so this node's
 * driver counts. Returns 0 (with seen, if not NULL, counting data.train's
 * local shards), or the exit code (3 configuration, 4 data) with a
 * message in err naming the key, the file and what to do.
 */
int preflight(const struct stork_config *c, int on_node, struct preflight_data *seen, char *err,
	      size_t errlen);

#endif
