/*
 * daemon/engine/train/hang_report.h - what storkd's watchdog leaves when it finds a rank
 * stuck: where each of the node's ranks was (the collective it waits in,
 * else its phase and block), their native stacks in their rank logs, and
 * the node's records for the launcher, which explains the hang across
 * every node (lib/run/hang_explain.h).
 */
#ifndef STORK_DAEMON_HANG_REPORT_H
#define STORK_DAEMON_HANG_REPORT_H

#include <pthread.h>
#include <stddef.h>

#include "daemon/engine/train/train.h"

/* storkd, before the rank threads start: the stack signal's handler. 0 or -1. */
int hang_stacks_install(void);

/* A rank thread, as it starts: its stack goes into p when asked. */
void hang_stacks_attach(struct rank_progress *p);

/*
 * The watchdog found a rank stuck: snapshot where every rank of the node
 * is (before anything wakes them), write the node's records, ask each
 * running rank thread for its stack and write it into the rank's log, and
 * append the node's own explanation to msg (which names the stuck ranks).
 * threads[i] is local rank i's; running[i] whether it has not returned.
 */
void hang_report(const struct train_node *node, const pthread_t *threads, const int *running,
		 char *msg, size_t len);

#endif
