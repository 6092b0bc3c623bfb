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
#include "lib/log.h"
#include "lib/stork_config.h"
#include "lib/version.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .local_ranks = 1, .world_size = 0 };
	while ((c = getopt_long(argc, argv, "Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 'd': o->run_dir = optarg; break;
		case 'l': if (parse_int("--local-ranks", optarg, 1, &o->local_ranks)) return -1; break;
		case 'r': if (parse_int("--rank-base", optarg, 0, &o->rank_base)) return -1; break;
		case 'w': if (parse_int("--world-size", optarg, 1, &o->world_size)) return -1; break;
		case 'n': if (parse_int("--node-rank", optarg, 0, &o->node_rank)) return -1; break;
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

/* The exit code that says most: a rank failure over a stop over success. */
static int worst(int a, int b)
{
	if (a == STORK_EXIT_OK)
		return b;
	if (b == STORK_EXIT_OK)
		return a;
	if (a == STORK_EXIT_PREEMPTED)
		return b;
	return a;
}

static int run(const struct options *o, const struct stork_config *cfg)
{
	struct train_node node = {
		.cfg = cfg, .run_dir = o->run_dir, .local_ranks = o->local_ranks,
		.rank_base = o->rank_base, .world_size = o->world_size, .node_rank = o->node_rank,
		.stop_requested = &stop_requested,
	};
	struct worker *w = calloc((size_t)o->local_ranks, sizeof *w);
	const char *s;
	char err[512];
	int code = STORK_EXIT_OK;

	if (!w)
		return STORK_EXIT_INTERNAL;
	gethostname(node.host, sizeof node.host - 1);
	s = getenv("SLURM_JOB_ID");
	snprintf(node.job_id, sizeof node.job_id, "%s", s && *s ? s : "local");
	s = getenv("SLURM_RESTART_COUNT");
	node.restart_count = s ? atoi(s) : 0;
	s = getenv("STORK_STOP_AT_STEP");
	node.stop_at_step = s ? atoll(s) : 0;
	node.topo = topo_load(getenv("STORK_TOPOLOGY"), err, sizeof err);
	if (!node.topo) {
		stork_error("%s", err);
		free(w);
		return STORK_EXIT_INTERNAL;
	}
	node.world = comm_world_create(o->local_ranks);
	if (!node.world) {
		topo_free(node.topo);
		free(w);
		return STORK_EXIT_INTERNAL;
	}
	for (int i = 0; i < o->local_ranks; i++) {
		w[i] = (struct worker){ .node = &node, .local = i };
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			stork_error("cannot start the thread of local rank %d", i);
			comm_world_abort(node.world, "storkd could not start every rank");
			for (int k = 0; k < i; k++)
				pthread_join(w[k].thread, NULL);
			code = STORK_EXIT_INTERNAL;
			goto out;
		}
	}
	for (int i = 0; i < o->local_ranks; i++) {
		pthread_join(w[i].thread, NULL);
		code = worst(code, w[i].result.exit_code);
	}
out:
	comm_world_destroy(node.world);
	topo_free(node.topo);
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
