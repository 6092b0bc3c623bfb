/*
 * daemon/storkd.c - storkd, the per-node training daemon.
 *
 * Started by `stork run` (one per node, or one per task) with the resolved
 * configuration and this node's place in the world; runs one worker thread
 * per local rank (daemon/engine/train/train.c) and exits with the most telling of their
 * exit codes. The signals that stop a run (lib/stop_signals.h) only set a
 * flag here (and note which came first, and when): the ranks agree on a
 * stop at the next step boundary. HUP is ignored with a line that says so.
 */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/node/join.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/node/node_result.h"
#include "daemon/node/prometheus.h"
#include "daemon/node/tensorboard.h"
#include "daemon/engine/train/hang_report.h"
#include "daemon/node/node.h"
#include "daemon/node/regroup.h"
#include "daemon/node/rejoin.h"
#include "daemon/engine/train/train.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/io/atomic_file.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/run/exit_info.h"
#include "lib/fault.h"
#include "lib/bounded.h"
#include "lib/env_number.h"
#include "lib/formats/stork_json.h"
#include "lib/slurm/slurm_job.h"
#include "lib/log.h"
#include "lib/rendezvous/rendezvous_auth.h"
#include "lib/stop_signals.h"
#include "lib/config/stork_config.h"
#include "lib/version.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <pmix.h>
#include <ucp/api/ucp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a node that found a hang waits for the others to find it before it aborts. */
#define HANG_SETTLE_S 1
/* restart.rejoin: how long the lead waits at its end for the launchers it started again */
#define REJOIN_END_WAIT_S 60.0

