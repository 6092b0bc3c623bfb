/*
 * daemon/node/node.h - a node's start, shared by storkd (the training engine's
 * daemon) and storkd-program (the daemon of `stork run -- PROGRAM`): the
 * daemon's options, its stop signals, its place from the environment,
 * every local rank's binding plan, and the rendezvous with the other
 * nodes' daemons and the communicators that follow from it.
 */
#ifndef STORK_DAEMON_NODE_H
#define STORK_DAEMON_NODE_H

#include "daemon/node/join.h"
#include "daemon/engine/train/train.h"

#include <stdatomic.h>
#include <stddef.h>

struct stork_config;
struct comm_ucx;
struct comm_hier;

struct node_options {
	const char *config;
	const char *run_dir;
	int local_ranks;
	int result_fd;          /* where the launcher reads how the node ended; -1 none */
	long long job_end;      /* --job-end: the end time launcher 0 learnt; -1 not given */
	int attempt;            /* --attempt: restarts inside the job so far (restart.max_restarts) */
};

/* What differs between the two daemons' command lines. */
struct node_program {
	const char *name;              /* "storkd" */
	void (*version)(void);         /* --version */
	int (*gpus)(void);             /* --local-ranks auto: this node's GPUs (0: none) */
};

/* Parse the daemon's options (storkd(8)); -1 after a message (exit 2). */
int node_parse_options(int argc, char **argv, const struct node_program *prog,
		       struct node_options *o);

/*
 * The first stop signal's number (0: none yet) and when it came
 * (CLOCK_MONOTONIC ms), set by the handlers node_install_signals sets on
 * every signal the launcher forwards (lib/stop_signals.h): lock-free C11
 * atomics, async-signal-safe and visible across threads.
 */
extern atomic_int node_stop_requested;
extern atomic_llong node_stop_signal_ms;

/* 0, or the signal whose handler cannot be installed (errno set). */
int node_install_signals(void);

/* What the environment says of this node's place; -1 with a message naming
 * a malformed variable. */
int node_read_environment(struct train_node *node, long long job_end, char *err, size_t errlen);

/*
 * Join the other nodes (a world of one when this is the only daemon) and
 * set the node's place in the world and its communicators. check_layout,
 * when not NULL (the engine), must accept the world's layout; ranks_per_comm
 * is each node's member count in the communicators: its rank threads (0),
 * or 1 (one member per daemon, for the daemons' own agreement). Returns 0
 * or an exit code with the reason in err.
 */
int node_join(const struct node_options *o, const struct stork_config *cfg,
	      struct train_node *node, struct run_layout *layout, struct comm_ucx **ucx,
	      struct comm_hier **hier,
	      int (*check_layout)(const struct stork_config *, struct run_layout *, char *, size_t),
	      int one_per_daemon, char *err, size_t errlen);

/*
 * The node's communicators over nnodes daemons (node_join's, and
 * restart.in_place's again over the nodes that remain): node->world over
 * counts[index] local members, and over UCX (ucx, every node's worker
 * address in addrs) the global communicator into *hier when nnodes > 1;
 * node->rank_comm serves them to the ranks. 0, or an exit code with err.
 */
int node_connect(struct train_node *node, struct comm_ucx *ucx, int index, int nnodes,
		 const void *const *addrs, const int *counts, struct comm_hier **hier, char *err,
		 size_t errlen);

/*
 * A daemon's start, shared by both: UCX's peer-failure mode, the log, the
 * options, the configuration (which must run a program when program is
 * set, the engine otherwise: the other daemon serves the other kind), the
 * stop signals' handlers, then the signals unblocked. 0 with o and cfg
 * filled (config_free cfg after), or the exit code after a message.
 */
int node_start(int argc, char **argv, const struct node_program *prog, int program,
	       struct node_options *o, struct stork_config *cfg);

/* Free what node_join and the topology made (NULLs are skipped). */
void node_free(struct train_node *node, struct run_layout *layout, struct comm_ucx *ucx,
	       struct comm_hier *hier);

#endif
