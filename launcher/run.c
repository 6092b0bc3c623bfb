/*
 * launcher/run.c - `stork run CONFIG`: prepare the run and supervise storkd.
 *
 * The launcher checks the configuration before anything starts (a bad key
 * costs seconds, not a queue wait), creates the run directory with the
 * resolved configuration and provenance, starts storkd as its child,
 * forwards signals to it, reaps it and exits with its exit code, so the
 * exit status of `srun stork run` says why the run ended (stork(1)).
 *
 * Layout: outside Slurm one node with --local-ranks ranks. Under Slurm one
 * launcher per node (parallel.local_ranks ranks: GPUs on GPU nodes, else 1)
 * or one launcher per task (one rank each); global ranks are node-major.
 */
#include "config.h"
#include "launcher/commands.h"

#include "kernels/device.h"
#include "lib/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/rundir.h"
#include "lib/stork_config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct run_options {
	const char *config;
	const char *storkd;
	int local_ranks;        /* 0 = from the configuration */
	char **overrides;
	int noverrides;
};

struct layout {
	int launchers;          /* launchers in the step */
	int index;              /* this launcher, 0-based (SLURM_PROCID) */
	int local_ranks;
	int rank_base;
	int world_size;
};

static pid_t child_pid;

static void forward_signal(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);

	return s && *s ? atoi(s) : dflt;
}

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: stork run CONFIG [--local-ranks N] [--set KEY=VALUE]...\n"
		"  --local-ranks N   ranks this launcher runs (default: parallel.local_ranks)\n"
		"  --set KEY=VALUE   override a configuration key, e.g. train.steps=50\n");
}

static int parse_run_options(int argc, char **argv, struct run_options *o)
{
	static const struct option longopts[] = {
		{ "local-ranks", required_argument, NULL, 'l' },
		{ "set", required_argument, NULL, 's' },
		{ "storkd", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof *o);
	o->overrides = calloc((size_t)argc, sizeof *o->overrides);
	if (!o->overrides)
		return -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 4096) {
				stork_error("--local-ranks: '%s' is not a number of ranks (1-4096)", optarg);
				return -1;
			}
			o->local_ranks = (int)v;
			break;
		}
		case 's': o->overrides[o->noverrides++] = optarg; break;
		case 'd': o->storkd = optarg; break;
		case 'h': run_usage(stdout); exit(STORK_EXIT_OK);
		default: run_usage(stderr); return -1;
		}
	}
	if (optind != argc - 1) {
		run_usage(stderr);
		return -1;
	}
	o->config = argv[optind];
	return 0;
}

static int load_config(const struct run_options *o, struct stork_config *cfg)
{
	char err[1024];

	if (config_load(cfg, o->config, err, sizeof err) < 0)
		goto fail;
	for (int i = 0; i < o->noverrides; i++)
		if (config_set(cfg, o->overrides[i], err, sizeof err) < 0)
			goto fail;
	if (config_validate(cfg, err, sizeof err) < 0)
		goto fail;
	return 0;
fail:
	stork_error("%s", err);
	return -1;
}

static int compute_layout(const struct run_options *o, const struct stork_config *cfg,
			  struct layout *l)
{
	l->launchers = env_int("SLURM_STEP_NUM_TASKS", env_int("SLURM_NTASKS", 1));
	l->index = env_int("SLURM_PROCID", 0);
	if (!getenv("SLURM_STEP_ID")) {
		l->launchers = 1;
		l->index = 0;
	}
	if (o->local_ranks)
		l->local_ranks = o->local_ranks;
	else if (cfg->parallel.local_ranks)
		l->local_ranks = cfg->parallel.local_ranks;
	else if (l->launchers > env_int("SLURM_STEP_NUM_NODES", env_int("SLURM_NNODES", 1)))
		l->local_ranks = 1; /* one launcher per task: one rank each */
	else
		l->local_ranks = kernels_cuda_device_count() > 0 ? kernels_cuda_device_count() : 1;
	if (l->launchers > 1) {
		stork_error("this step has %d launchers; runs across several launchers need the "
			    "rendezvous, which this version of stork does not have yet: use one "
			    "launcher (srun -N1 -n1 stork run ... --local-ranks N)", l->launchers);
		return -1;
	}
	l->rank_base = l->index * l->local_ranks;
	l->world_size = l->launchers * l->local_ranks;
	return 0;
}

