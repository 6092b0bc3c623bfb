/*
 * daemon/storkd.c - storkd, the per-node training daemon.
 *
 * Started by `stork run` (one per node, or one per task) with the resolved
 * configuration and this node's place in the world; runs one worker thread
 * per local rank (daemon/train.c) and exits with the most telling of their
 * exit codes. The preemption signal only sets a flag here: the ranks agree
 * on it at the next step boundary.
 */
#include "config.h"
#include "daemon/train.h"
#include "kernels/device.h"
#include "lib/exit_codes.h"
#include "lib/exit_info.h"
#include "lib/json.h"
#include "lib/slurm_job.h"
#include "lib/log.h"
#include "lib/stork_config.h"
#include "lib/version.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct options {
	const char *config;
	const char *run_dir;
	int local_ranks, rank_base, world_size, node_rank;
	int result_fd;          /* where the launcher reads how the node ended; -1 none */
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: storkd --config FILE --run-dir DIR [--local-ranks N] [--rank-base R]\n"
		"              [--world-size W] [--node-rank K]\n"
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

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "run-dir", required_argument, NULL, 'd' },
		{ "local-ranks", required_argument, NULL, 'l' },
		{ "rank-base", required_argument, NULL, 'r' },
		{ "world-size", required_argument, NULL, 'w' },
		{ "node-rank", required_argument, NULL, 'n' },
		{ "result-fd", required_argument, NULL, 'f' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .local_ranks = 1, .world_size = 0, .result_fd = -1 };
	while ((c = getopt_long(argc, argv, "Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 'd': o->run_dir = optarg; break;
		case 'l': if (parse_int("--local-ranks", optarg, 1, &o->local_ranks)) return -1; break;
		case 'r': if (parse_int("--rank-base", optarg, 0, &o->rank_base)) return -1; break;
		case 'w': if (parse_int("--world-size", optarg, 1, &o->world_size)) return -1; break;
		case 'n': if (parse_int("--node-rank", optarg, 0, &o->node_rank)) return -1; break;
		case 'f': if (parse_int("--result-fd", optarg, 0, &o->result_fd)) return -1; break;
		case 'V': print_version(); exit(STORK_EXIT_OK);
		case 'h': usage(stdout); exit(STORK_EXIT_OK);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc || !o->config || !o->run_dir) {
		usage(stderr);
		return -1;
	}
	if (!o->world_size)
		o->world_size = o->local_ranks;
	if (o->rank_base + o->local_ranks > o->world_size) {
		stork_error("ranks %d..%d do not fit in a world of %d", o->rank_base,
			    o->rank_base + o->local_ranks - 1, o->world_size);
		return -1;
	}
	return 0;
}

static void install_signals(int preempt_signal)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(preempt_signal, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
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
 * result pipe. The first failure is the failing rank whose failure came
 * first; a watchdog verdict names the stuck ranks.
 */
static void report_result(int fd, int code, const struct worker *w, int n, const char *hang_msg)
{
	const struct train_rank_result *first = NULL, *ckpt = NULL;
	int first_rank = -1;
	int64_t last_step = -1;
	struct json j;

	if (fd < 0)
		return;
	for (int i = 0; i < n; i++) {
		const struct train_rank_result *r = &w[i].result;

		if (r->fail_time > 0 && r->exit_code != STORK_EXIT_PREEMPTED &&
		    r->exit_code != STORK_EXIT_TIMEOUT && (!first || r->fail_time < first->fail_time)) {
			first = r;
			first_rank = w[i].node->rank_base + i;
		}
		if (r->checkpoint[0] && (!ckpt || r->checkpoint_step > ckpt->checkpoint_step))
			ckpt = r;
		if (last_step < 0 || r->last_step < last_step)
			last_step = r->last_step;
	}
	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_key_int(&j, "exit_code", code);
	json_key_int(&j, "last_step", last_step);
	if (hang_msg) {
		json_key_string(&j, "message", hang_msg);
	} else if (first) {
		json_key_int(&j, "failed_rank", first_rank);
		json_key_double(&j, "fail_time", first->fail_time);
		json_key_int(&j, "failed_rank_step", first->last_step);
		json_key_int(&j, "failed_rank_code", first->exit_code);
		json_key_string(&j, "message", first->message);
	} else {
		for (int i = 0; i < n; i++)
			if (w[i].result.exit_code == code) {
				json_key_string(&j, "message", w[i].result.message);
				break;
			}
	}
	if (ckpt) {
		json_key_string(&j, "checkpoint", ckpt->checkpoint);
		json_key_int(&j, "checkpoint_step", ckpt->checkpoint_step);
	}
	json_end_object(&j);
	if (!json_error(&j)) {
		ssize_t ignored = write(fd, json_str(&j), json_len(&j));
		(void)ignored;
	}
	json_free(&j);
}

/*
 * The watchdog: a rank whose heartbeat is older than hang_timeout seconds
 * is stuck (a deadlock, a hung file system, a stalled device). Returns a
 * message naming every stuck rank and the step it reached, or NULL.
 */
static const char *find_stuck(const struct train_node *node, double timeout, char *msg, size_t len)
{
	double now = train_clock();
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

static int run(const struct options *o, const struct stork_config *cfg)
{
	struct train_node node = {
		.cfg = cfg, .run_dir = o->run_dir, .local_ranks = o->local_ranks,
		.rank_base = o->rank_base, .world_size = o->world_size, .node_rank = o->node_rank,
		.stop_requested = &stop_requested, .stall_rank = -1, .stall_step = -1,
	};
	struct worker *w = calloc((size_t)o->local_ranks, sizeof *w);
	const char *s, *hang = NULL;
	char err[512], hang_msg[1024];
	int code = STORK_EXIT_OK, started = 0;

	node.progress = calloc((size_t)o->local_ranks, sizeof *node.progress);
	if (!w || !node.progress) {
		free(w);
		free(node.progress);
		return STORK_EXIT_INTERNAL;
	}
	gethostname(node.host, sizeof node.host - 1);
	s = getenv("SLURM_JOB_ID");
	snprintf(node.job_id, sizeof node.job_id, "%s", s && *s ? s : "local");
	s = getenv("SLURM_RESTART_COUNT");
	node.restart_count = s ? atoi(s) : 0;
	s = getenv("STORK_STOP_AT_STEP");
	node.stop_at_step = s ? atoll(s) : 0;
#ifdef STORK_FAULT_INJECTION
	s = getenv("STORK_FAULT_STALL");
	if (s && sscanf(s, "%d:%d", &node.stall_rank, &node.stall_step) == 2)
		stork_warn("fault injection: local rank %d will stall at step %d", node.stall_rank,
			   node.stall_step + 1);
#endif
	node.slurm_job = slurm_job_id_from_env();
	if (node.slurm_job) {
		struct slurm_job job;

		if (slurm_job_query(node.slurm_job, &job, err, sizeof err) == 0)
			node.job_end_time = job.end_time;
		else
			stork_warn("%s", err);
	}
	node.topo = topo_load(getenv("STORK_TOPOLOGY"), err, sizeof err);
	if (!node.topo) {
		stork_error("%s", err);
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	node.world = comm_world_create(o->local_ranks);
	if (!node.world) {
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	for (int i = 0; i < o->local_ranks; i++) {
		w[i] = (struct worker){ .node = &node, .local = i };
		node.progress[i].beat = train_clock();
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
			comm_world_abort(node.world, hang);
			/* A stuck rank may never return: report and leave. */
			report_result(o->result_fd, STORK_EXIT_HANG, w, started, hang);
			_exit(STORK_EXIT_HANG);
		}
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	for (int i = 0; i < started; i++) {
		pthread_join(w[i].thread, NULL);
		code = exit_code_worst(code, w[i].result.exit_code);
	}
	report_result(o->result_fd, code, w, started, NULL);
out:
	if (node.world)
		comm_world_destroy(node.world);
	if (node.topo)
		topo_free(node.topo);
	free(node.progress);
	free(w);
	return code;
}

int main(int argc, char **argv)
{
	struct stork_config cfg;
	struct options o;
	char err[1024];
	int code;

	stork_log_init("storkd", STORK_LOG_INFO);
	if (parse_options(argc, argv, &o) < 0)
		return STORK_EXIT_USAGE;
	if (config_load(&cfg, o.config, err, sizeof err) < 0 ||
	    config_validate(&cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	install_signals(cfg.preempt.signal);
	code = run(&o, &cfg);
	config_free(&cfg);
	return code;
}
