/* daemon/program/pmix_host.c - see pmix_host.h. */
#include "config.h"
#include "daemon/program/pmix_host.h"

#include "daemon/program/program.h"
#include "lib/bind/topology.h"
#include "lib/bounded.h"
#include "lib/comm/comm.h"
#include "lib/io/atomic_file.h"
#include "lib/rendezvous/rendezvous.h"

#include <errno.h>
#include <stdarg.h>
#include <pmix.h>
#include <pmix_server.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* What the fence thread does next: a fence, or a callback PMIx waits for. */
struct job {
	struct job *next;
	pmix_modex_cbfunc_t fence_done; /* a fence: data is this node's part */
	char *data;
	size_t ndata;
	pmix_op_cbfunc_t op_done;       /* else an operation to confirm */
	void *cbdata;
};

struct pmix_host {
	const struct program_run *p;
	char dir[256];                  /* the server's directory (its socket), 0700 */
	char shm[256];                  /* Open MPI's shared-memory files, 0700; "" none */
	char nspace[PMIX_MAX_NSLEN + 1];
	struct comm *fences;            /* the daemons, for this thread alone; NULL: one node */
	pthread_t thread;
	int thread_up;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct job *jobs, **jobs_end;   /* oldest first */
	int busy;                       /* the thread is in a fence */
	int stopping;
	int abort_local;                /* the first MPI_Abort: its local rank, -1 none */
	char abort_msg[512];
	int server_up;
};

/* PMIx's upcalls carry no pointer of ours: one server per process. */
static struct pmix_host *the_host;

/* ---------------------------------------------------------- the thread */

static void queue(struct pmix_host *h, struct job *j)
{
	pthread_mutex_lock(&h->lock);
	*h->jobs_end = j;
	h->jobs_end = &j->next;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
}

static void release_data(void *data)
{
	free(data);
}

/*
 * Every node's part of the fence, in node order: the parts' lengths, then
 * the parts padded to the longest. NULL with *n 0 on a failed exchange.
 */
static char *gather(struct pmix_host *h, const char *data, size_t ndata, size_t *n)
{
	int nodes = h->p->layout->nnodes;
	int64_t mine = (int64_t)ndata, *lens = calloc((size_t)nodes, sizeof *lens), longest = 0;
	char *pad = NULL, *all = NULL, *out = NULL;
	size_t used = 0;

	*n = 0;
	if (!lens || comm_allgather(h->fences, &mine, lens, 1, COMM_INT64) < 0)
		goto out;
	for (int k = 0; k < nodes; k++)
		longest = lens[k] > longest ? lens[k] : longest;
	pad = calloc(1, (size_t)longest + 1);
	all = malloc((size_t)nodes * (size_t)longest + 1);
	out = malloc((size_t)nodes * (size_t)longest + 1);
	if (!pad || !all || !out)
		goto out;
	if (ndata)
		memcpy(pad, data, ndata);
	/* a fence without data (MPI_Finalize's) is a barrier: the lengths were it */
	if (longest && comm_allgather(h->fences, pad, all, (size_t)longest, COMM_UINT8) < 0)
		goto out;
	for (int k = 0; k < nodes; k++) {
		memcpy(out + used, all + (size_t)k * (size_t)longest, (size_t)lens[k]);
		used += (size_t)lens[k];
	}
	*n = used;
	free(lens);
	free(pad);
	free(all);
	return out;
out:
	free(lens);
	free(pad);
	free(all);
	free(out);
	return NULL;
}

static void run_job(struct pmix_host *h, struct job *j)
{
	size_t n = 0;
	char *all;

	if (j->op_done) {
		j->op_done(PMIX_SUCCESS, j->cbdata);
		return;
	}
	if (!h->fences) {
		/* one node: its ranks' data is all of it; PMIx frees it through us */
		j->fence_done(PMIX_SUCCESS, j->data, j->ndata, j->cbdata, release_data, j->data);
		j->data = NULL;
		return;
	}
	if ((all = gather(h, j->data, j->ndata, &n)))
		j->fence_done(PMIX_SUCCESS, all, n, j->cbdata, release_data, all);
	else
		j->fence_done(PMIX_ERROR, NULL, 0, j->cbdata, NULL, NULL);
}

