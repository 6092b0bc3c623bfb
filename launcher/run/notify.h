/*
 * launcher/run/notify.h - run events POSTed to a web hook (notify.url, or
 * STORK_NOTIFY_URL): started, preempted, restarted, failed, completed,
 * cancelled.
 *
 * Launcher 0 sends them from a thread of its own with a queue, so a slow or
 * absent receiver costs the run nothing: each delivery has notify.timeout
 * seconds and three tries, a failure is one log line, and at exit the
 * launcher waits at most notify.timeout for what is still queued.
 */
#ifndef STORK_LAUNCHER_NOTIFY_H
#define STORK_LAUNCHER_NOTIFY_H

#include "lib/config/stork_config.h"

#include <stdint.h>

struct notify;

/* The notifier of this run, or NULL when no URL is configured (nothing to
 * do) or it cannot start (said in the log). */
struct notify *notify_open(const struct stork_config *cfg, const char *run_dir);

/*
 * Queue event (one of notify.events' names; others are not sent) with the
 * step it happened at (-1: none), the run's reason ("" for started) and a
 * message. Never blocks on the network.
 */
void notify_event(struct notify *n, const char *event, int64_t step, const char *reason,
		  const char *message);

/* Deliver what is queued, waiting at most notify.timeout, and free n. */
void notify_close(struct notify *n);

#endif
