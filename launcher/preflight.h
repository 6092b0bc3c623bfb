/*
 * launcher/preflight.h - the checks `stork run` makes before a run directory exists.
 */
#ifndef STORK_LAUNCHER_PREFLIGHT_H
#define STORK_LAUNCHER_PREFLIGHT_H

#include <stddef.h>

struct stork_config;

/*
 * 0 when run.resume_from (if set) exists and every local shard of
 * data.train and data.val fits c's model.vocab_size (preflight.c says what
 * fits); -1 with a message in err naming the key, the file and what to do.
 */
int preflight(const struct stork_config *c, char *err, size_t errlen);

#endif