static void *fence_thread(void *arg)
{
	struct pmix_host *h = arg;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct job *j;

		while (!h->jobs && !h->stopping)
			pthread_cond_wait(&h->wake, &h->lock);
		/* a fence left at the end would wait for ranks that are gone */
		if (h->stopping)
			break;
		j = h->jobs;
		h->jobs = j->next;
		if (!h->jobs)
			h->jobs_end = &h->jobs;
		h->busy = j->fence_done != NULL;
		pthread_mutex_unlock(&h->lock);
		run_job(h, j);
		free(j->data);
		free(j);
		pthread_mutex_lock(&h->lock);
		h->busy = 0;
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* ------------------------------------------------- what PMIx asks of us */

static pmix_status_t fence_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
			      size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
			      void *cbdata)
{
	struct pmix_host *h = the_host;
	struct job *j;

	(void)info;
	(void)ninfo;
	/* the whole namespace only: a fence over some ranks is not served */
	if (!h || nprocs != 1 || procs[0].rank != PMIX_RANK_WILDCARD ||
	    strcmp(procs[0].nspace, h->nspace))
		return PMIX_ERR_NOT_SUPPORTED;
	if (!(j = calloc(1, sizeof *j)) || (ndata && !(j->data = malloc(ndata)))) {
		free(j);
		return PMIX_ERR_NOMEM;
	}
	if (ndata)
		memcpy(j->data, data, ndata);
	j->ndata = ndata;
	j->fence_done = cbfunc;
	j->cbdata = cbdata;
	queue(h, j);
	return PMIX_SUCCESS;
}

static pmix_status_t direct_modex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
				  pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc, (void)info, (void)ninfo, (void)cbfunc, (void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;
}

/* MPI_Abort: kept for the failure's message; the rank then exits itself. */
static pmix_status_t abort_fn(const pmix_proc_t *proc, void *server_object, int status,
			      const char msg[], pmix_proc_t procs[], size_t nprocs,
			      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct pmix_host *h = the_host;
	int local = (int)(intptr_t)server_object;
	/* Open MPI says "N/A" when its caller gave no message */
	int said = msg && *msg && strcmp(msg, "N/A");
	struct job *j;

	(void)proc, (void)procs, (void)nprocs;
	if (!h)
		return PMIX_ERR_INIT;
	pthread_mutex_lock(&h->lock);
	if (h->abort_local < 0) {
		h->abort_local = local;
		msg_format(h->abort_msg, sizeof h->abort_msg, "MPI_Abort (errorcode %d)%s%s", status,
			   said ? ": " : "", said ? msg : "");
	}
	pthread_mutex_unlock(&h->lock);
	if (!cbfunc)
		return PMIX_OPERATION_SUCCEEDED;
	if (!(j = calloc(1, sizeof *j)))
		return PMIX_ERR_NOMEM;
	j->op_done = cbfunc;
	j->cbdata = cbdata;
	queue(h, j);
	return PMIX_SUCCESS;
}

static pmix_server_module_t module = {
	.abort = abort_fn,
	.fence_nb = fence_nb,
	.direct_modex = direct_modex,
};

/* --------------------------------------------------------- registration */

/* A registration's end, waited for. */
struct wait_op {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	int done;
	pmix_status_t status;
};

static void op_done(pmix_status_t status, void *cbdata)
{
	struct wait_op *w = cbdata;

	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = 1;
	pthread_cond_signal(&w->done_cond);
	pthread_mutex_unlock(&w->lock);
}

static pmix_status_t wait_for(struct wait_op *w, pmix_status_t started)
{
	if (started != PMIX_SUCCESS)
		return started == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : started;
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->done_cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return w->status;
}

#define WAIT_OP_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, PMIX_SUCCESS }

