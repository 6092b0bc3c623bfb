/* daemon/node/node.c - see node.h. */
#include "config.h"
#include "daemon/node/node.h"

#include "lib/bind/bind.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/env_number.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/rendezvous/rendezvous.h"
#include "lib/rendezvous/rendezvous_auth.h"
#include "lib/run/membership.h"
#include "lib/slurm/slurm_job.h"
#include "lib/stop_signals.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"
#include "lib/bind/topology.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The first stop signal's number (0: none yet), set by the handler and read
 * by every rank thread: a lock-free C11 atomic is both async-signal-safe
 * and visible across threads. */
atomic_int node_stop_requested;

/* When the first stop signal came (CLOCK_MONOTONIC ms; 0: none yet): a
 * cancelled job has KillWait seconds from then until Slurm's KILL. */
atomic_llong node_stop_signal_ms;

static void on_stop_signal(int sig)
{
	long long none = 0;
	int first = 0;

	/* clock_gettime is async-signal-safe */
	atomic_compare_exchange_strong(&node_stop_signal_ms, &none,
				       (long long)(clock_monotonic() * 1e3));
	atomic_compare_exchange_strong(&node_stop_requested, &first, sig);
}

/* HUP: a terminal hung up, or a person sent it; the run goes on, and says
 * so with one write (stdio is not async-signal-safe). */
static void on_ignored_signal(int sig)
{
	static const char line[] = "storkd: SIGHUP ignored: a hang-up does not stop a run "
				   "(stork(1), SIGNALS); send TERM or USR1 to stop it with a "
				   "checkpoint\n";
	int saved = errno;
	ssize_t n = write(STDERR_FILENO, line, sizeof line - 1);

	(void)sig;
	(void)n; /* a line that cannot be written has nowhere else to go */
	errno = saved;
}