static int write_resolved_config(const char *run_dir, const struct stork_config *cfg)
{
	char path[4200], err[512];
	char *yaml = config_to_yaml(cfg);
	int rc;

	if (!yaml)
		return -1;
	snprintf(path, sizeof path, "%s/config/stork.yaml", run_dir);
	rc = atomic_write_file(path, yaml, strlen(yaml), err, sizeof err);
	if (rc < 0)
		stork_error("%s", err);
	free(yaml);
	return rc;
}

/* storkd lives next to stork once installed, in ../daemon in the build tree. */
static void find_storkd(const char *given, char *buf, size_t len)
{
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (given) {
		snprintf(buf, len, "%s", given);
		return;
	}
	if (getenv("STORK_STORKD")) {
		snprintf(buf, len, "%s", getenv("STORK_STORKD"));
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		*slash = '\0';
		if (snprintf(buf, len, "%s/../daemon/storkd", self) < (int)len &&
		    access(buf, X_OK) == 0)
			return;
	}
	snprintf(buf, len, "%s/storkd", STORK_SBINDIR);
}

static int supervise(const char *storkd, char *const args[])
{
	static const int forwarded[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP };
	struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
	int status;
	pid_t pid;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaction(forwarded[i], &sa, NULL);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		stork_error("cannot start %s: %s", storkd, strerror(errno));
		return STORK_EXIT_INTERNAL;
	}
	if (pid == 0) {
		execv(storkd, args);
		fprintf(stderr, "stork: cannot run %s: %s\n", storkd, strerror(errno));
		_exit(STORK_EXIT_INTERNAL);
	}
	child_pid = pid;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			stork_error("waiting for storkd: %s", strerror(errno));
			return STORK_EXIT_INTERNAL;
		}
	child_pid = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	stork_error("storkd (pid %d) died of signal %s", (int)pid, strsignal(WTERMSIG(status)));
	return STORK_EXIT_RANK_FAILED;
}

int cmd_run(int argc, char **argv)
{
	struct run_options o;
	struct stork_config cfg;
	struct layout l;
	char run_dir[4096], storkd[4096], err[1024], config_path[4200];
	char nranks[16], base[16], world[16], node[16];
	int code;

	if (parse_run_options(argc, argv, &o) < 0)
		return STORK_EXIT_USAGE;
	if (load_config(&o, &cfg) < 0) {
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	if (compute_layout(&o, &cfg, &l) < 0) {
		code = STORK_EXIT_USAGE;
		goto out;
	}
	if (rundir_path(run_dir, sizeof run_dir, cfg.run.dir, cfg.run.name) < 0 ||
	    rundir_create(run_dir, err, sizeof err) < 0 ||
	    rundir_write_provenance(run_dir, err, sizeof err) < 0) {
		stork_error("%s", err);
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	if (write_resolved_config(run_dir, &cfg) < 0) {
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	printf("stork: run directory %s\n", run_dir);
	find_storkd(o.storkd, storkd, sizeof storkd);
	snprintf(config_path, sizeof config_path, "%s/config/stork.yaml", run_dir);
	snprintf(nranks, sizeof nranks, "%d", l.local_ranks);
	snprintf(base, sizeof base, "%d", l.rank_base);
	snprintf(world, sizeof world, "%d", l.world_size);
	snprintf(node, sizeof node, "%d", l.index);
	{
		char *args[] = { storkd, "--config", config_path, "--run-dir", run_dir,
				 "--local-ranks", nranks, "--rank-base", base, "--world-size", world,
				 "--node-rank", node, NULL };

		code = supervise(storkd, args);
	}
out:
	config_free(&cfg);
	free(o.overrides);
	return code;
}
