/*
 * daemon/engine/train/preflight_probe.h - before the first step, every rank measures
 * its device and the world its links; a node well below its peers is named,
 * and left out of the job where a majority says so (preflight.enabled,
 * preflight.tolerance in stork.yaml(5); the rules in preflight_verdict.h).
 */
#ifndef STORK_DAEMON_PREFLIGHT_PROBE_H
#define STORK_DAEMON_PREFLIGHT_PROBE_H

struct rank;
struct gpt2_config;

/*
 * Run the probes (when preflight.enabled says so) for a model of shape mc
 * and act on the verdict:
 * 0 to go on training (a slower node only named, or one that cannot be
 * left out: a warning); else the rank's exit code, the same on every rank
 * (node_lost_requeued after rank 0 requeued the job without the nodes
 * left out, preflight_failed when the job cannot be requeued); -1 when
 * preflight.enabled is only and no node was left out (the message says
 * so; no training).
 */
int preflight_run(struct rank *r, const struct gpt2_config *mc);

#endif
