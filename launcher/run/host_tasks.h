/*
 * launcher/run/host_tasks.h - the tasks of one host run as one launcher.
 *
 * `srun --ntasks-per-node=2 stork run` starts two launchers on each host.
 * Run apart, each would start its own storkd: the host would count as two
 * nodes in the layout, the counts, the report and exit_info, and its ranks
 * would talk over UCX instead of sharing memory. So, unless
 * parallel.merge_tasks is false, the host's first task (SLURM_LOCALID 0)
 * leads: the others (followers) tell it over a local socket how many ranks
 * each would have run, and on which cores and GPUs; the leader takes all of
 * them (cores and CUDA_VISIBLE_DEVICES widened to the union, its ranks the
 * sum), looks to the rest of Stork like the host's only task, and when the
 * run ends tells each follower the exit code to end with. The followers do
 * nothing else, so srun's exit status and Slurm's task accounting stay
 * whole. The same run as `--ntasks-per-node=1 --local-ranks 2`: same
 * layout, same bits, same transports.
 *
 * The socket is in Linux's abstract namespace, named after the user, job,
 * step and node; both ends check the peer's uid (SO_PEERCRED), since
 * another user on the host can connect to, or take, any such name.
 */
#ifndef STORK_LAUNCHER_HOST_TASKS_H
#define STORK_LAUNCHER_HOST_TASKS_H

#include <stdbool.h>
#include <stddef.h>

enum host_role {
	HOST_ALONE,    /* the host's only task, not a step, or merging is off */
	HOST_LEADER,   /* SLURM_LOCALID 0 of several: runs every rank of the host */
	HOST_FOLLOWER, /* another task of the host: waits for the leader's end */
};

struct host_tasks {
	enum host_role role;
	int ntasks;        /* the step's tasks on this host */
	int local_id;      /* SLURM_LOCALID */
	int node_id;       /* SLURM_NODEID: the host's place in the step */
	int nnodes;        /* the step's hosts */
	int listen_fd;     /* the leader's socket, -1 */
	int *followers;    /* the leader's connections, ntasks - 1 of them, -1 when closed */
	char name[108];    /* the socket's abstract name (name[0] is '\0') */
};

/*
 * This task's role from Slurm's variables (SLURM_STEP_TASKS_PER_NODE,
 * SLURM_NODEID, SLURM_LOCALID); merge: parallel.merge_tasks. Returns 0, or
 * -1 with a message when the variables contradict each other.
 */
int host_tasks_init(struct host_tasks *h, bool merge, char *err, size_t errlen);

/*
 * The leader: wait (at most timeout seconds) for every follower's offer,
 * take their cores and GPUs, and rewrite this process's Slurm variables to
 * those of one task per host (SLURM_PROCID = SLURM_NODEID, ...; PMIx's left
 * out, as the followers never join a PMIx fence). *total: the host's ranks,
 * ranks of them this task's own. Returns 0, or -1 with a message naming the
 * missing tasks.
 */
int host_tasks_gather(struct host_tasks *h, int ranks, double timeout, int *total, char *err,
		      size_t errlen);

/*
 * A follower: offer ranks (and this task's cores and GPUs) to the leader,
 * then wait for the run to end. Returns the exit code to end with: the
 * leader's, STORK_EXIT_RENDEZVOUS when no leader answered within timeout,
 * STORK_EXIT_RANK_FAILED when the leader died without one.
 */
int host_tasks_follow(struct host_tasks *h, int ranks, double timeout);

/* The leader: tell every follower code; releases h (every role). */
void host_tasks_end(struct host_tasks *h, int code);

#endif
