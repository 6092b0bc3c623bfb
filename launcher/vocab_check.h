/*
 * launcher/vocab_check.h - model.vocab_size against the data's shards.
 */
#ifndef STORK_LAUNCHER_VOCAB_CHECK_H
#define STORK_LAUNCHER_VOCAB_CHECK_H

#include <stddef.h>

struct stork_config;

/*
 * 0 when every local shard of data.train and data.val fits c's
 * model.vocab_size (vocab_check.c says what fits); -1 with a message in
 * err naming the key, the file and the value to set.
 */
int vocab_check(const struct stork_config *c, char *err, size_t errlen);

#endif