/* Append to a malloc'ed string. 0 or -1. */
static int appendf(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int appendf(char **s, const char *fmt, ...)
{
	size_t old = *s ? strlen(*s) : 0;
	va_list ap;
	int n;
	char *t;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(t = realloc(*s, old + (size_t)n + 1)))
		return -1;
	va_start(ap, fmt);
	vsnprintf(t + old, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*s = t;
	return 0;
}

/* The layout's hosts, each once, in order; launcher k's host index in host_of[k]. */
static int distinct_hosts(const struct run_layout *l, const char **hosts, int *host_of)
{
	int n = 0;

	for (int k = 0; k < l->nnodes; k++) {
		int h = 0;

		while (h < n && strcmp(hosts[h], l->nodes[k].host))
			h++;
		if (h == n)
			hosts[n++] = l->nodes[k].host;
		host_of[k] = h;
	}
	return n;
}

/* One rank's own data (PMIX_PROC_DATA). */
static pmix_status_t add_rank(void *job, const struct run_layout *l, const int *host_of,
			      const char **hosts, int k, int local, int node_rank)
{
	pmix_rank_t rank = (pmix_rank_t)(l->nodes[k].rank_base + local), zero = 0;
	uint16_t lr = (uint16_t)node_rank;
	uint32_t app = 0, nodeid = (uint32_t)host_of[k];
	void *r = PMIx_Info_list_start();
	pmix_data_array_t arr = { 0 };
	pmix_status_t rc;

	if (!r)
		return PMIX_ERR_NOMEM;
	if ((rc = PMIx_Info_list_add(r, PMIX_RANK, &rank, PMIX_PROC_RANK)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_APPNUM, &app, PMIX_UINT32)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_APPLDR, &zero, PMIX_PROC_RANK)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_GLOBAL_RANK, &rank, PMIX_PROC_RANK)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_APP_RANK, &rank, PMIX_PROC_RANK)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_LOCAL_RANK, &lr, PMIX_UINT16)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_NODE_RANK, &lr, PMIX_UINT16)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_NODEID, &nodeid, PMIX_UINT32)) == PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_add(r, PMIX_HOSTNAME, hosts[host_of[k]], PMIX_STRING)) ==
		    PMIX_SUCCESS &&
	    (rc = PMIx_Info_list_convert(r, &arr)) == PMIX_SUCCESS) {
		rc = PMIx_Info_list_add(job, PMIX_PROC_DATA, &arr, PMIX_DATA_ARRAY);
		PMIX_DATA_ARRAY_DESTRUCT(&arr);
	}
	PMIx_Info_list_release(r);
	return rc;
}

/*
 * The namespace's information: sizes, the node and process maps, this
 * host's peers, and every rank's own. Each launcher is a node to
 * Stork, but PMIx's nodes are hosts: launchers that share one
 * (parallel.merge_tasks false) are one node with their ranks together.
 */
static pmix_status_t job_info(struct pmix_host *h, pmix_data_array_t *out)
{
	const struct run_layout *l = h->p->layout;
	const char *hosts[l->nnodes];
	int host_of[l->nnodes], nhosts = distinct_hosts(l, hosts, host_of);
	int me = host_of[l->node_index], *seen = calloc((size_t)nhosts, sizeof *seen);
	uint32_t world = (uint32_t)l->world_size, local = 0, nn = (uint32_t)nhosts;
	uint32_t nodeid = (uint32_t)me;
	char *node_list = NULL, *proc_list = NULL, *peers = NULL, *node_map = NULL, *proc_map = NULL;
	pmix_rank_t leader = PMIX_RANK_UNDEF;
	bool no = false;
	void *job = PMIx_Info_list_start();
	pmix_status_t rc = PMIX_ERR_NOMEM;

	if (!job || !seen)
		goto out;
	for (int hh = 0; hh < nhosts; hh++) {
		int first = 1;

		if (appendf(&node_list, "%s%s", hh ? "," : "", hosts[hh]) < 0 ||
		    (hh && appendf(&proc_list, ";") < 0))
			goto out;
		for (int k = 0; k < l->nnodes; k++)
			for (int i = 0; host_of[k] == hh && i < l->nodes[k].local_ranks; i++) {
				int rank = l->nodes[k].rank_base + i;

				if (appendf(&proc_list, "%s%d", first ? "" : ",", rank) < 0)
					goto out;
				first = 0;
				if (hh != me)
					continue;
				if (appendf(&peers, "%s%d", local ? "," : "", rank) < 0)
					goto out;
				if (leader == PMIX_RANK_UNDEF)
					leader = (pmix_rank_t)rank;
				local++;
			}
	}
	if ((rc = PMIx_generate_regex(node_list, &node_map)) != PMIX_SUCCESS ||
	    (rc = PMIx_generate_ppn(proc_list, &proc_map)) != PMIX_SUCCESS)
		goto out;
	if ((rc = PMIx_Info_list_add(job, PMIX_JOBID, h->nspace, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_UNIV_SIZE, &world, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_JOB_SIZE, &world, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_MAX_PROCS, &world, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_NUM_NODES, &nn, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_NODEID, &nodeid, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_HOSTNAME, hosts[me], PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_LOCAL_SIZE, &local, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_NODE_SIZE, &local, PMIX_UINT32)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_LOCAL_PEERS, peers, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_LOCALLDR, &leader, PMIX_PROC_RANK)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_NODE_MAP, node_map, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_PROC_MAP, proc_map, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_TMPDIR, h->dir, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_NSDIR, h->dir, PMIX_STRING)) ||
	    (rc = PMIx_Info_list_add(job, PMIX_SPAWNED, &no, PMIX_BOOL)))
		goto out;
	for (int k = 0; k < l->nnodes; k++)
		for (int i = 0; i < l->nodes[k].local_ranks; i++) {
			/* a rank's place among its host's ranks */
			if ((rc = add_rank(job, l, host_of, hosts, k, i, seen[host_of[k]]++)))
				goto out;
		}
	rc = PMIx_Info_list_convert(job, out);