static void print_version(void)
{
	printf("storkd %s (git %s, %s)\n", stork_version(), stork_git_describe(),
	       stork_compiler());
	printf("backends: %s; %s, %d device(s) visible\n", kernels_cpu_backend_name(),
	       kernels_cuda_versions(), kernels_cuda_device_count());
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
 * result pipe (daemon/node/node_result.c says what it holds and which ranks'
 * results it may read); message (a watchdog verdict, a failed join)
 * overrides the ranks' own.
 */
static void report_result(int fd, int code, const struct worker *w, int n, const char *message,
			  const struct regroup *g)
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
	if (!(v = node_result_json(code, ranks, n, message)))
		goto fail;
	if (g && g->nlosses) /* restart.in_place: the nodes that left while this one went on */
		json_object_set_new(v, "left", regroup_losses_json(g));
	if (!(text = sj_compact(v)))
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

/* Whether a rank that returned failed on its own (not as a consequence). */
static int primary_failure(const struct worker *w, int started)
{
	for (int i = 0; i < started; i++)
		if (w[i].node->progress[w[i].local].done && w[i].result.exit_code &&
		    !w[i].result.secondary)
			return 1;
	return 0;
}

/*
 * restart.rejoin, the lead, after a regroup that went on without nodes: a
 * launcher again on each lost node whose host is still in the job.
 */
static void bring_back(const struct train_node *node, const struct stork_config *cfg,
		       const struct run_layout *layout, struct rejoins *back)
{
	const struct regroup *g = node->regroup;
	char err[512];

	for (int i = g->last_first; cfg->restart.rejoin && i < g->nlosses; i++) {
		const struct regroup_loss *x = &g->losses[i];

		if (x->by[0]) /* a spare took its place already */
			continue;
		if (slurm_job_lost_node(node->slurm_job, x->host) != 0) {
			stork_info("restart.rejoin: %s is no longer in the job; its replicas stay "
				   "out", x->host);
			continue;
		}
		if (rejoin_start(back, node->run_dir, x->host, x->node, layout->nnodes,
				 layout->nodes[x->node].local_ranks, node->attempt, g->epoch, err,
				 sizeof err) < 0) {
			stork_warn("restart.rejoin: cannot start a launcher on %s again: %s", x->host,
				   err);
			continue;
		}
		regroup_expect(node->regroup, x->node);
		stork_info("restart.rejoin: a launcher starts on %s again, in a job step of its own, "
			   "to take launcher %d's place", x->host, x->node);
	}
}

/*
 * restart.rejoin, the lead, now and then: forget a rejoiner whose step
 * ended before it came in; let in one that is ready while steps remain.
 */
static void watch_rejoins(struct train_node *node, const struct stork_config *cfg,
			  struct rejoins *back)
{
	int64_t steps = node->progress[0].step;
	int status, k;

	while ((k = rejoin_reap(back, &status)) >= 0)
		if (node->regroup->rejoin[k]) {
			stork_warn("restart.rejoin: launcher %d's step ended before it came back in "
				   "(%s %d)", k, WIFEXITED(status) ? "exit" : "signal",
				   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			regroup_forget(node->regroup, k);
		}
	/* a regroup costs the step in flight: none before the ranks completed
	 * one since the last (a loss's cost is then its own, the rejoin's its own) */
	if (steps > node->regroup->step)
		regroup_admit(node->regroup, (int)(cfg->train.steps - steps));
}

/*
 * restart.in_place, from the watching loop: run the regroup once every
 * running rank waits for it; join one another node called (its ranks
 * may wait where no error reaches them: shared memory). 1 when a regroup
 * ran.
 */
static int watch_regroup(struct train_node *node, struct stork_config *cfg,
			 const struct run_layout *layout, struct comm_ucx **ucx,
			 struct comm_hier **hier, const struct worker *w, int started, int done,
			 unsigned tick, struct rejoins *back)
{
	struct regroup *g = node->regroup;

	/* a spare's ranks wait from the start: it joins a regroup another node calls */
	if (node->spare && tick % 10 == 0 &&
	    regroup_spare_released(g, atomic_load(node->stop_requested) != 0))
		return 1;
	if (node->rejoining)
		regroup_rejoin_ready(g, started);
	if (node->spare && (tick % 10 || !regroup_called(g)))
		return 0;
	if (regroup_due(g, started, done)) {
		struct regroup_node n = { .node = node, .cfg = cfg, .layout = layout, .ucx = ucx,
					  .hier = hier, .primary = primary_failure(w, started) };

		if (regroup_run(g, &n) == REGROUP_GO && regroup_lead(g) == g->self)
			bring_back(node, cfg, layout, back);
		return 1;
	}
	if (tick % 10 == 5 && done == 0 && regroup_lead(g) == g->self)
		watch_rejoins(node, cfg, back);
	/* twice a second: the call is a file on the shared file system (none
	 * after a regroup that ended the node: its ranks are leaving) */
	if (node->world && tick % 10 == 0 && regroup_called(g))
		comm_abort(node->rank_comm(node->rank_comm_arg, 0),
			   "another node called a regroup (restart.in_place)");
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
	int rc = layout_model_shape(cfg, &mc, err, errlen);

	if (rc < 0)
		return rc == -2 ? STORK_EXIT_CONFIG : STORK_EXIT_DATA;
	if (layout_make(&l, &mc, layout->world_size, cfg->parallel.tensor, cfg->parallel.pipeline,
			cfg->parallel.zero, cfg->parallel.stage_split, cfg->train.seq_len, 0, err,
			errlen) < 0)
		return STORK_EXIT_CONFIG;
	layout->dp = l.dp;
	layout->tp = l.tp;
	layout->pp = l.pp;
	layout->zero = l.zero;
	layout->stage_layers = calloc((size_t)l.pp, sizeof *layout->stage_layers);
	for (int s = 0; layout->stage_layers && s < l.pp; s++)
		layout_stage_layers(&mc, l.pp, cfg->parallel.stage_split, cfg->train.seq_len, s,
				    &layout->stage_layers[s][0], &layout->stage_layers[s][1]);
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
static void keep_global_batch(const struct node_options *o, struct stork_config *cfg, int world)
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

static int run(const struct node_options *o, struct stork_config *cfg)
{
	struct train_node node = {
		.cfg = cfg, .run_dir = o->run_dir, .local_ranks = o->local_ranks,
		.world_size = o->local_ranks, .attempt = o->attempt, .stop_requested = &node_stop_requested,
		.stop_signal_ms = &node_stop_signal_ms, .stall_rank = -1, .stall_step = -1,
	};
	struct worker *w = calloc((size_t)o->local_ranks, sizeof *w);
	struct run_layout layout = { 0 };
	struct comm_ucx *ucx = NULL;
	struct comm_hier *hier = NULL;
	struct regroup regroup = { 0 };
	struct rejoins back = { 0 };
	struct prometheus prom = { 0 };
	struct tensorboard tb = { 0 };
	double sample_at = 0;
	const char *hang = NULL;
	char err[1024], hang_msg[2048];
	int code = STORK_EXIT_OK, started = 0;

	node.progress = calloc((size_t)o->local_ranks, sizeof *node.progress);
	if (!w || !node.progress) {
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	if (node_read_environment(&node, o->job_end, err, sizeof err) < 0) {
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
	code = node_join(o, cfg, &node, &layout, &ucx, &hier, check_layout, 0, err, sizeof err);
	if (code) {
		stork_error("%s", err);
		report_result(o->result_fd, code, w, 0, err, NULL);
		goto out;
	}
	if (layout.node_index == 0)
		write_library_versions(o->run_dir);
	if (cfg->restart.in_place && layout.nnodes > 1) {
		if (regroup_init(&regroup, &node, layout.nnodes, layout.active) < 0) {
			stork_error("out of memory");
			code = STORK_EXIT_INTERNAL;
			goto out;
		}
		node.regroup = &regroup;
		if (node.rejoining)
			regroup_rejoining(&regroup, node.rejoin_epoch);
	}
	keep_global_batch(o, cfg, node.world_size);
	ckpt_share_with_group(cfg->run.shared);
	if (hang_stacks_install() < 0)
		stork_warn("no stacks in the rank logs if the node hangs: %s", strerror(errno));
	/* where each rank's metrics file stands before its first line of this attempt */
	if (cfg->metrics.tensorboard)
		tensorboard_start(&tb, o->run_dir, node.host, node.rank_base, o->local_ranks);
	for (int i = 0; i < o->local_ranks; i++) {
		w[i] = (struct worker){ .node = &node, .local = i };
		node.progress[i].beat = clock_monotonic();
		node.progress[i].gpu_util = node.progress[i].gpu_mem = NAN; /* none until sampled */
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			stork_error("cannot start the thread of local rank %d", i);
			comm_world_abort(node.world, "storkd could not start every rank");
			code = STORK_EXIT_INTERNAL;
			break;
		}
		started++;
	}
	prometheus_init(&prom, cfg->metrics.prometheus_dir, &node);
	/* Wait for the ranks, watching their heartbeats. */
	for (unsigned tick = 0;; tick++) {
		int done = 0;

		for (int i = 0; i < started; i++)
			done += node.progress[i].done;
		if (done == started)
			break;
		if (clock_monotonic() >= sample_at) {
			prometheus_write(&prom, &node, cfg->run.name, started);
			sample_at = clock_monotonic() + cfg->metrics.sample_s;
		}
		tensorboard_poll(&tb, 0);
		if (node.regroup &&
		    watch_regroup(&node, cfg, &layout, &ucx, &hier, w, started, done, tick, &back))
			continue;
		hang = find_stuck(&node, cfg->preempt.hang_timeout, hang_msg, sizeof hang_msg);
		if (hang) {
			pthread_t threads[started > 0 ? started : 1];
			int running[started > 0 ? started : 1];

			for (int i = 0; i < started; i++) {
				threads[i] = w[i].thread;
				running[i] = !node.progress[i].done;
			}
			/* where each rank is, before the abort wakes them */
			hang_report(&node, threads, running, hang_msg, sizeof hang_msg);
			stork_error("%s", hang);
			/*
			 * The other nodes' watchdogs, polling on their own, find the
			 * same hang within a poll or two; aborting (and exiting) at
			 * once would wake their waiting ranks with an error before
			 * they recorded where those waited and took their stacks.
			 */
			nanosleep(&(struct timespec){ HANG_SETTLE_S, 0 }, NULL);
			if (node.world) /* none after a regroup that ended the node */
				comm_abort(node.rank_comm(node.rank_comm_arg, 0), hang);
			/* A stuck rank may never return: report and leave. */
			report_result(o->result_fd, STORK_EXIT_HANG, w, started, hang, node.regroup);
			_exit(STORK_EXIT_HANG);
		}
		/* a dead peer node wakes ranks that wait in shared memory too */
		if (hier)
			comm_hier_watch(hier);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	code = ranks_exit_code(code, w, started);
	report_result(o->result_fd, code, w, started, NULL, node.regroup);
	prometheus_end(&prom);
	tensorboard_end(&tb);
out:
	node_free(&node, &layout, ucx, hier);
	/* the steps it started end with the same last step (once this node's
	 * endpoints are closed, theirs close too); none outlives the run */
	rejoin_end(&back, node.regroup, REJOIN_END_WAIT_S);
	regroup_free(&regroup);
	free(node.progress);
	free(w);
	return code;
}

int main(int argc, char **argv)
{
	static const struct node_program prog = {
		.name = "storkd", .version = print_version, .gpus = kernels_cuda_device_count,
	};
	struct node_options o;
	struct stork_config cfg;
	int code;

	ops_cpu_blas_reexec(argv);
	if ((code = node_start(argc, argv, &prog, 0, &o, &cfg)))
		return code;
	code = run(&o, &cfg);
	config_free(&cfg);
	return code;
}
