/*
 * daemon/program/pmix_host.h - the node's PMIx server for the ranks of
 * `stork run -- PROGRAM`, so that an MPI program (Open MPI, MPICH, mpi4py
 * over either, anything that speaks PMIx) starts as if mpirun or Slurm
 * had launched it, with every guarantee of a program run.
 *
 * storkd-program serves one namespace, the run's ranks (named with a
 * secret: PMIx's TCP handshake trusts the uid a client claims, so only a
 * process that knows the name can connect): their number, the
 * node map, each rank's node, local rank and host, the node's peers. A
 * rank gets the variables that make it a client of this server
 * (PMIx_server_setup_fork) beside torchrun's. Fences, the only collective
 * MPI asks of its launcher (MPI_Init's exchange of addresses, MPI_Finalize),
 * are carried between the nodes over Stork's own communicator, by a
 * thread of their own so that the supervisor goes on watching the ranks.
 * An MPI_Abort is kept, for the failure to name the rank and MPI's words.
 * Open MPI's shared-memory files go into a directory of the server's in
 * /dev/shm, removed with it: a killed rank's would stay there otherwise.
 *
 * Not served: fences over part of the ranks, direct modex (every fence
 * collects its data), spawn (MPI_Comm_spawn), publish and lookup
 * (MPI_Publish_name), connect: a program that needs them fails in its
 * MPI call with PMIx's "not supported".
 */
#ifndef STORK_DAEMON_PMIX_HOST_H
#define STORK_DAEMON_PMIX_HOST_H

#include <stddef.h>

struct program_run;
struct pmix_host;

/*
 * Start the server and register the run's namespace and the node's ranks.
 * Collective over the daemons (every node calls it before its ranks
 * start). 0, or -1 with a message.
 */
int pmix_host_start(struct pmix_host **out, const struct program_run *p, char *err,
		    size_t errlen);

/* Add to *env (a NULL-terminated malloc'ed array of malloc'ed strings) the
 * variables that make local rank `local` a client. 0, or -1 with a message. */
int pmix_host_rank_env(struct pmix_host *h, int local, char ***env, char *err, size_t errlen);

/* The server's directory in /dev/shm for Open MPI's shared-memory files
 * (removed with the server, even after killed ranks); NULL: none. */
const char *pmix_host_shm_dir(const struct pmix_host *h);

/*
 * The first MPI_Abort of a local rank since the start: its local index,
 * with "MPI_Abort (errorcode 3): what it said" in msg; -1 when none.
 */
int pmix_host_aborted(struct pmix_host *h, char *msg, size_t len);

/* Whether a fence is waiting for another node's ranks (at the end: they
 * left without MPI_Finalize). */
int pmix_host_fence_pending(struct pmix_host *h);

/* Stop the server and remove its directory; the fence thread must not be
 * in a collective (none pending, or the daemons' world aborted). NULL is
 * a no-op. */
void pmix_host_stop(struct pmix_host *h);

#endif
