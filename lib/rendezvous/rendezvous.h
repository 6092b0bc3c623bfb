/*
 * lib/rendezvous/rendezvous.h - every launcher of a Slurm step contributes one blob and
 * learns every launcher's blob.
 *
 * A launcher is one `stork` process of the step (one per node, or one per
 * task); its index is SLURM_PROCID. The blob is opaque here: the caller packs
 * whatever the others need (host name, local rank count, transport
 * addresses). After rdv_exchange every launcher holds the same table, indexed
 * by launcher index.
 *
 * Two ways to meet:
 *   pmix  under `srun --mpi=pmix`: PMIx_Put of the blob, Commit, a Fence that
 *         collects the data, then PMIx_Get of every other launcher's blob.
 *   tcp   otherwise: launcher 0 listens on MASTER_ADDR:MASTER_PORT (the first
 *         host of the step's node list and the port the SPANK plugin derives),
 *         the others connect, send their blob, and launcher 0 sends the full
 *         table back to everyone.
 * Both give up after a timeout with a message that names the launchers (and,
 * when Slurm's task layout tells, their hosts) that never arrived; nothing
 * ever falls back to a world of one.
 *
 * Programs that use this link lib/librendezvous.a before lib/libstork.la,
 * and $(PMIX_LIBS) $(SLURM_LIBS) (see lib/rendezvous/local.mk).
 */
#ifndef STORK_RENDEZVOUS_H
#define STORK_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

/* The SPANK plugin's defaults for MASTER_PORT (plugstack port_base, port_range). */
#define RDV_PORT_BASE 29500
#define RDV_PORT_RANGE 1000

/* The largest blob a launcher may contribute. */
#define RDV_MAX_BLOB (64u << 20)

enum rdv_method {
	RDV_AUTO = 0,	/* pmix when PMIX_RANK and PMIX_NAMESPACE are set, else tcp */
	RDV_PMIX,
	RDV_TCP,
};

struct rdv_params {
	int index;		/* this launcher, 0 <= index < count (SLURM_PROCID) */
	int count;		/* launchers in the step (SLURM_STEP_NUM_TASKS) */
	enum rdv_method method;
	char addr[256];		/* tcp: launcher 0's host (MASTER_ADDR) */
	unsigned port;		/* tcp: launcher 0's port (MASTER_PORT) */
	double timeout;		/* seconds; <= 0 means RDV_DEFAULT_TIMEOUT */
	uint32_t job_id;	/* tcp: strangers of another job or step are refused */
	uint32_t step_id;
	/* Optional, to name the hosts of missing launchers ("" when unknown):
	 * SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, SLURM_DISTRIBUTION. */
	char nodelist[4096];
	char tasks_per_node[1024];
	char distribution[64];
	/* tcp on nodes without munged: the job's secret, a 0600 file of the
	 * job's user (RUN_DIR/config/rendezvous.key); "" = munge or nothing */
	char secret_file[4096];
};

#define RDV_DEFAULT_TIMEOUT 300.0

struct rdv_peer {
	int index;
	void *blob;		/* len bytes; never NULL, even for len 0 */
	size_t len;
};

struct rdv_result {
	int n;			/* = params.count */
	struct rdv_peer *peers;	/* peers[i].index == i */
	const char *method;	/* "pmix", "tcp" or "local" (count 1) */
	double seconds;		/* time spent in rdv_exchange */
};

/*
 * Fill p from the environment of a Slurm task: index and count (SLURM_PROCID,
 * SLURM_STEP_NUM_TASKS), job and step ids, the node list and task layout, and
 * the tcp address: MASTER_ADDR / MASTER_PORT when set (the plugin's), else the
 * first host of SLURM_STEP_NODELIST and bind_master_port(job, step,
 * RDV_PORT_BASE, RDV_PORT_RANGE). Outside a Slurm step: index 0 of 1.
 * method and timeout are copied from the arguments. Returns 0, or -1 with a
 * message in err (a malformed variable, named).
 */
int rdv_params_from_env(struct rdv_params *p, enum rdv_method method, double timeout,
			char *err, size_t errlen);

/*
 * Contribute blob (len bytes, may be 0) and learn every launcher's blob.
 * Blocks until all p->count launchers have called it or p->timeout passes.
 * Returns 0 with out filled (release with rdv_result_free), or -1 with a
 * message in err that names what failed: on timeout the missing launchers
 * (and their hosts when known), or that launcher 0 never answered. The caller
 * then exits with STORK_EXIT_RENDEZVOUS. May be called several times; under
 * PMIx the connection stays open until rdv_finalize.
 */
int rdv_exchange(const struct rdv_params *p, const void *blob, size_t len,
		 struct rdv_result *out, char *err, size_t errlen);

void rdv_result_free(struct rdv_result *r);

/* Close the PMIx connection if rdv_exchange opened one; harmless otherwise. */
void rdv_finalize(void);

/* "auto" | "pmix" | "tcp" -> method. Returns 0, or -1 for anything else. */
int rdv_method_parse(const char *s, enum rdv_method *m);

/*
 * The rendezvous of restart `attempt` (restart.max_restarts) inside the same
 * step: PMIx's fence belongs to the step's first processes, so a restarted
 * daemon meets over tcp, on the port after the last attempt's (so that no
 * stranger of an earlier attempt is taken for a launcher of this one).
 * Attempt 0 leaves p as it is.
 */
void rdv_params_for_attempt(struct rdv_params *p, unsigned attempt);

/*
 * The host of launcher `index` from the step's node list, its tasks per node
 * ("2(x3),1") and distribution ("block", "cyclic", optionally ":..."; "" means
 * block). Returns 0, or -1 when the layout does not tell (plane, arbitrary,
 * malformed, index out of range).
 */
int rdv_task_host(const char *nodelist, const char *tasks_per_node, const char *distribution,
		  int index, char *buf, size_t len);

#endif
