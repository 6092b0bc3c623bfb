/*
 * daemon/node/rejoin.h - restart.rejoin on the lead node: once a regroup went on
 * without a node whose host is still in the job (its daemon died, the
 * node did not), a launcher is started there again, in a job step of its
 * own inside the allocation (srun --jobid --overlap: the step that lost
 * it runs on), with the lost node's launcher index. It waits as a spare
 * until the lead lets it in at a step boundary (regroup.h), where a live
 * replica sends it the parameters and optimizer state over the network.
 *
 * The lead owns the steps it started: it reaps them as they end, and at its
 * own end waits for them a while (their ranks finish the same last step)
 * before it ends them, so that none outlives the run.
 */
#ifndef STORK_DAEMON_REJOIN_H
#define STORK_DAEMON_REJOIN_H

#include <sys/types.h>

#include "daemon/node/regroup.h"

struct rejoins {
	struct {
		pid_t pid;       /* its srun */
		int node;        /* the launcher index it takes again */
	} steps[REGROUP_MAX_LOSSES];
	int n;
};

/*
 * Start launcher `node` of nnodes again on host, with local_ranks ranks,
 * to join attempt `attempt` of the run in run_dir after regroup `epoch`.
 * 0, or -1 with the reason in err.
 */
int rejoin_start(struct rejoins *r, const char *run_dir, const char *host, int node, int nnodes,
		 int local_ranks, int attempt, int epoch, char *err, size_t errlen);

/*
 * A step that ended since the last call: the launcher index it took
 * (*status its srun's wait status), or -1 when none did.
 */
int rejoin_reap(struct rejoins *r, int *status);

/*
 * At the daemon's end: the steps of rejoiners that came in (g's members)
 * get wait_s seconds to end with the run; then, and at once for those
 * that never came in, a TERM.
 */
void rejoin_end(struct rejoins *r, const struct regroup *g, double wait_s);

#endif
