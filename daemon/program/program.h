/*
 * daemon/program/program.h - storkd running the user's own program (`stork run --
 * PROGRAM`): the node's ranks as supervised child processes instead of
 * the engine's rank threads.
 *
 * The rest of the frame is the engine's: the launcher, the rendezvous (so
 * every node knows the world and the first host), the binding plans, the
 * result pipe and its exit codes, exit_info, restarts and requeues. What
 * differs is what a rank is: a process in its own process group, bound to
 * its plan's cores and NUMA node, with torchrun's environment
 * (daemon/program/program_env.h), its output in its rank log
 * (daemon/program/program_output.h), and a contract for stopping (stork(1),
 * RUNNING YOUR OWN PROGRAM):
 *
 *  - a rank that fails (an exit code other than 0 and 10, or a signal)
 *    ends the node's ranks (TERM, KILL after program.kill_grace) and the
 *    daemon, whose end the other daemons see (their UCX endpoints break)
 *    and follow within a second or two;
 *  - a stop (the preemption signal, TERM, the deadline guard) sends
 *    program.signal to every rank and waits program.checkpoint_grace for
 *    them to exit; 10 confirms a checkpoint; then the daemons agree (an
 *    all-reduce of one rank per daemon) and daemon 0 requeues the job;
 *  - a rank that has beaten its heartbeat once (touched
 *    STORK_HEARTBEAT_FILE, or appended to STORK_METRICS_FILE) and then
 *    stops for preempt.hang_timeout is a hang: every rank is asked for its
 *    stacks (SIGABRT; Python prints them with PYTHONFAULTHANDLER) and
 *    ended.
 */
#ifndef STORK_DAEMON_PROGRAM_H
#define STORK_DAEMON_PROGRAM_H

#include "daemon/node/join.h"
#include "daemon/engine/train/train.h"

#include <jansson.h>

struct comm;
struct comm_hier;

struct program_run {
	const struct stork_config *cfg;
	const struct train_node *node;   /* place, plans, job, stop flags */
	const struct run_layout *layout; /* every daemon's host and ranks */
	struct comm *daemons;            /* one rank per daemon; NULL when alone */
	struct comm_hier *hier;          /* watched for a daemon that died */
};

/*
 * Run the node's ranks to their end. Returns the node's exit code and, in
 * *result, the report the launcher reads (the fields of
 * daemon/node/node_result.h, and the failed rank's signal, pid, error and
 * traceback frame).
 */
int program_run(const struct program_run *p, json_t **result);

#endif