static int parse_int(const char *opt, const char *s, int min, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end || v < min || v > 1 << 20) {
		stork_error("%s: '%s' is not an integer >= %d", opt, s, min);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* --local-ranks: a number, or auto: the GPUs this node shows us, or 1 without. */
static int parse_local_ranks(const struct node_program *prog, const char *s, int *out)
{
	int gpus;

	if (strcmp(s, "auto"))
		return parse_int("--local-ranks", s, 1, out);
	gpus = prog->gpus();
	*out = gpus > 0 ? gpus : 1;
	return 0;
}

/* A time in seconds since the epoch (0 allowed). */
static int parse_seconds(const char *opt, const char *s, long long *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (*s == '\0' || *end || v < 0) {
		stork_error("%s: '%s' is not a time in seconds since the epoch", opt, s);
		return -1;
	}
	*out = v;
	return 0;
}

static void usage(const struct node_program *prog, FILE *out)
{
	fprintf(out,
		"usage: %s --config FILE --run-dir DIR [--local-ranks N|auto] [--result-fd FD]\n"
		"              [--job-end SECONDS] [--attempt N]\n"
		"       %s --version\n"
		"%s is started by 'stork run'; see storkd(8).\n", prog->name, prog->name, prog->name);
}

int node_parse_options(int argc, char **argv, const struct node_program *prog,
		       struct node_options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "local-ranks", required_argument, NULL, 'l' },
		{ "result-fd", required_argument, NULL, 'f' },
		{ "job-end", required_argument, NULL, 'e' },
		{ "attempt", required_argument, NULL, 'a' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct node_options){ .local_ranks = 1, .result_fd = -1, .job_end = -1 };
	while ((c = getopt_long(argc, argv, "Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 'd': o->run_dir = optarg; break;
		case 'l': if (parse_local_ranks(prog, optarg, &o->local_ranks)) return -1; break;
		case 'a': if (parse_int("--attempt", optarg, 0, &o->attempt)) return -1; break;
		case 'f': if (parse_int("--result-fd", optarg, 0, &o->result_fd)) return -1; break;
		case 'e': if (parse_seconds("--job-end", optarg, &o->job_end)) return -1; break;
		case 'V': prog->version(); exit(STORK_EXIT_OK);
		case 'h': usage(prog, stdout); exit(STORK_EXIT_OK);
		default: usage(prog, stderr); return -1;
		}
	}
	if (optind < argc || !o->config || !o->run_dir) {
		usage(prog, stderr);
		return -1;
	}
	return 0;
}

/*
 * A handler for every signal the launcher forwards (lib/stop_signals.h):
 * the stop, or HUP's line. 0, or the signal whose handler cannot be
 * installed (errno set).
 */
int node_install_signals(void)
{
	struct sigaction sa = { .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < STOP_SIGNAL_COUNT; i++) {
		int sig = stop_signal_list[i];

		sa.sa_handler = stop_signal_stops(sig) ? on_stop_signal : on_ignored_signal;
		if (sigaction(sig, &sa, NULL) < 0)
			return sig;
	}
	return 0;
}

/*
 * More ranks than allowed cores (several ranks per core on a small
 * machine): rank i takes the (i mod n)-th allowed PU with one thread, so
 * every rank still computes with a fixed thread count and the results do
 * not depend on how the ranks were spread.
 */
static int plan_oversubscribed(const struct train_node *node, hwloc_const_cpuset_t allowed, int i,
			       struct bind_plan *plan)
{
	int n = hwloc_bitmap_weight(allowed), pu = hwloc_bitmap_first(allowed);

	if (n <= 0)
		return -1;
	for (int k = 0; k < i % n; k++)
		pu = hwloc_bitmap_next(allowed, pu);
	memset(plan, 0, sizeof *plan);
	plan->mode = BIND_CORES;
	plan->gpu = plan->gpu_index = -1;
	plan->cpuset = hwloc_bitmap_alloc();
	if (!plan->cpuset)
		return -1;
	hwloc_bitmap_only(plan->cpuset, (unsigned)pu);
	plan->numa = topo_numa_of(node->topo, plan->cpuset);
	plan->omp_threads = 1;
	snprintf(plan->note, sizeof plan->note, "%d ranks share %d cpus", node->local_ranks, n);
	return 0;
}

/* Every local rank's binding plan, and the same as JSON for slurm_env.json. */
static int plan_bindings(struct train_node *node, char **json_out, char *err, size_t errlen)
{
	hwloc_cpuset_t allowed = hwloc_bitmap_alloc();
	json_t *plans = json_array();
	int rc = 0;

	node->plans = calloc((size_t)node->local_ranks, sizeof *node->plans);
	if (!node->plans || !allowed || !plans) {
		snprintf(err, errlen, "out of memory");
		hwloc_bitmap_free(allowed);
		json_decref(plans);
		return -1;
	}
	/* The cores the launcher (and Slurm or the plugin before it) allowed. */
	hwloc_get_cpubind(topo_hwloc(node->topo), allowed, HWLOC_CPUBIND_PROCESS);
	for (int i = 0; i < node->local_ranks && rc == 0; i++) {
		struct bind_request req = { .mode = BIND_AUTO, .allowed = allowed,
					    .ntasks = node->local_ranks, .task = i };
		char cpus[256];

		rc = bind_plan_compute(node->topo, &req, &node->plans[i], err, errlen);
		if (rc < 0) {
			if (i == 0)
				stork_warn("%s; sharing cores instead", err);
			rc = plan_oversubscribed(node, allowed, i, &node->plans[i]);
		}
		if (rc < 0)
			break;
		bind_cpuset_format(node->plans[i].cpuset, cpus, sizeof cpus);
		json_array_append_new(plans, json_pack("{s:i, s:i, s:s, s:i, s:i}", "local_rank", i,
							"gpu", node->plans[i].gpu, "cpus", cpus,
							"numa", node->plans[i].numa,
							"threads", node->plans[i].omp_threads));
	}
	hwloc_bitmap_free(allowed);
	*json_out = rc == 0 ? sj_compact(plans) : NULL;
	json_decref(plans);
	return rc == 0 && *json_out ? 0 : -1;
}

/* The communicator of a local rank: in-node only, or across nodes. */
static struct comm *world_comm(void *arg, int local)
{
	return comm_world_rank(arg, local);
}

static struct comm *hier_comm(void *arg, int local)
{
	return comm_hier_rank(arg, local);
}

#ifdef STORK_FAULT_INJECTION
/* STORK_FAULT_JOB_SIGNAL=SIG@LEAD: a pretend sbatch --signal, for tests outside Slurm. */
static int fake_job_signal(const char *text, struct train_node *node, char *err, size_t errlen)
{
	char name[16];
	int lead;

	if (sscanf(text, "%15[A-Z0-9]@%d", name, &lead) != 2 || lead < 0)
		goto bad;
	for (int sig = 1; sig < 65; sig++)
		if (sigabbrev_np(sig) && !strcmp(sigabbrev_np(sig), name)) {
			node->warn_signo = sig;
			node->warn_lead = lead;
			return 0;
		}
bad:
	snprintf(err, errlen, "STORK_FAULT_JOB_SIGNAL=%s: not SIG@SECONDS (USR1@120)", text);
	return -1;
}
#endif

/* What the environment says of this node's place; -1 with a message naming
 * a malformed variable. */
int node_read_environment(struct train_node *node, long long job_end, char *err, size_t errlen)
{
	long long restarts, stop_at, procid, fake_end = 0;
	const char *s;

	gethostname(node->host, sizeof node->host - 1);
	s = getenv("SLURM_JOB_ID");
	snprintf(node->job_id, sizeof node->job_id, "%s", s && *s ? s : "local");
	if (env_number("SLURM_RESTART_COUNT", 0, INT_MAX, 0, &restarts, err, errlen) < 0 ||
	    env_number("STORK_STOP_AT_STEP", 0, LLONG_MAX, 0, &stop_at, err, errlen) < 0 ||
	    env_number("SLURM_PROCID", 0, INT_MAX, 0, &procid, err, errlen) < 0)
		return -1;
#ifdef STORK_FAULT_INJECTION
	if (env_number("STORK_FAULT_JOB_END", 0, INT_MAX, 0, &fake_end, err, errlen) < 0)
		return -1;
#endif
	node->restart_count = (int)restarts;
	node->stop_at_step = stop_at;
#ifdef STORK_FAULT_INJECTION
	s = getenv("STORK_FAULT_STALL");
	if (s && sscanf(s, "%d:%d", &node->stall_rank, &node->stall_step) == 2)
		stork_warn("fault injection: local rank %d will stall at step %d", node->stall_rank,
			   node->stall_step + 1);
	node->step_delay = fault_seconds("STORK_FAULT_STEP_DELAY");
	if (node->step_delay > 0)
		stork_warn("fault injection: every step takes %.3f s longer", node->step_delay);
#endif
	node->slurm_job = slurm_job_id_from_env();
	/* One query for the whole run: launcher 0 asks slurmctld and passes the
	 * answer (--job-end), the rendezvous hands it to every node (see join()).
	 * A storkd started by hand as launcher 0 asks itself. */
	if (job_end >= 0) {
		node->job_end_time = (time_t)job_end;
	} else if (node->slurm_job && procid == 0) {
		struct slurm_job job;
		char why[512];

		if (slurm_job_query(node->slurm_job, &job, why, sizeof why) == 0)
			node->job_end_time = job.end_time;
		else
			stork_warn("%s", why);
	}
	/* the TERM at the time limit leaves KillWait seconds: rank 0, on
	 * launcher 0, decides whether a checkpoint still fits */
	node->kill_wait = node->slurm_job && procid == 0 ? slurm_kill_wait() : -1;
	/* the job's --signal tells its time-limit signal from a person's (join()
	 * hands launcher 0's answer to every node) */
	if (node->slurm_job && procid == 0 &&
	    slurm_job_signal(node->slurm_job, &node->warn_signo, &node->warn_lead) < 0)
		node->warn_signo = node->warn_lead = 0;
	/* a pretend time limit N seconds from now, and a pretend --signal=SIG@LEAD,
	 * for tests outside Slurm */
	if (fake_end > 0)
		node->job_end_time = time(NULL) + fake_end;
#ifdef STORK_FAULT_INJECTION
	if ((s = getenv("STORK_FAULT_JOB_SIGNAL")) && fake_job_signal(s, node, err, errlen) < 0)
		return -1;
#endif
	return 0;
}

int node_connect(struct train_node *node, struct comm_ucx *ucx, int index, int nnodes,
		 const void *const *addrs, const int *counts, struct comm_hier **hier, char *err,
		 size_t errlen)
{
	int rc;

	node->world = comm_world_create(counts[index]);
	if (!node->world) {
		snprintf(err, errlen, "out of memory");
		return STORK_EXIT_INTERNAL;
	}
	node->rank_comm = world_comm;
	node->rank_comm_arg = node->world;
	if (nnodes == 1)
		return 0;
	rc = comm_hier_create(node->world, ucx, index, nnodes, addrs, counts, hier);
	if (rc < 0) {
		snprintf(err, errlen, "cannot connect %s to the other nodes over UCX: %s", node->host,
			 comm_strerror(rc));
		return STORK_EXIT_RANK_FAILED;
	}
	node->rank_comm = hier_comm;
	node->rank_comm_arg = *hier;
	return 0;
}

/*
 * restart.spares (the engine's): the step's last launchers wait, and the
 * world is the others' ranks. 0, or the exit code of a step with none left
 * to train.
 */
static int keep_spares(const struct stork_config *cfg, struct run_layout *layout,
		       int one_per_daemon, char *err, size_t errlen)
{
	int spares = one_per_daemon ? 0 : cfg->restart.spares;

	layout->active = layout->nnodes - spares;
	if (layout->active < 1) {
		snprintf(err, errlen, "%s: restart.spares: %d of the step's %d launcher(s): none "
			 "would train", config_origin(cfg, "restart.spares"), spares, layout->nnodes);
		return STORK_EXIT_CONFIG;
	}
	layout->world_size = 0;
	for (int k = 0; k < layout->active; k++)
		layout->world_size += layout->nodes[k].local_ranks;
	return 0;
}

/*
 * Join the other nodes (a world of one when this is the only daemon), then
 * set the node's place in the world and its communicators. The engine's
 * communicators have one member per rank thread; a run of the user's own
 * program has one per daemon, for the daemons' own agreement.
 */
/* Meet the other daemons of the step (join.h): the layout, and the UCX worker opened for it. */
static int meet(const struct node_options *o, const struct stork_config *cfg,
		struct train_node *node, struct run_layout *layout, struct comm_ucx **ucx,
		const char *bindings, int one_per_daemon, char *err, size_t errlen)
{
	const void *addr = NULL;
	size_t addr_len = 0;
	struct rdv_params p;
	int code;

	if (rdv_params_from_env(&p, RDV_AUTO, cfg->run.rendezvous_timeout, err, errlen) < 0)
		return STORK_EXIT_CONFIG;
	rdv_params_for_attempt(&p, (unsigned)o->attempt);
	/* where munged does not answer, the job's secret stands in for it
	 * (lib/rendezvous/rendezvous_auth.h): launcher 0 makes it, the others wait for it */
	snprintf(p.secret_file, sizeof p.secret_file, "%s/config/rendezvous.key", o->run_dir);
	if (p.index == 0 && p.count > 1 && rdv_auth_make_secret(p.secret_file, err, errlen) < 0)
		stork_warn("%s: the TCP rendezvous needs munged", err);
	if (p.count > 1 && comm_ucx_open(ucx, &addr, &addr_len) < 0) {
		snprintf(err, errlen, "cannot open UCX on %s", node->host);
		return STORK_EXIT_INTERNAL;
	}
	{
		struct join_offer offer = { .local_ranks = node->local_ranks, .bindings_json = bindings,
					    .ucx_addr = addr, .ucx_len = addr_len,
					    .job_end = (long long)node->job_end_time,
					    .warn_signo = node->warn_signo, .warn_lead = node->warn_lead };

		code = join_run(layout, &p, &offer, err, errlen);
	}
	return code ? code : keep_spares(cfg, layout, one_per_daemon, err, errlen);
}

/*
 * restart.rejoin: a launcher that the lead started in a lost node's place
 * meets nobody: the run's layout is on record, and it waits as a spare
 * until the regroup that lets it in.
 */
static int rejoin(const struct node_options *o, const struct membership_rejoin *r,
		  struct train_node *node, struct run_layout *layout, char *err, size_t errlen)
{
	if (join_from_record(layout, o->run_dir, r->node, r->nnodes, err, errlen) < 0)
		return STORK_EXIT_CONFIG;
	if (layout->nodes[r->node].local_ranks != node->local_ranks) {
		snprintf(err, errlen, "restart.rejoin: launcher %d of the run had %d rank(s), this "
			 "one %d", r->node, layout->nodes[r->node].local_ranks, node->local_ranks);
		return STORK_EXIT_CONFIG;
	}
	node->rejoining = 1;
	node->rejoin_epoch = r->epoch;
	return 0;
}

/*
 * Join the other nodes (a world of one when this is the only daemon), then
 * set the node's place in the world and its communicators. The engine's
 * communicators have one member per rank thread; a run of the user's own
 * program has one per daemon, for the daemons' own agreement.
 */
int node_join(const struct node_options *o, const struct stork_config *cfg,
	      struct train_node *node, struct run_layout *layout, struct comm_ucx **ucx,
	      struct comm_hier **hier,
	      int (*check_layout)(const struct stork_config *, struct run_layout *, char *, size_t),
	      int one_per_daemon, char *err, size_t errlen)
{
	struct membership_rejoin r;
	char *bindings = NULL;
	int code, rejoining = membership_rejoin_from_env(&r, err, errlen);

	if (rejoining < 0)
		return STORK_EXIT_CONFIG;
	if (rejoining && one_per_daemon) {
		snprintf(err, errlen, "restart.rejoin: a run of a program has no lost node to take "
			 "the place of");
		return STORK_EXIT_CONFIG;
	}
	if (plan_bindings(node, &bindings, err, errlen) < 0)
		return STORK_EXIT_CONFIG;
	code = rejoining ? rejoin(o, &r, node, layout, err, errlen) :
			   meet(o, cfg, node, layout, ucx, bindings, one_per_daemon, err, errlen);
	free(bindings);
	if (code)
		return code;
	node->spare = rejoining || layout->node_index >= layout->active;
	node->job_end_time = (time_t)layout->nodes[0].job_end; /* the run's one deadline */
	node->warn_signo = layout->nodes[0].warn_signo;
	node->warn_lead = layout->nodes[0].warn_lead;
	node->node_rank = layout->node_index;
	node->rank_base = layout->nodes[layout->node_index].rank_base;
	node->world_size = layout->world_size;
	if (check_layout && (code = check_layout(cfg, layout, err, errlen)))
		return code;
	{
		const void **addrs = calloc((size_t)layout->nnodes, sizeof *addrs);
		int *counts = calloc((size_t)layout->nnodes, sizeof *counts);

		for (int i = 0; addrs && counts && i < layout->nnodes; i++) {
			addrs[i] = layout->nodes[i].ucx_addr;
			counts[i] = one_per_daemon ? 1 : layout->nodes[i].local_ranks;
		}
		code = STORK_EXIT_INTERNAL;
		snprintf(err, errlen, "out of memory");
		/* a spare waits alone until it takes a lost node's place */
		if (addrs && counts && node->spare)
			code = node_connect(node, NULL, 0, 1, addrs, &counts[layout->node_index], hier,
					    err, errlen);
		else if (addrs && counts)
			code = node_connect(node, *ucx, layout->node_index, layout->active, addrs,
					    counts, hier, err, errlen);
		free(addrs);
		free(counts);
		if (code)
			return code;
	}
	if (layout->node_index == 0 && !node->rejoining &&
	    join_write_slurm_env(o->run_dir, layout, err, errlen) < 0)
		stork_warn("%s", err);
	if (node->rejoining)
		stork_info("launcher %d of %d on %s: %d rank(s) back in a lost node's place, waiting "
			   "for a regroup to let them in (restart.rejoin)", layout->node_index,
			   layout->nnodes, node->host, node->local_ranks);
	else if (node->spare)
		stork_info("launcher %d of %d on %s: a spare of %d rank(s), waiting to take a lost "
			   "node's place (restart.spares; rendezvous: %s, %.3f s)", layout->node_index,
			   layout->nnodes, node->host, node->local_ranks, layout->method,
			   layout->seconds);
	else
		stork_info("launcher %d of %d on %s: ranks %d..%d of %d (rendezvous: %s, %.3f s)",
			   layout->node_index, layout->nnodes, node->host, node->rank_base,
			   node->rank_base + node->local_ranks - 1, node->world_size, layout->method,
			   layout->seconds);
	return 0;
}

void node_free(struct train_node *node, struct run_layout *layout, struct comm_ucx *ucx,
	       struct comm_hier *hier)
{
	if (hier)
		comm_hier_destroy(hier);
	if (node->world)
		comm_world_destroy(node->world);
	if (ucx)
		comm_ucx_close(ucx);
	join_free(layout);
	for (int i = 0; node->plans && i < node->local_ranks; i++)
		bind_plan_free(&node->plans[i]);
	free(node->plans);
	node->plans = NULL;
	if (node->topo)
		topo_free(node->topo);
	node->topo = NULL;
}

/*
 * The run's configuration says what the daemon runs (program.command): it
 * must be this user's own file, a regular one (no link), that nobody else
 * may write. 0, or -1 with err naming the file and why.
 */
static int config_file_ours(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	int rc = 0;

	if (fd < 0) {
		if (errno != ELOOP)
			return 0; /* config_load names what else is wrong */
		snprintf(err, errlen, "%s: a symbolic link: refused", path);
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen, "%s: %s: refused, nothing in it is read", path,
			 !S_ISREG(st.st_mode) ? "not a regular file" :
			 st.st_uid != geteuid() ? "another user's file" : "others may write it");
		rc = -1;
	}
	close(fd);
	return rc;
}

