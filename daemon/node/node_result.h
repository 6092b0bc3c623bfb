/*
 * daemon/node/node_result.h - how a node ended, as storkd tells its launcher:
 * one JSON object built from its ranks' results.
 */
#ifndef STORK_NODE_RESULT_H
#define STORK_NODE_RESULT_H

#include "daemon/engine/train/train.h"

#include <jansson.h>

/* One local rank as the report sees it. */
struct node_rank_view {
	const struct train_rank_result *result; /* its thread's until progress->done */
	const struct rank_progress *progress;
	int rank;                               /* global rank */
};

/*
 * The node's result: exit_code, last_step, the first failure (failed_rank,
 * fail_time, failed_rank_step, failed_rank_code, secondary), message,
 * checkpoint and checkpoint_step. A rank that has not said done (the
 * watchdog's path: it may still be writing its result) counts only with
 * the step of its heartbeat. message, when not NULL, overrides the ranks'
 * own. NULL when out of memory.
 */
json_t *node_result_json(int code, const struct node_rank_view *ranks, int n, const char *message);

#endif
