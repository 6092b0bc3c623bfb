/*
 * daemon/node/join.h - how a storkd joins the run: the rendezvous with the other
 * nodes' daemons and the layout of the world that follows from it.
 *
 * Each daemon contributes one blob: its host, its local rank count and
 * binding (JSON), its UCX worker address, and (launcher 0 only) the job's
 * end time, so one query to slurmctld serves the whole run and every rank
 * judges a stop against the same deadline. After the exchange every
 * daemon knows every node's ranks, so global ranks are assigned node-major
 * (node k's local rank i is the sum of the earlier nodes' counts plus i)
 * without a second round. The rendezvous itself (PMIx under
 * srun --mpi=pmix, TCP otherwise) is lib/rendezvous.
 *
 * The daemon, not the launcher, performs the rendezvous because it owns the
 * UCX worker whose address must be exchanged.
 */
#ifndef STORK_DAEMON_JOIN_H
#define STORK_DAEMON_JOIN_H

#include <stddef.h>

#include "lib/rendezvous/rendezvous.h"

struct run_node {
	char host[64];
	char machine[17];        /* lib/machine_id.h's, 16 hex digits: nodes of one machine share its cores */
	int local_ranks;
	int rank_base;
	int pid;
	long long job_end;       /* what this node learnt of the job's end; 0 = unknown */
	int warn_signo, warn_lead; /* and of its --signal=SIG@LEAD; 0 0 = none */
	struct json_t *bindings; /* JSON array of this node's ranks' bindings (jansson) */
	const void *ucx_addr;    /* inside the rendezvous result; NULL on one node */
	size_t ucx_len;
};

struct run_layout {
	int nnodes, node_index;
	int active;              /* the nodes that train: the rest wait as spares (restart.spares) */
	int world_size;          /* the ranks of the active nodes */
	struct run_node *nodes;  /* nnodes entries, in launcher order */
	const char *method;      /* "pmix", "tcp" or "local" */
	int dp, tp, pp, zero;    /* the parallel layout (0: not set) */
	int (*stage_layers)[2];  /* pp entries: each stage's layers [first, last) */
	double seconds;          /* time spent in the rendezvous */
	struct rdv_result rdv;
};

/* What this daemon tells the others. */
struct join_offer {
	int local_ranks;
	const char *bindings_json;
	const void *ucx_addr;    /* NULL, 0 in a world of one */
	size_t ucx_len;
	long long job_end;       /* the job's end time in seconds since the epoch, 0 = unknown */
	int warn_signo, warn_lead; /* the job's --signal=SIG@LEAD, 0 0 = none or unknown */
};

/*
 * Meet the other daemons of the step (a no-op world of one outside a
 * multi-launcher step). Returns 0, or an exit code (STORK_EXIT_RENDEZVOUS,
 * STORK_EXIT_CONFIG) with a message naming the missing nodes in err.
 */
int join_run(struct run_layout *l, const struct rdv_params *p, const struct join_offer *offer,
	     char *err, size_t errlen);

/*
 * Read one daemon's blob (launcher p->index's, from the rendezvous) into n
 * and check every field against what a daemon sends: host, rank count,
 * pid, job end, bindings, and the UCX address (which points into
 * p->blob). Returns 0, or -1 with a message naming the launcher.
 * n->bindings, when set (even on failure), is the caller's to release:
 * join_free does it for join_run's nodes.
 */
int join_parse_blob(const struct rdv_peer *p, struct run_node *n, char *err, size_t errlen);

/* Write run_dir/config/slurm_env.json: job, step, nodes, and every rank's
 * host, GPU, cpus and NUMA node. Returns 0 or -1 with a message. */
int join_write_slurm_env(const char *run_dir, const struct run_layout *l, char *err,
			 size_t errlen);

/*
 * restart.rejoin: the layout of the run that a launcher started in lost
 * node node_index's place comes in (the rendezvous was the others',
 * long done), from run_dir/config/slurm_env.json; no UCX addresses (it
 * waits alone until the regroup that lets it in). 0, or -1 with a message.
 */
int join_from_record(struct run_layout *l, const char *run_dir, int node_index, int nnodes,
		     char *err, size_t errlen);

void join_free(struct run_layout *l);

#endif