out:
	if (job)
		PMIx_Info_list_release(job);
	free(seen);
	free(node_list);
	free(proc_list);
	free(peers);
	free(node_map);
	free(proc_map);
	return rc;
}

/* PMIx's variables of the step (storkd-program was its client for the
 * rendezvous) are not this server's. */
static void forget_step_pmix(void)
{
	extern char **environ;

	for (size_t i = 0; environ[i];) {
		if (!strncmp(environ[i], "PMIX_", 5)) {
			char name[256];

			snprintf(name, sizeof name, "%.*s", (int)strcspn(environ[i], "="), environ[i]);
			unsetenv(name);
			continue;
		}
		i++;
	}
}

static int start_server(struct pmix_host *h, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	pmix_topology_t topology = { .source = "hwloc",
				     .topology = topo_hwloc(h->p->node->topo) };
	void *opts;
	pmix_data_array_t arr = { 0 };
	pmix_status_t rc;

	if (!tmp || !*tmp || strlen(tmp) > 80)
		tmp = "/tmp";
	snprintf(h->dir, sizeof h->dir, "%s/stork-pmix.XXXXXX", tmp);
	if (!mkdtemp(h->dir)) {
		msg_format(err, errlen, "PMIx server: cannot create a directory in %s: %s", tmp,
			   strerror(errno));
		h->dir[0] = '\0';
		return -1;
	}
	snprintf(h->shm, sizeof h->shm, "/dev/shm/stork-mpi.XXXXXX");
	if (!mkdtemp(h->shm))
		h->shm[0] = '\0'; /* no /dev/shm: Open MPI's own default */
	rdv_finalize(); /* a process is a PMIx client or a server, not both */
	forget_step_pmix();
	if (!(opts = PMIx_Info_list_start()))
		return msg_format(err, errlen, "out of memory"), -1;
	rc = PMIx_Info_list_add(opts, PMIX_SERVER_TMPDIR, h->dir, PMIX_STRING);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Info_list_add(opts, PMIX_SYSTEM_TMPDIR, h->dir, PMIX_STRING);
	/* the node's topology, loaded already: PMIx would discover it again */
	if (rc == PMIX_SUCCESS && topo_hwloc(h->p->node->topo))
		rc = PMIx_Info_list_add(opts, PMIX_TOPOLOGY2, &topology, PMIX_TOPO);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Info_list_convert(opts, &arr);
	PMIx_Info_list_release(opts);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_server_init(&module, arr.array, arr.size);
	PMIX_DATA_ARRAY_DESTRUCT(&arr);
	if (rc != PMIX_SUCCESS) {
		msg_format(err, errlen, "PMIx_server_init failed: %s (set program.pmix: false to run "
			   "the program without a PMIx server)", PMIx_Error_string(rc));
		return -1;
	}
	h->server_up = 1;
	return 0;
}

static int register_ranks(struct pmix_host *h, char *err, size_t errlen)
{
	const struct train_node *n = h->p->node;
	pmix_data_array_t info = { 0 };
	struct wait_op w = WAIT_OP_INIT;
	pmix_status_t rc;

	if ((rc = job_info(h, &info)) != PMIX_SUCCESS) {
		msg_format(err, errlen, "PMIx server: cannot describe the job: %s",
			   PMIx_Error_string(rc));
		return -1;
	}
	rc = wait_for(&w, PMIx_server_register_nspace(h->nspace, n->local_ranks, info.array,
						      info.size, op_done, &w));
	PMIX_DATA_ARRAY_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS) {
		msg_format(err, errlen, "PMIx_server_register_nspace failed: %s",
			   PMIx_Error_string(rc));
		return -1;
	}
	for (int i = 0; i < n->local_ranks; i++) {
		struct wait_op c = WAIT_OP_INIT;
		pmix_proc_t proc;

		PMIX_LOAD_PROCID(&proc, h->nspace, (pmix_rank_t)(n->rank_base + i));
		rc = wait_for(&c, PMIx_server_register_client(&proc, getuid(), getgid(),
							      (void *)(intptr_t)i, op_done, &c));
		if (rc != PMIX_SUCCESS) {
			msg_format(err, errlen, "PMIx_server_register_client of rank %d failed: %s",
				   n->rank_base + i, PMIx_Error_string(rc));
			return -1;
		}
	}
	return 0;
}

