/*
 * launcher/run/preflight.h - the checks `stork run` makes before a run directory exists.
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

/*
 * The manifest of a shard made by `stork prep --tokenizer` (DIR/NAME.manifest.json)
 * against the model (preflight_manifest.c): the tokenizer's vocabulary
 * against model_vocab (the configuration's or model.init_from's; <= 0:
 * unknown), its family against model.arch, its file against
 * model.init_from's tokenizer.json. 0 (also without a manifest), or an
 * exit code with err naming the key, the shard and both values. checked
 * (checked_len bytes, "" at first) holds the manifest checked last: the
 * shards of one prep share theirs, which is read and hashed once.
 */
int preflight_manifest(const struct stork_config *c, const char *key, const char *shard,
		       int model_vocab, char *checked, size_t checked_len, char *err,
		       size_t errlen);

#endif
