/*
 * daemon/node/regroup.h - restart.in_place: when a node's daemon dies, the
 * daemons that remain agree on who is still in the run and connect again,
 * and their rank threads go on from the step in flight.
 *
 * The rank threads and storkd's main thread meet here. A rank whose
 * collective failed parks (regroup_park) once it has let go of every
 * communicator; when all of the node's running ranks are parked, the main
 * thread runs the regroup (regroup_run) and wakes them with its verdict:
 * go on in the new world, or end as before.
 *
 * The regroup itself, between the nodes, goes through the run directory
 * (lib/run/membership.h): the call, each survivor's offer with the UCX
 * address of a fresh worker, and the lead's verdict. The lead is the
 * first node still in the run whose launcher has not said its daemon was
 * lost (regroup_lead): node 0 until it is lost, then the next, which every
 * node works out alike from the run directory. Its launcher's record
 * marks the attempt's end, and it writes the run's summary (launcher 0's,
 * or the first that remained). The verdict keeps the
 * layout whole: the lost ranks must be whole data-parallel replicas, the
 * survivors renumbered in order keep their tensor and pipeline places, and
 * train.grad_accum grows so that the global batch stays what it was.
 *
 * restart.rejoin (rejoin.h starts the launcher): a node that comes back in
 * a lost one's place waits as a spare, says when it is ready, and the lead
 * calls a regroup for it; the verdict puts it back in its own place in
 * order ("joined K"), and train.grad_accum shrinks again.
 */
#ifndef STORK_DAEMON_REGROUP_H
#define STORK_DAEMON_REGROUP_H

#include <pthread.h>
#include <stdint.h>

#include "daemon/engine/train/train.h"
#include "lib/run/membership.h"

struct comm_ucx;
struct comm_hier;
struct run_layout;
struct stork_config;
struct json_t;

#define REGROUP_MAX_LOSSES 16

/* One node that left the run and the others went on. */
struct regroup_loss {
	int node;                /* its launcher index */
	char host[64];
	int64_t step;            /* the steps done when it was lost */
	double seconds;          /* how long the regroup took */
	char why[160];           /* what its launcher said ("storkd died of SIGKILL"), or "silent" */
	char by[64];             /* the spare that took its place, "" none */
};

/* A node that came back (restart.rejoin): a launcher the lead started in its place joined. */
struct regroup_join {
	int node;                /* the launcher index it took again */
	char host[64];
	double seconds;          /* how long the regroup that let it in took */
};

/* regroup_park's and regroup_run's verdicts. */
enum { REGROUP_GO = 0, REGROUP_END = -1, REGROUP_WAIT = 1 /* a spare not needed yet */ };

struct regroup {
	pthread_mutex_t lock;
	pthread_cond_t woken;
	int parked;              /* rank threads waiting for a verdict */
	int epoch;               /* regroups decided so far */
	int verdict;             /* the last one's: 0 go on, -1 end */
	double since;            /* CLOCK_MONOTONIC when this node saw the loss; 0: none */
	double last_since;       /* the same of the last regroup, for the time it cost */
	int64_t step;            /* steps done that the ranks report as they park (the most) */
	struct membership_run files;
	int self;                /* this node's launcher index */
	int nnodes;              /* launchers at the start, spares included */
	int *alive;              /* nnodes flags: still in the run */
	int *spare;              /* nnodes flags: waiting to take a lost node's place */
	int dp_before;           /* the replicas before the last regroup */
	int accum_before;        /* and its train.grad_accum */
	struct regroup_loss losses[REGROUP_MAX_LOSSES];
	int nlosses;
	int last_first;          /* the last regroup's losses: losses[last_first .. nlosses) */
	int *rejoin;             /* nnodes flags: a launcher started in this lost node's place
				    that has not come in yet (the lead; a rejoiner: its own) */
	int ready_posted;        /* a rejoiner: it said it waits to come in */
	int decided;             /* this node decided the last regroup (it was the lead) */
	struct regroup_join joins[REGROUP_MAX_LOSSES];
	int njoins;
	int last_join_first;     /* the last regroup's joins: joins[last_join_first .. njoins) */
	char message[512];       /* the last verdict in words */
};

/*
 * restart.in_place for a daemon of nnodes launchers, the first `active`
 * of which train (the others are spares); -1 when out of memory.
 */
int regroup_init(struct regroup *g, const struct train_node *node, int nnodes, int active);
void regroup_free(struct regroup *g);

/*
 * The lead node's launcher index: the first node in the run, not a spare,
 * whose launcher has not posted that its daemon was lost; -1 none.
 */
int regroup_lead(const struct regroup *g);

/*
 * A rank thread whose collective failed, after it let go of every
 * communicator (or a spare's, from its start): wait for the main thread's
 * verdict, beating its heartbeat p meanwhile. steps_done: the updates it
 * applied (-1: a spare's, none). REGROUP_GO: go on (the node's
 * communicators and place are new), REGROUP_END, or REGROUP_WAIT (a spare
 * still not needed: park again).
 */
int regroup_park(struct regroup *g, struct rank_progress *p, int64_t steps_done);

/*
 * Main thread, now and then: whether every one of the node's running
 * ranks (started, of which `done` have returned) is parked, and so a
 * regroup is due.
 */
int regroup_due(struct regroup *g, int started, int done);

/*
 * Main thread: whether another node called a regroup that this node has
 * not joined (its ranks may still wait where no error reaches them).
 */
int regroup_called(struct regroup *g);

/*
 * Main thread of a spare: whether the run's attempt is over without it
 * (the lead's launcher wrote its node's record), or a stop signal came
 * (`stopped`); then its ranks are released with REGROUP_END.
 */
int regroup_spare_released(struct regroup *g, int stopped);

/*
 * restart.rejoin, the lead: a launcher was started in lost node `node`'s
 * place; let it in once it says it is ready (regroup_admit), or forget
 * it (its step ended before it came in).
 */
void regroup_expect(struct regroup *g, int node);
void regroup_forget(struct regroup *g, int node);

/*
 * Node 0's main thread, now and then: call a regroup when a rejoiner
 * waits to come in and the run has steps left for it. 1 when it called.
 */
int regroup_admit(struct regroup *g, int steps_left);

/*
 * The rejoiner's main thread: before its ranks start, this node is a
 * spare in its own old place and knows the regroups decided since node
 * 0 started it (from epoch on); once all its `started` ranks wait,
 * it says it is ready.
 */
void regroup_rejoining(struct regroup *g, int epoch);
void regroup_rejoin_ready(struct regroup *g, int started);

/* What the main thread hands a regroup: the node and what it connects with. */
struct regroup_node {
	struct train_node *node;
	struct stork_config *cfg;        /* train.grad_accum changes with the replicas */
	const struct run_layout *layout; /* the nodes as they joined */
	struct comm_ucx **ucx;
	struct comm_hier **hier;
	int primary;                     /* a rank of this node failed on its own: it ends */
};

/*
 * Main thread, once regroup_due: agree with the other nodes, connect
 * again, and wake the parked ranks with the verdict. Returns it (0: go on).
 */
int regroup_run(struct regroup *g, const struct regroup_node *n);

/* The losses, for the node's report to its launcher: a JSON array (new reference). */
struct json_t *regroup_losses_json(const struct regroup *g);

#endif