/*
 * The namespace's name, the same on every node: the job, its requeue, the
 * attempt, and a secret. PMIx's TCP handshake trusts the uid a client says
 * it has, so another user of the node who reached the server's loopback
 * port could pose as a rank of a namespace it can name; this one it cannot
 * (node 0 draws it, the daemons' communicator carries it, and only the
 * ranks' environment holds it, which /proc shows to their user alone).
 */
static int name_namespace(struct pmix_host *h, char *err, size_t errlen)
{
	const struct train_node *n = h->p->node;
	unsigned char secret[16];
	char hex[2 * sizeof secret + 1];

	if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret)
		return msg_format(err, errlen, "PMIx server: getrandom: %s", strerror(errno)), -1;
	if (h->fences && comm_broadcast(h->fences, secret, sizeof secret, COMM_UINT8, 0) < 0)
		return msg_format(err, errlen, "PMIx server: cannot agree on the namespace"), -1;
	for (size_t i = 0; i < sizeof secret; i++)
		snprintf(hex + 2 * i, 3, "%02x", secret[i]);
	snprintf(h->nspace, sizeof h->nspace, "stork.%s.%d.%d.%s", n->job_id, n->restart_count,
		 n->attempt, hex);
	return 0;
}

int pmix_host_start(struct pmix_host **out, const struct program_run *p, char *err,
		    size_t errlen)
{
	struct pmix_host *h = calloc(1, sizeof *h);

	*out = NULL;
	if (!h)
		return msg_format(err, errlen, "out of memory"), -1;
	h->p = p;
	h->abort_local = -1;
	h->jobs_end = &h->jobs;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->wake, NULL);
	/* the fences' own communicator (collective: every daemon, before anything fails) */
	if (p->daemons && comm_split(p->daemons, 0, p->layout->node_index, &h->fences) < 0) {
		msg_format(err, errlen, "PMIx server: cannot make the fences' communicator");
		free(h);
		return -1;
	}
	*out = h;
	if (name_namespace(h, err, errlen) < 0)
		return -1;
	the_host = h;
	if (start_server(h, err, errlen) < 0 || register_ranks(h, err, errlen) < 0)
		return -1;
	if (pthread_create(&h->thread, NULL, fence_thread, h) != 0)
		return msg_format(err, errlen, "PMIx server: cannot start its thread"), -1;
	h->thread_up = 1;
	return 0;
}

int pmix_host_rank_env(struct pmix_host *h, int local, char ***env, char *err, size_t errlen)
{
	pmix_proc_t proc;
	pmix_status_t rc;

	PMIX_LOAD_PROCID(&proc, h->nspace, (pmix_rank_t)(h->p->node->rank_base + local));
	if ((rc = PMIx_server_setup_fork(&proc, env)) != PMIX_SUCCESS) {
		msg_format(err, errlen, "PMIx_server_setup_fork of rank %d failed: %s",
			   proc.rank, PMIx_Error_string(rc));
		return -1;
	}
	return 0;
}

const char *pmix_host_shm_dir(const struct pmix_host *h)
{
	return h && h->shm[0] ? h->shm : NULL;
}

int pmix_host_aborted(struct pmix_host *h, char *msg, size_t len)
{
	int local;

	if (!h)
		return -1;
	pthread_mutex_lock(&h->lock);
	local = h->abort_local;
	if (local >= 0)
		snprintf(msg, len, "%s", h->abort_msg);
	pthread_mutex_unlock(&h->lock);
	return local;
}

int pmix_host_fence_pending(struct pmix_host *h)
{
	int pending;

	if (!h)
		return 0;
	pthread_mutex_lock(&h->lock);
	pending = h->busy || h->jobs;
	pthread_mutex_unlock(&h->lock);
	return pending;
}

void pmix_host_stop(struct pmix_host *h)
{
	if (!h)
		return;
	if (h->thread_up) {
		pthread_mutex_lock(&h->lock);
		h->stopping = 1;
		pthread_cond_signal(&h->wake);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->thread, NULL);
	}
	if (h->server_up)
		PMIx_server_finalize(); /* purges the namespace and its clients */
	the_host = NULL;
	for (struct job *j = h->jobs, *next; j; j = next) {
		next = j->next;
		free(j->data);
		free(j);
	}
	if (h->fences)
		comm_free(h->fences);
	/* with what the program left there (Open MPI's session files) */
	if (h->dir[0])
		remove_tree(h->dir);
	if (h->shm[0])
		remove_tree(h->shm);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->wake);
	free(h);
}
