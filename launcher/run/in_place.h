/*
 * launcher/run/in_place.h - restart.in_place on a launcher's side: when
 * its node's daemon died, it tells the surviving daemons (through the run
 * directory, lib/run/membership.h) so their regroup need not wait for it,
 * and this node leaves the run instead of restarting or failing it.
 */
#ifndef STORK_LAUNCHER_IN_PLACE_H
#define STORK_LAUNCHER_IN_PLACE_H

struct stork_config;

/*
 * After storkd's attempt ended with code (sig: the signal that killed it,
 * 0 none; message: its report's, may be NULL), on launcher index of launchers:
 * post what ended it for the others' regroup. 1 when the node leaves and
 * the others go on without it (its daemon died: node 0's too, whose
 * summary the first launcher that remained then writes), else 0.
 */
int in_place_leave(const struct stork_config *cfg, const char *run_dir, int index, int launchers,
		   int attempt, int code, int sig, const char *message);

#endif
