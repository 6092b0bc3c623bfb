/*
 * lib/run/membership.h - how the daemons of a run agree on who is still in
 * it after a node is lost (restart.in_place), through the run directory
 * every node shares.
 *
 * A regroup has an epoch (1 for the first loss of an attempt, then 2, ...).
 * Its files, all in RUN_DIR/logs, each posted once and whole
 * (atomic_post_once; read with atomic_post_read), named by the job, its
 * requeue R and attempt A:
 *
 *   .regroup.JOB.R.A.E     the call: whoever finds a loss first posts it;
 *                          every daemon that sees it joins the regroup
 *   .member.JOB.R.A.E.K    node K is alive and in: its rank count and the
 *                          address of the UCX worker it opened for epoch E
 *   .members.JOB.R.A.E     the verdict of the lead (regroup.h): the
 *                          nodes that go on, by their launcher index
 *   .gone.JOB.R.A.K        node K's launcher: its daemon died (no regroup
 *                          need wait for it)
 *   .ready.JOB.R.A.K       restart.rejoin: the launcher the lead started in
 *                          lost node K's place waits to come in; the lead
 *                          calls the regroup that lets it in
 *
 * The summariser (launcher 0 unless it left) removes them all once every
 * node has written its record.
 */
#ifndef STORK_MEMBERSHIP_H
#define STORK_MEMBERSHIP_H

#include <stddef.h>

/* Where a run's regroup files are: the run directory and the attempt. */
struct membership_run {
	const char *run_dir;
	const char *job_id;
	int restart_count, attempt;
};

/*
 * The path of one file: kind "regroup", "member", "members" or "gone";
 * epoch and node where the kind has them (-1 where it has not). 0, or -1
 * when it does not fit in len.
 */
int membership_path(char *path, size_t len, const struct membership_run *m, const char *kind,
		    int epoch, int node);

/*
 * How a gone post that the others go on after begins: the daemon died (a
 * signal, or its node); any other ending of a daemon ends the run.
 */
#define MEMBERSHIP_DIED "storkd died"

/*
 * Node `node`'s launcher, when its daemon ended: the survivors need not
 * wait for it. why begins with MEMBERSHIP_DIED when the daemon died.
 */
void membership_post_gone(const struct membership_run *m, int node, const char *why);

/*
 * restart.rejoin: the lead starts a launcher in a lost node's place (a job
 * step of its own) with STORK_REJOIN="NODE NODES ATTEMPT EPOCH" in its
 * environment: the launcher index it takes, the run's launchers, the
 * attempt it joins and the last regroup the lead knew of.
 */
#define MEMBERSHIP_REJOIN_ENV "STORK_REJOIN"

struct membership_rejoin {
	int node, nnodes, attempt, epoch;
};

/*
 * The rejoin this process is part of: 1 (and *r) when STORK_REJOIN is
 * set, 0 when not, -1 when it does not read as one (the reason in err).
 */
int membership_rejoin_from_env(struct membership_rejoin *r, char *err, size_t errlen);

/* Remove every regroup file of run_dir (the summariser, at an attempt's end). */
void membership_remove_all(const char *run_dir);

#endif
