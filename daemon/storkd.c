/*
 * daemon/storkd.c - storkd, the per-node training daemon.
 *
 * Started by `stork run` (one per node, or one per task) with the resolved
 * configuration and this node's place in the world; runs one worker thread
 * per local rank (daemon/train.c) and exits with the most telling of their
 * exit codes. The signals that stop a run (lib/stop_signals.h) only set a
 * flag here (and note which came first, and when): the ranks agree on a
 * stop at the next step boundary. HUP is ignored with a line that says so.
 */
#include "config.h"
#include "daemon/checkpoint.h"
#include "daemon/join.h"
#include "daemon/layout.h"
#include "daemon/node_result.h"
#include "daemon/program.h"
#include "daemon/train.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/atomic_file.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/exit_info.h"
#include "lib/fault.h"
#include "lib/bounded.h"
#include "lib/env_number.h"
#include "lib/stork_json.h"
#include "lib/slurm_job.h"
#include "lib/log.h"
#include "lib/rendezvous_auth.h"
#include "lib/stop_signals.h"
#include "lib/stork_config.h"
#include "lib/version.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <pmix.h>
#include <ucp/api/ucp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* The first stop signal's number (0: none yet), set by the handler and read
 * by every rank thread: a lock-free C11 atomic is both async-signal-safe
 * and visible across threads. */
static atomic_int stop_requested;

/* When the first stop signal came (CLOCK_MONOTONIC ms; 0: none yet): a
 * cancelled job has KillWait seconds from then until Slurm's KILL. */
static atomic_llong stop_signal_ms;

static void on_stop_signal(int sig)
{
	long long none = 0;
	int first = 0;

	/* clock_gettime is async-signal-safe */
	atomic_compare_exchange_strong(&stop_signal_ms, &none,
				       (long long)(clock_monotonic() * 1e3));
	atomic_compare_exchange_strong(&stop_requested, &first, sig);
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

struct options {
	const char *config;
	const char *run_dir;
	int local_ranks;
	int result_fd;          /* where the launcher reads how the node ended; -1 none */
	long long job_end;      /* --job-end: the end time launcher 0 learnt; -1 not given */
	int attempt;            /* --attempt: restarts inside the job so far (restart.max_restarts) */
	int program;            /* --program: the configuration runs the user's program */
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: storkd --config FILE --run-dir DIR [--local-ranks N|auto] [--result-fd FD]\n"
		"              [--job-end SECONDS] [--attempt N] [--program|--engine]\n"
		"       storkd --version\n"
		"storkd is started by 'stork run'; see storkd(8).\n");
}