int node_start(int argc, char **argv, const struct node_program *prog, int program,
	       struct node_options *o, struct stork_config *cfg)
{
	char err[1024];
	int sig;

	/*
	 * UCX 1.13 aborts the whole process when a peer on the same host dies
	 * during a shared-memory transfer. The daemons keep every endpoint
	 * under peer-failure handling instead, so a dead node is an error they
	 * can report. `stork bench comm` leaves the fast same-host path on.
	 */
	if (!getenv("STORK_UCX_PEER_ONLY"))
		env_set_own("STORK_UCX_PEER_ONLY", "1");
	stork_log_init("storkd", STORK_LOG_INFO);
	if (node_parse_options(argc, argv, prog, o) < 0)
		return STORK_EXIT_USAGE;
	if (config_file_ours(o->config, err, sizeof err) < 0 ||
	    config_load(cfg, o->config, err, sizeof err) < 0 ||
	    config_validate(cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(cfg);
		return STORK_EXIT_CONFIG;
	}
	if (program != (cfg->program.command.n > 0)) {
		stork_error("%s: %s (stork run starts the right one)", o->config,
			    program ? "program.command is empty: storkd trains with the engine, "
				      "storkd-program runs a program" :
				      "program.command names a program: storkd-program runs it, "
				      "storkd trains with the engine");
		config_free(cfg);
		return STORK_EXIT_USAGE;
	}
	fault_delay("STORK_FAULT_START_DELAY"); /* a signal now must wait, not kill */
	if ((sig = node_install_signals())) {
		stork_error("cannot handle signal SIG%s: %s", sigabbrev_np(sig), strerror(errno));
		config_free(cfg);
		return STORK_EXIT_INTERNAL;
	}
	stop_signals_unblock(); /* blocked since the launcher started: see lib/stop_signals.h */
	return 0;
}
