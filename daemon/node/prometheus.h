/*
 * daemon/node/prometheus.h - metrics.prometheus_dir: the node's figures in
 * node_exporter's textfile format, so that a site's Prometheus scrapes its
 * training runs beside the nodes they run on.
 *
 * One file per daemon, DIR/stork_JOB_HOST_PID.prom, replaced atomically
 * every metrics.sample_s (node_exporter must never read half a file) and
 * removed when the daemon ends (a finished run exports nothing stale).
 * Every series carries job, run and host labels, the ranks' also rank:
 * their last step's number, loss, time, tokens/s, MFU (rank 0), data wait
 * and memory; the daemon's resident memory; and when it was sampled.
 */
#ifndef STORK_DAEMON_PROMETHEUS_H
#define STORK_DAEMON_PROMETHEUS_H

#include <stddef.h>

struct train_node;

struct prometheus {
	char path[4200];           /* the file; "" when metrics.prometheus_dir is empty */
	int warned;                /* a failed write was said once */
};

/* The file's path for this daemon (nothing when dir is empty). */
void prometheus_init(struct prometheus *p, const char *dir, const struct train_node *node);

/*
 * Write the node's figures for its `started` ranks (run: run.name). A
 * failure is a warning, once; the run goes on.
 */
void prometheus_write(struct prometheus *p, const struct train_node *node, const char *run,
		      int started);

/* Remove the file. */
void prometheus_end(struct prometheus *p);

#endif