static void print_version(void)
{
	printf("storkd %s (git %s, %s)\n", stork_version(), stork_git_describe(),
	       stork_compiler());
	printf("backends: %s; %s, %d device(s) visible\n", kernels_cpu_backend_name(),
	       kernels_cuda_versions(), kernels_cuda_device_count());
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
static int parse_local_ranks(const char *s, int *out)
{
	int gpus;

	if (strcmp(s, "auto"))
		return parse_int("--local-ranks", s, 1, out);
	gpus = kernels_cuda_device_count();
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

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "local-ranks", required_argument, NULL, 'l' },
		{ "result-fd", required_argument, NULL, 'f' },
		{ "job-end", required_argument, NULL, 'e' },
		{ "attempt", required_argument, NULL, 'a' },
		{ "program", no_argument, NULL, 'P' },
		{ "engine", no_argument, NULL, 'E' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .local_ranks = 1, .result_fd = -1, .job_end = -1 };
	while ((c = getopt_long(argc, argv, "Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 'd': o->run_dir = optarg; break;
		case 'l': if (parse_local_ranks(optarg, &o->local_ranks)) return -1; break;
		case 'a': if (parse_int("--attempt", optarg, 0, &o->attempt)) return -1; break;
		case 'f': if (parse_int("--result-fd", optarg, 0, &o->result_fd)) return -1; break;
		case 'e': if (parse_seconds("--job-end", optarg, &o->job_end)) return -1; break;
		case 'P': o->program = 1; break;
		case 'E': o->program = 0; break;
		case 'V': print_version(); exit(STORK_EXIT_OK);
		case 'h': usage(stdout); exit(STORK_EXIT_OK);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc || !o->config || !o->run_dir) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/*
 * A handler for every signal the launcher forwards (lib/stop_signals.h):
 * the stop, or HUP's line. 0, or the signal whose handler cannot be
 * installed (errno set).
 */
static int install_signals(void)
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

struct worker {
	pthread_t thread;
	const struct train_node *node;
	int local;
	struct train_rank_result result;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	train_rank(w->node, w->local, &w->result);
	return NULL;
}

/*
 * How the node ended, for the launcher's exit_info: one JSON object on the
 * result pipe (daemon/node_result.c says what it holds and which ranks'
 * results it may read); message (a watchdog verdict, a failed join)
 * overrides the ranks' own.
 */
static void report_result(int fd, int code, const struct worker *w, int n, const char *message)
{
	struct node_rank_view *ranks = NULL;
	char *text = NULL;
	json_t *v = NULL;

	if (fd < 0)
		return;
	if (n > 0 && !(ranks = calloc((size_t)n, sizeof *ranks)))
		goto fail;
	for (int i = 0; i < n; i++)
		ranks[i] = (struct node_rank_view){ .result = &w[i].result,
						    .progress = &w[i].node->progress[w[i].local],
						    .rank = w[i].node->rank_base + w[i].local };
	if (!(v = node_result_json(code, ranks, n, message)) || !(text = sj_compact(v)))
		goto fail;
	/* dprintf writes the whole text, or fails: then stork says storkd
	 * ended without a report, and the reason is here in the job's output. */
	if (dprintf(fd, "%s", text) < 0)
		stork_error("cannot report the node's result to stork: %s", strerror(errno));
	goto out;
fail:
	stork_error("cannot report the node's result to stork: out of memory");
out:
	free(text);
	json_decref(v);
	free(ranks);
}

/*
 * Join the ranks; the node's exit code is the most telling of theirs,
 * where a rank that failed only because another did (secondary) never
 * outranks the cause: the reason and exit_info's first failure agree.
 */
static int ranks_exit_code(int code, struct worker *w, int n)
{
	int primary = STORK_EXIT_OK, secondary = STORK_EXIT_OK, have_primary = 0;

	for (int i = 0; i < n; i++) {
		const struct train_rank_result *r = &w[i].result;

		pthread_join(w[i].thread, NULL);
		if (r->secondary) {
			secondary = exit_code_worst(secondary, r->exit_code);
		} else {
			primary = exit_code_worst(primary, r->exit_code);
			have_primary |= r->exit_code != STORK_EXIT_OK;
		}
	}
	return exit_code_worst(code, have_primary ? primary : exit_code_worst(primary, secondary));
}

/*
 * The watchdog: a rank whose heartbeat is older than hang_timeout seconds
 * is stuck (a deadlock, a hung file system, a stalled device). Returns a
 * message naming every stuck rank and the step it reached, or NULL.
 */
static const char *find_stuck(const struct train_node *node, double timeout, char *msg, size_t len)
{
	double now = clock_monotonic();
	size_t used;
	int stuck = 0;

	if (timeout <= 0)
		return NULL;
	used = (size_t)snprintf(msg, len, "no progress for %.0f s on %s:", timeout, node->host);
	for (int i = 0; i < node->local_ranks; i++) {
		const struct rank_progress *p = &node->progress[i];

		if (p->done || now - p->beat < timeout)
			continue;
		stuck++;
		if (used < len)
			used += (size_t)snprintf(msg + used, len - used, " rank %d (at step %lld)",
						 node->rank_base + i, (long long)p->step + 1);
	}
	return stuck ? msg : NULL;
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

/* What the environment says of this node's place; -1 with a message naming
 * a malformed variable. */
static int read_environment(struct train_node *node, long long job_end, char *err,
			    size_t errlen)
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
	/* a pretend time limit N seconds from now, for tests outside Slurm */
	if (fake_end > 0)
		node->job_end_time = time(NULL) + fake_end;
	return 0;
}

/* provenance/libraries.json: the versions of what this daemon runs on. */
static void write_library_versions(const char *run_dir)
{
	char path[4200], err[512];
	json_t *v = json_pack("{s:o, s:o, s:o}", "pmix", sj_text(PMIx_Get_version()),
			      "ucx", sj_text(ucp_get_version_string()),
			      "blas", sj_text(kernels_cpu_backend_name()));

#ifdef OPENBLAS_VERSION
	if (v)
		json_object_set_new(v, "openblas_config", sj_text(openblas_get_config()));
#endif
	if (v) {
		json_object_set_new(v, "cuda", sj_text(kernels_cuda_versions()));
		json_object_set_new(v, "cuda_devices", json_integer(kernels_cuda_device_count()));
	}
	snprintf(path, sizeof path, "%s/provenance/libraries.json", run_dir);
	if (!v || sj_write_file(path, v, err, sizeof err) < 0)
		stork_warn("cannot write %s: %s", path, v ? err : "out of memory");
	json_decref(v);
}

/*
 * The parallel layout must fit the world before any rank starts: an
 * impossible one is a configuration error naming the keys and values.
 */
static int check_layout(const struct stork_config *cfg, struct run_layout *layout, char *err,
			size_t errlen)
{
	struct gpt2_config mc;
	struct par_layout l;

	if (layout_model_shape(cfg, &mc, err, errlen) < 0)
		return STORK_EXIT_DATA;
	if (layout_make(&l, &mc, layout->world_size, cfg->parallel.tensor, cfg->parallel.pipeline,
			cfg->parallel.zero, 0, err, errlen) < 0)
		return STORK_EXIT_CONFIG;
	layout->dp = l.dp;
	layout->tp = l.tp;
	layout->pp = l.pp;
	layout->zero = l.zero;
	layout->stage_layers = calloc((size_t)l.pp, sizeof *layout->stage_layers);
	for (int s = 0; layout->stage_layers && s < l.pp; s++)
		layout_stage_layers(&mc, l.pp, s, &layout->stage_layers[s][0],
				    &layout->stage_layers[s][1]);
	return 0;
}

/*
 * Join the other nodes (a world of one when this is the only daemon), then
 * set the node's place in the world and its communicators. The engine's
 * communicators have one member per rank thread; a run of the user's own
 * program has one per daemon, for the daemons' own agreement.
 */
static int join(const struct options *o, const struct stork_config *cfg, struct train_node *node,
		struct run_layout *layout, struct comm_ucx **ucx, struct comm_hier **hier,
		char *err, size_t errlen)
{
	const void *addr = NULL;
	size_t addr_len = 0;
	struct rdv_params p;
	char *bindings = NULL;
	int code, program = cfg->program.command.n > 0;

	if (plan_bindings(node, &bindings, err, errlen) < 0)
		return STORK_EXIT_CONFIG;
	if (rdv_params_from_env(&p, RDV_AUTO, cfg->run.rendezvous_timeout, err, errlen) < 0) {
		free(bindings);
		return STORK_EXIT_CONFIG;
	}
	rdv_params_for_attempt(&p, (unsigned)o->attempt);
	/* where munged does not answer, the job's secret stands in for it
	 * (lib/rendezvous_auth.h): launcher 0 makes it, the others wait for it */
	snprintf(p.secret_file, sizeof p.secret_file, "%s/config/rendezvous.key", o->run_dir);
	if (p.index == 0 && p.count > 1 && rdv_auth_make_secret(p.secret_file, err, errlen) < 0)
		stork_warn("%s: the TCP rendezvous needs munged", err);
	if (p.count > 1 && comm_ucx_open(ucx, &addr, &addr_len) < 0) {
		snprintf(err, errlen, "cannot open UCX on %s", node->host);
		free(bindings);
		return STORK_EXIT_INTERNAL;
	}
	{
		struct join_offer offer = { .local_ranks = node->local_ranks, .bindings_json = bindings,
					    .ucx_addr = addr, .ucx_len = addr_len,
					    .job_end = (long long)node->job_end_time };

		code = join_run(layout, &p, &offer, err, errlen);
	}
	free(bindings);
	if (code)
		return code;
	node->job_end_time = (time_t)layout->nodes[0].job_end; /* the run's one deadline */
	node->node_rank = layout->node_index;
	node->rank_base = layout->nodes[layout->node_index].rank_base;
	node->world_size = layout->world_size;
	if (!program && (code = check_layout(cfg, layout, err, errlen)))
		return code;
	node->world = comm_world_create(program ? 1 : node->local_ranks);
	if (!node->world) {
		snprintf(err, errlen, "out of memory");
		return STORK_EXIT_INTERNAL;
	}
	node->rank_comm = world_comm;
	node->rank_comm_arg = node->world;
	if (layout->nnodes > 1) {
		const void **addrs = calloc((size_t)layout->nnodes, sizeof *addrs);
		int *counts = calloc((size_t)layout->nnodes, sizeof *counts);
		int rc = -1;

		for (int i = 0; addrs && counts && i < layout->nnodes; i++) {
			addrs[i] = layout->nodes[i].ucx_addr;
			counts[i] = program ? 1 : layout->nodes[i].local_ranks;
		}
		if (addrs && counts)
			rc = comm_hier_create(node->world, *ucx, layout->node_index, layout->nnodes,
					      addrs, counts, hier);
		free(addrs);
		free(counts);
		if (rc < 0) {
			snprintf(err, errlen, "cannot connect %s to the other nodes over UCX: %s",
				 node->host, comm_strerror(rc));
			return STORK_EXIT_RANK_FAILED;
		}
		node->rank_comm = hier_comm;
		node->rank_comm_arg = *hier;
	}
	if (layout->node_index == 0) {
		if (join_write_slurm_env(o->run_dir, layout, err, errlen) < 0)
			stork_warn("%s", err);
		write_library_versions(o->run_dir);
	}
	stork_info("launcher %d of %d on %s: ranks %d..%d of %d (rendezvous: %s, %.3f s)",
		   layout->node_index, layout->nnodes, node->host, node->rank_base,
		   node->rank_base + node->local_ranks - 1, node->world_size, layout->method,
		   layout->seconds);
	return 0;
}

/*
 * Elastic resume: a run that comes back on another number of data-parallel
 * replicas than its checkpoint recorded (a requeue onto fewer or more
 * nodes) keeps its global batch,
 * the sequences of one optimizer step, by changing train.grad_accum, when
 * the latest checkpoint recorded it and the new width divides it. Every
 * daemon reads the same file and finds the same answer. The resolved
 * config/stork.yaml keeps the configured value; the log says which one
 * trains.
 */
static void keep_global_batch(const struct options *o, struct stork_config *cfg, int world)
{
	struct ckpt_state st;
	char dir[4200], err[512];
	int64_t per_step, B = cfg->train.batch_size;
	int dp = world / (cfg->parallel.tensor * cfg->parallel.pipeline), accum;

	if (dp < 1 || path_join(dir, sizeof dir, o->run_dir, "checkpoints/latest") < 0 ||
	    access(dir, F_OK) < 0 || ckpt_read_state(dir, &st, err, sizeof err) < 0 ||
	    st.global_batch <= 0)
		return;
	per_step = B * cfg->train.grad_accum * dp;
	if (st.global_batch == per_step)
		return;
	/* the same width: a batch or grad_accum the user changed, which stands
	 * (the ranks' resume block says so) */
	if (st.was.dp == dp)
		return;
	accum = (int)(st.global_batch / (B * dp));
	if (st.global_batch % (B * dp) || accum < cfg->parallel.pipeline) {
		stork_warn("elastic: %d data-parallel replicas of train.batch_size %lld cannot make "
			   "the checkpoint's global batch of %lld sequences; it becomes %lld",
			   dp, (long long)B, (long long)st.global_batch, (long long)per_step);
		return;
	}
	stork_warn("elastic: %d data-parallel replica(s) now: train.grad_accum %d -> %d keeps the "
		   "checkpoint's global batch of %lld sequences", dp, cfg->train.grad_accum, accum,
		   (long long)st.global_batch);
	cfg->train.grad_accum = accum;
}

/* `stork run -- PROGRAM`: the ranks are the program's processes (daemon/program.c). */
static int run_program(const struct options *o, const struct stork_config *cfg,
		       const struct train_node *node, const struct run_layout *layout,
		       struct comm_hier *hier)
{
	struct program_run p = {
		.cfg = cfg, .node = node, .layout = layout, .hier = hier,
		.daemons = layout->nnodes > 1 ? node->rank_comm(node->rank_comm_arg, 0) : NULL,
	};
	json_t *result = NULL;
	char *text;
	int code = program_run(&p, &result);

	if (o->result_fd >= 0 && result && (text = sj_compact(result))) {
		if (dprintf(o->result_fd, "%s", text) < 0)
			stork_error("cannot report the node's result to stork: %s", strerror(errno));
		free(text);
	}
	json_decref(result);
	return code;
}

static int run(const struct options *o, struct stork_config *cfg)
{
	struct train_node node = {
		.cfg = cfg, .run_dir = o->run_dir, .local_ranks = o->local_ranks,
		.world_size = o->local_ranks, .attempt = o->attempt, .stop_requested = &stop_requested,
		.stop_signal_ms = &stop_signal_ms, .stall_rank = -1, .stall_step = -1,
	};
	struct worker *w = calloc((size_t)o->local_ranks, sizeof *w);
	struct run_layout layout = { 0 };
	struct comm_ucx *ucx = NULL;
	struct comm_hier *hier = NULL;
	const char *hang = NULL;
	char err[1024], hang_msg[1024];
	int code = STORK_EXIT_OK, started = 0;

	node.progress = calloc((size_t)o->local_ranks, sizeof *node.progress);
	if (!w || !node.progress) {
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	if (read_environment(&node, o->job_end, err, sizeof err) < 0) {
		stork_error("%s", err);
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	node.topo = topo_load(getenv("STORK_TOPOLOGY"), err, sizeof err);
	if (!node.topo) {
		stork_error("%s", err);
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	code = join(o, cfg, &node, &layout, &ucx, &hier, err, sizeof err);
	if (code) {
		stork_error("%s", err);
		report_result(o->result_fd, code, w, 0, err);
		goto out;
	}
	if (cfg->program.command.n) {
		code = run_program(o, cfg, &node, &layout, hier);
		goto out;
	}
	keep_global_batch(o, cfg, node.world_size);
	for (int i = 0; i < o->local_ranks; i++) {
		w[i] = (struct worker){ .node = &node, .local = i };
		node.progress[i].beat = clock_monotonic();
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			stork_error("cannot start the thread of local rank %d", i);
			comm_world_abort(node.world, "storkd could not start every rank");
			code = STORK_EXIT_INTERNAL;
			break;
		}
		started++;
	}
	/* Wait for the ranks, watching their heartbeats. */
	for (;;) {
		int done = 0;

		for (int i = 0; i < started; i++)
			done += node.progress[i].done;
		if (done == started)
			break;
		hang = find_stuck(&node, cfg->preempt.hang_timeout, hang_msg, sizeof hang_msg);
		if (hang) {
			stork_error("%s", hang);
			comm_abort(node.rank_comm(node.rank_comm_arg, 0), hang);
			/* A stuck rank may never return: report and leave. */
			report_result(o->result_fd, STORK_EXIT_HANG, w, started, hang);
			_exit(STORK_EXIT_HANG);
		}
		/* a dead peer node wakes ranks that wait in shared memory too */
		if (hier)
			comm_hier_watch(hier);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	code = ranks_exit_code(code, w, started);
	report_result(o->result_fd, code, w, started, NULL);
out:
	if (hier)
		comm_hier_destroy(hier);
	if (node.world)
		comm_world_destroy(node.world);
	if (ucx)
		comm_ucx_close(ucx);
	join_free(&layout);
	for (int i = 0; node.plans && i < o->local_ranks; i++)
		bind_plan_free(&node.plans[i]);
	free(node.plans);
	if (node.topo)
		topo_free(node.topo);
	free(node.progress);
	free(w);
	return code;
}

/* Whether the arguments (not yet parsed) say --program. */
static int program_mode(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--program"))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct stork_config cfg;

	/* OpenBLAS's tuning takes a second start of the process; the user's
	 * own program (stork run -- PROGRAM, which says --program) uses no
	 * BLAS of storkd's and starts sooner without it */
	if (!program_mode(argc, argv))
		ops_cpu_blas_reexec(argv);
	/*
	 * UCX 1.13 aborts the whole process when a peer on the same host dies
	 * during a shared-memory transfer. storkd keeps every endpoint under
	 * peer-failure handling instead, so a dead node is an error it can
	 * report. `stork bench comm` leaves the fast same-host path on.
	 */
	if (!getenv("STORK_UCX_PEER_ONLY"))
		env_set_own("STORK_UCX_PEER_ONLY", "1");
	struct options o;
	char err[1024];
	int code, sig;

	stork_log_init("storkd", STORK_LOG_INFO);
	if (parse_options(argc, argv, &o) < 0)
		return STORK_EXIT_USAGE;
	if (config_load(&cfg, o.config, err, sizeof err) < 0 ||
	    config_validate(&cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	if (o.program != (cfg.program.command.n > 0)) {
		stork_error("%s: %s, but storkd was started with %s", o.config,
			    cfg.program.command.n ? "program.command names a program" :
						    "program.command is empty",
			    o.program ? "--program" : "--engine (or neither)");
		config_free(&cfg);
		return STORK_EXIT_USAGE;
	}
	fault_delay("STORK_FAULT_START_DELAY"); /* a signal now must wait, not kill */
	if ((sig = install_signals())) {
		stork_error("cannot handle signal SIG%s: %s", sigabbrev_np(sig), strerror(errno));
		config_free(&cfg);
		return STORK_EXIT_INTERNAL;
	}
	stop_signals_unblock(); /* blocked since the launcher started: see lib/stop_signals.h */
	code = run(&o, &cfg);
	config_free(&cfg);
	return code;
}
