/*
 * launcher/run/run.c - `stork run CONFIG`: prepare the run and supervise storkd.
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
 * "The node's GPUs" are counted by storkd (--local-ranks auto): the
 * launcher is to load no CUDA.
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/programs.h"
#include "launcher/run/notify.h"
#include "launcher/run/stage.h"
#include "launcher/run/run_metrics.h"
#include "launcher/run/preflight.h"
#include "launcher/run/run_name.h"
#include "launcher/run/host_tasks.h"
#include "launcher/run/in_place.h"

#include "lib/io/atomic_file.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/run/end_notice.h"
#include "lib/run/membership.h"
#include "lib/run/exit_info.h"
#include "lib/fault.h"
#include "lib/io/io.h"
#include "lib/run/metrics_file.h"
#include "lib/bounded.h"
#include "lib/env_number.h"
#include "lib/formats/stork_json.h"
#include "lib/slurm/slurm_job.h"
#include "lib/log.h"
#include "lib/oom_watch.h"
#include "lib/run/rundir.h"
#include "lib/stop_signals.h"
#include "lib/config/stork_config.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <time.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

struct run_options {
	const char *config;     /* NULL: none given (the user's own program needs none) */
	char **program;         /* after `--`: PROGRAM ARGS..., NULL-terminated; NULL: the engine */
	int nprogram;
	const char *storkd;
	int local_ranks;        /* 0 = from the configuration */
	char **overrides;
	int noverrides;
	int check;              /* --check: the checks of a start, and nothing else */
};

/* This launcher's place; the global ranks follow from storkd's rendezvous. */
struct layout {
	int launchers;          /* launchers in the step */
	int index;              /* this launcher, 0-based (SLURM_PROCID) */
	int local_ranks;        /* 0 = auto: storkd counts this node's GPUs */
	int first_attempt;      /* restart.rejoin: the attempt it joins; else 0 */
	int rejoin;             /* started by node 0 in a lost node's place (restart.rejoin) */
};

/* storkd's pid, read by the signal handler: a lock-free atomic is safe there. */
static _Atomic pid_t child_pid;

/* A signal that stops the run reached this launcher (and was passed to
 * storkd): storkd is not restarted after it. */
static atomic_int stop_forwarded;

/* Every signal of lib/stop_signals.h goes to storkd, which decides what it
 * does (HUP: nothing but a line). */
static void forward_signal(int sig)
{
	int saved = errno; /* the interrupted code may be about to read it */
	pid_t pid = atomic_load(&child_pid);

	if (stop_signal_stops(sig))
		atomic_store(&stop_forwarded, 1);
	if (pid > 0)
		kill(pid, sig);
	errno = saved;
}

/* A count Slurm gives in the environment: 1 or more, or dflt when unset. */
static int env_count(const char *name, long long dflt, long long *out, char *err, size_t errlen)
{
	return env_number(name, 1, INT_MAX, dflt, out, err, errlen);
}

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: stork run [--check] CONFIG [--local-ranks N] [--set KEY=VALUE]... [KEY=VALUE]...\n"
		"       stork run [--check] [CONFIG] [OPTIONS]... -- PROGRAM [ARGS]...\n"
		"  --check           check the configuration and the data as a start would, start\n"
		"                    nothing (before sbatch, on a login node)\n"
		"  --local-ranks N   ranks this launcher runs (default: parallel.local_ranks)\n"
		"  --set KEY=VALUE   override a configuration key, e.g. train.steps=50\n"
		"  -- PROGRAM ARGS   every rank runs PROGRAM (a PyTorch script...) instead of the\n"
		"                    engine, with torchrun's environment (stork(1): RUNNING YOUR\n"
		"                    OWN PROGRAM)\n");
}

static int parse_run_options(int argc, char **argv, struct run_options *o)
{
	static const struct option longopts[] = {
		{ "local-ranks", required_argument, NULL, 'l' },
		{ "set", required_argument, NULL, 's' },
		{ "storkd", required_argument, NULL, 'd' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof *o);
	o->overrides = calloc((size_t)argc, sizeof *o->overrides);
	if (!o->overrides)
		return -1;
	/* `--` ends stork's own arguments: what follows is the program's,
	 * options and all, and getopt must not see it */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			o->program = argv + i + 1;
			o->nprogram = argc - i - 1;
			argc = i;
			break;
		}
	if (o->program && o->nprogram == 0) {
		stork_error("nothing after '--': name the program every rank runs");
		run_usage(stderr);
		return -1;
	}
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
		case 'c': o->check = 1; break;
		case 'h': run_usage(stdout); exit(STORK_EXIT_OK);
		default: run_usage(stderr); return -1;
		}
	}
	if (optind >= argc && !o->program) {
		run_usage(stderr);
		return -1;
	}
	/* the CONFIG, unless the first word is already an override */
	if (optind < argc && !(o->program && strchr(argv[optind], '=')))
		o->config = argv[optind++];
	/* Overrides may also follow the file as plain KEY=VALUE words. */
	for (; optind < argc; optind++) {
		if (!strchr(argv[optind], '=')) {
			stork_error("unexpected argument '%s': overrides look like train.steps=50", argv[optind]);
			run_usage(stderr);
			return -1;
		}
		o->overrides[o->noverrides++] = argv[optind];
	}
	return 0;
}

/* `-- PROGRAM ARGS`, over whatever program.command the configuration had. */
static int set_program(struct stork_config *cfg, char **argv, int argc, char *err, size_t len)
{
	struct stork_globs *cmd = &cfg->program.command;
	char **v = calloc((size_t)argc, sizeof *v);
	int i;

	for (i = 0; v && i < argc && *argv[i] && (v[i] = strdup(argv[i])); i++)
		;
	if (!v || i < argc) {
		if (v && i < argc && !*argv[i])
			snprintf(err, len, "stork run -- %s: argument %d is empty, which "
				 "program.command cannot hold", argv[0], i);
		else
			snprintf(err, len, "out of memory");
		while (v && i-- > 0)
			free(v[i]);
		free(v);
		return -1;
	}
	for (size_t k = 0; k < cmd->n; k++)
		free(cmd->v[k]);
	free(cmd->v);
	cmd->v = v;
	cmd->n = (size_t)argc;
	return 0;
}

/*
 * A program run's identity (run_name.h): named after its program when no
 * run.name was given; run.resume_from made absolute, for the ranks'
 * STORK_RESUME_FROM.
 */
static int program_identity(struct stork_config *cfg, char *err, size_t len)
{
	char name[256], path[PATH_MAX], *v;

	if (!cfg->program.command.n)
		return 0;
	if (!strcmp(config_origin(cfg, "run.name"), "default")) {
		if (program_run_name(cfg->program.command.v, cfg->program.command.n, cfg->run.dir,
				     name, sizeof name) < 0 || !(v = strdup(name)))
			return msg_fail(err, len, -1, "run.name: no name free for the program's run "
					"under %s: set run.name", cfg->run.dir);
		free(cfg->run.name);
		cfg->run.name = v;
	}
	if (cfg->run.resume_from[0]) {
		if (!realpath(cfg->run.resume_from, path))
			return msg_fail(err, len, -1, "run.resume_from: %s (%s): %s",
					cfg->run.resume_from, config_origin(cfg, "run.resume_from"),
					strerror(errno));
		if (!(v = strdup(path)))
			return msg_fail(err, len, -1, "out of memory");
		free(cfg->run.resume_from);
		cfg->run.resume_from = v;
	}
	return 0;
}

/* Whether path is named as a configuration is: NAME.yaml or NAME.yml. */
static bool yaml_named(const char *path)
{
	const char *dot = strrchr(path, '.');

	return dot && (!strcasecmp(dot, ".yaml") || !strcasecmp(dot, ".yml"));
}

static int load_config(const struct run_options *o, struct stork_config *cfg)
{
	char err[1024];

	if (o->config) {
		if (config_load(cfg, o->config, err, sizeof err) < 0) {
			/* stork run train.py: a program given where the configuration goes */
			if (!yaml_named(o->config) && !o->program)
				stork_error("%s\n(did you mean `stork run -- %s`? a program to run comes "
					    "after --; the configuration is a .yaml file)", err, o->config);
			else
				stork_error("%s", err);
			return -1;
		}
	} else {
		config_init(cfg); /* every key has a default */
	}
	for (int i = 0; i < o->noverrides; i++)
		if (config_set(cfg, o->overrides[i], err, sizeof err) < 0)
			goto fail;
	if (o->program && set_program(cfg, o->program, o->nprogram, err, sizeof err) < 0)
		goto fail;
	if (config_validate(cfg, err, sizeof err) < 0 || program_identity(cfg, err, sizeof err) < 0)
		goto fail;
	return 0;
fail:
	stork_error("%s", err);
	return -1;
}

/*
 * restart.rejoin: a launcher the lead started in a step of its own takes the
 * lost node's place in the run's launchers (the step's own numbers are
 * one of one), and joins the attempt in flight.
 */
static int rejoin_place(struct layout *l)
{
	struct membership_rejoin r;
	char err[512];
	int rc = membership_rejoin_from_env(&r, err, sizeof err);

	l->first_attempt = 0;
	l->rejoin = rc > 0;
	if (rc < 0)
		stork_error("%s", err);
	if (rc <= 0)
		return rc;
	l->launchers = r.nnodes;
	l->index = r.node;
	l->first_attempt = r.attempt;
	return 0;
}

/*
 * Launcher 0 of the step that started the run: it writes the run's files
 * at the start and (unless it leaves) its summary at the end; a launcher
 * that came back in node 0's place (restart.rejoin) does neither.
 */
static int first_launcher(const struct layout *l)
{
	return l->index == 0 && !l->rejoin;
}

static int compute_layout(const struct run_options *o, const struct stork_config *cfg,
			  struct layout *l)
{
	long long tasks, step_tasks, index, nodes, step_nodes, restarts;
	char err[512];

	if (env_count("SLURM_NTASKS", 1, &tasks, err, sizeof err) < 0 ||
	    env_count("SLURM_STEP_NUM_TASKS", tasks, &step_tasks, err, sizeof err) < 0 ||
	    env_number("SLURM_PROCID", 0, step_tasks - 1, 0, &index, err, sizeof err) < 0 ||
	    env_count("SLURM_NNODES", 1, &nodes, err, sizeof err) < 0 ||
	    env_count("SLURM_STEP_NUM_NODES", nodes, &step_nodes, err, sizeof err) < 0 ||
	    env_number("SLURM_RESTART_COUNT", 0, INT_MAX, 0, &restarts, err, sizeof err) < 0) {
		stork_error("%s", err);
		return -1;
	}
	l->launchers = (int)step_tasks;
	l->index = (int)index;
	if (!getenv("SLURM_STEP_ID")) {
		l->launchers = 1;
		l->index = 0;
	}
	if (rejoin_place(l) < 0)
		return -1;
	if (o->local_ranks)
		l->local_ranks = o->local_ranks;
	else if (cfg->parallel.local_ranks)
		l->local_ranks = cfg->parallel.local_ranks;
	else if (l->launchers > step_nodes)
		l->local_ranks = 1; /* one launcher per task: one rank each */
	else
		l->local_ranks = 0;
	return 0;
}

/*
 * Several tasks of the step on this host (--ntasks-per-node=2): the first
 * runs every rank of the host, as if it were the host's only task, and
 * the others wait for its end (launcher/run/host_tasks.h). Returns 0, or the
 * exit code: a follower's is the leader's.
 */
static int join_host_tasks(const struct run_options *o, const struct stork_config *cfg,
			   struct layout *l, struct host_tasks *host)
{
	char err[512];
	int total;

	if (host_tasks_init(host, cfg->parallel.merge_tasks, err, sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_CONFIG;
	}
	if (host->role == HOST_FOLLOWER)
		return host_tasks_follow(host, l->local_ranks, cfg->run.rendezvous_timeout);
	if (host->role != HOST_LEADER)
		return 0;
	if (host_tasks_gather(host, l->local_ranks, cfg->run.rendezvous_timeout, &total, err,
			      sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_RENDEZVOUS;
	}
	if (compute_layout(o, cfg, l) < 0)
		return STORK_EXIT_CONFIG;
	l->local_ranks = total;
	return 0;
}

/*
 * config/stork.yaml, what storkd reads, is this launch's resolved
 * configuration; the first launcher also keeps it as config/stork.N.yaml,
 * N counting the launches of this run directory (requeues, reruns), so a
 * resume that changed a setting never erases what the earlier attempts
 * trained with.
 */
static int write_resolved_config(const char *run_dir, const struct stork_config *cfg, int first)
{
	char path[4200], err[512];
	char *yaml = config_to_yaml(cfg);
	mode_t mode = cfg->run.shared ? 0640 : 0600; /* run.shared: the group may read it */
	int rc = 0;

	if (!yaml)
		return -1;
	for (int n = 1; first && n < 100000; n++) {
		snprintf(path, sizeof path, "%s/config/stork.%d.yaml", run_dir, n);
		if (access(path, F_OK) == 0)
			continue;
		rc = atomic_write_file_mode(path, yaml, strlen(yaml), mode, err, sizeof err);
		break;
	}
	snprintf(path, sizeof path, "%s/config/stork.yaml", run_dir);
	/* storkd reads only a file of this user's that nobody else may write */
	if (rc == 0)
		rc = atomic_write_file_mode(path, yaml, strlen(yaml), mode, err, sizeof err);
	if (rc < 0)
		stork_error("%s", err);
	free(yaml);
	return rc;
}

/* What storkd reported on the result pipe (see daemon/storkd.c). */
struct daemon_result {
	int have;
	json_t *v;
	int oom;                    /* storkd was killed for memory (lib/oom_watch.h) */
	struct oom_verdict verdict;
};

static void read_result(int fd, struct daemon_result *res)
{
	char buf[8192], err[256];
	size_t used = 0;
	ssize_t n;

	while (used < sizeof buf - 1 && (n = read(fd, buf + used, sizeof buf - 1 - used)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		used += (size_t)n;
	}
	buf[used] = '\0';
	res->v = used ? sj_parse(buf, used, "storkd's report", err, sizeof err) : NULL;
	if (used && !res->v)
		stork_warn("%s", err);
	res->have = res->v != NULL;
}

/*
 * provenance/: written once the first daemon runs, while it meets the
 * others, not before it: asking git about the submit directory (a large
 * repository's status takes seconds) costs the start nothing then.
 */
static const char *provenance_dir;

static void write_provenance_once(void)
{
	char err[1024];

	if (!provenance_dir)
		return;
	if (rundir_write_provenance(provenance_dir, err, sizeof err) < 0)
		stork_warn("%s", err);
	provenance_dir = NULL;
}

/* Where storkd finds the write end of its result pipe (--result-fd). */
#define RESULT_FD (STDERR_FILENO + 1)

/*
 * In storkd's child, between fork and exec: keep stdin, stdout, stderr and
 * the result pipe (moved to RESULT_FD), close everything else. What the
 * launcher inherited (slurmstepd's listening socket, a shell's
 * redirections) would otherwise stay open in storkd and in every program
 * it starts. Closed in the child, not at the launcher's start: libraries
 * the launcher loads (PMIx, munge) may hold descriptors of their own before
 * main() runs, and the launcher runs nothing but its own code. closefrom
 * uses close_range(2) and, on kernels without it (RHEL 8's 4.18), reads
 * /proc/self/fd; both are safe after a fork in a threaded process.
 */
static void keep_result_fd_only(int fd)
{
	if (fd != RESULT_FD)
		dup2(fd, RESULT_FD);
	fcntl(RESULT_FD, F_SETFD, 0); /* keep it across exec */
	closefrom(RESULT_FD + 1);
}

/* The last step a rank logged: the "step" of its metrics file's last line. */
static int64_t rank_last_step(const char *run_dir, int rank)
{
	char path[4200];

	snprintf(path, sizeof path, "%s/logs/rank-%03d.metrics.jsonl", run_dir, rank);
	return metrics_file_last_step(path);
}

/* The ranks of node node_index (config/slurm_env.json): the first, and *count; -1 unknown. */
static int64_t node_ranks(const char *run_dir, int node_index, int64_t *count)
{
	char path[4200], err[512];
	const json_t *n;
	json_t *v;
	int64_t base;

	snprintf(path, sizeof path, "%s/config/slurm_env.json", run_dir);
	v = sj_load_file(path, err, sizeof err);
	n = json_array_get(json_object_get(v, "nodes"), (size_t)node_index);
	base = sj_int(n, "rank_base", -1);
	*count = sj_int(n, "local_ranks", -1);
	json_decref(v);
	return base >= 0 && *count > 0 ? base : -1;
}

/*
 * The last step every rank of a daemon that died without a report reached
 * (the lowest), from its ranks' metrics.
 */
static int64_t dead_node_last_step(const char *run_dir, int node_index)
{
	int64_t count, base = node_ranks(run_dir, node_index, &count), low = -1;

	for (int64_t r = base; base >= 0 && r < base + count; r++) {
		int64_t s = rank_last_step(run_dir, (int)r);

		if (s >= 0 && (low < 0 || s < low))
			low = s;
	}
	return low;
}

/* storkd's resident memory at its last sample (its first rank logs it); -1 none. */
static double node_last_resident(const char *run_dir, int node_index)
{
	int64_t count, base = node_ranks(run_dir, node_index, &count);
	char path[4200];

	if (base < 0)
		return -1;
	snprintf(path, sizeof path, "%s/logs/rank-%03d.metrics.jsonl", run_dir, (int)base);
	return metrics_file_last_value(path, "host_rss_bytes", -1);
}

/*
 * Start storkd, forward the signals a job receives to it, and wait. The
 * result pipe stays open in storkd only; its end of file tells us storkd is
 * gone even if it could not say why.
 */
static int supervise(const char *storkd, char **args, const char *run_dir, int node_index,
		     struct daemon_result *res, pid_t *pid_out, int *signal_out)
{
	struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
	char fdarg[16];
	int status, pipefd[2];
	struct oom_watch oom;
	pid_t pid;

	*signal_out = 0;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < STOP_SIGNAL_COUNT; i++)
		if (sigaction(stop_signal_list[i], &sa, NULL) < 0) {
			stork_error("cannot forward signal %d to storkd: %s", stop_signal_list[i],
				    strerror(errno));
			return STORK_EXIT_INTERNAL;
		}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		stork_error("cannot create a pipe: %s", strerror(errno));
		return STORK_EXIT_INTERNAL;
	}
	snprintf(fdarg, sizeof fdarg, "%d", RESULT_FD);
	for (int i = 0; args[i]; i++)
		if (!strcmp(args[i], "@RESULT_FD@"))
			args[i] = fdarg;
	/* storkd starts in this process's memory cgroup (the job step's); judged
	 * by it alone: a mark of the node's counter would be a whole attempt old */
	oom_watch_init(&oom);
	oom_watch_follow(&oom, getpid());
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		stork_error("cannot start %s: %s", storkd, strerror(errno));
		return STORK_EXIT_INTERNAL;
	}
	if (pid == 0) {
		keep_result_fd_only(pipefd[1]);
		execv(storkd, args);
		fprintf(stderr, "stork: cannot run %s: %s\n", storkd, strerror(errno));
		_exit(STORK_EXIT_INTERNAL);
	}
	child_pid = pid;
	*pid_out = pid;
	stop_signals_unblock(); /* what came since `stork run` began is forwarded now */
	write_provenance_once();
	close(pipefd[1]);
	read_result(pipefd[0], res);
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			stork_error("waiting for storkd: %s", strerror(errno));
			return STORK_EXIT_INTERNAL;
		}
	child_pid = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	*signal_out = WTERMSIG(status);
	if (WTERMSIG(status) == SIGKILL && (res->oom = oom_watch_verdict(&oom, &res->verdict))) {
		char text[2560];

		res->verdict.held = node_last_resident(run_dir, node_index);
		oom_verdict_text(&res->verdict, text, sizeof text);
		stork_error("storkd (pid %d) was %s", (int)pid, text);
		return STORK_EXIT_OUT_OF_MEMORY;
	}
	stork_error("storkd (pid %d) died of signal %s", (int)pid, sigabbrev_np(WTERMSIG(status)));
	return STORK_EXIT_RANK_FAILED;
}

static void latest_checkpoint(const char *run_dir, struct exit_info *e)
{
	char link[4200], target[256];
	ssize_t n;

	snprintf(link, sizeof link, "%s/checkpoints/latest", run_dir);
	n = readlink(link, target, sizeof target - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	/* a path too long to record is left out rather than recorded wrong */
	if (snprintf(e->last_checkpoint, sizeof e->last_checkpoint, "%s/checkpoints/%s", run_dir,
		     target) >= (int)sizeof e->last_checkpoint) {
		e->last_checkpoint[0] = '\0';
		return;
	}
	e->last_checkpoint_step = strtoll(target + 5, NULL, 10);
}

/* This node's exit_info from storkd's report, or from how it died. */
static void node_exit_info(struct exit_info *e, int code, const struct layout *l,
			   const char *run_dir, const struct daemon_result *res, pid_t pid, int sig)
{
	const char *msg;

	exit_info_init(e, code, l->index);
	latest_checkpoint(run_dir, e);
	if (sig) {
		struct exit_failure *f = &e->first_failure;

		f->valid = 1;
		f->rank = -1;
		snprintf(f->host, sizeof f->host, "%s", e->host);
		f->pid = (int)pid;
		f->exit_code = -1;
		snprintf(f->signal, sizeof f->signal, "SIG%s", sigabbrev_np(sig));
		f->time = clock_wall();
		f->last_step = dead_node_last_step(run_dir, l->index);
		snprintf(f->what, sizeof f->what, "storkd died of %s", f->signal);
		snprintf(e->message, sizeof e->message, "storkd (pid %d) on %s died of %s", (int)pid,
			 e->host, f->signal);
		if (res->oom) {
			int64_t count, base = node_ranks(run_dir, l->index, &count);
			char text[2560], ranks[64] = "";

			/* every engine rank of the node lived in it */
			if (base >= 0)
				snprintf(ranks, sizeof ranks, count > 1 ? ", ranks %lld-%lld," : ", rank %lld,",
					 (long long)base, (long long)(base + count - 1));
			oom_verdict_text(&res->verdict, text, sizeof text);
			f->oom = 1;
			snprintf(f->oom_cgroup, sizeof f->oom_cgroup, "%s",
				 res->verdict.cgroup ? res->verdict.dir : "");
			f->oom_limit = res->verdict.limit;
			f->oom_held = res->verdict.held;
			msg_format(f->what, sizeof f->what, "storkd%s was %s", ranks, text);
			msg_format(e->message, sizeof e->message, "storkd (pid %d) on %s%s was %s",
				   (int)pid, e->host, ranks, text);
		}
		return;
	}
	if (!res->have) {
		if (code != STORK_EXIT_OK)
			snprintf(e->message, sizeof e->message, "storkd exited with %d without a report",
				 code);
		return;
	}
	msg = json_string_value(json_object_get(res->v, "message"));
	snprintf(e->message, sizeof e->message, "%s", msg ? msg : "");
	exit_info_set_left(e, json_object_get(res->v, "left"));
	if (json_is_integer(json_object_get(res->v, "failed_rank"))) {
		struct exit_failure *f = &e->first_failure;

		const char *signame = json_string_value(json_object_get(res->v, "failed_rank_signal"));
		const char *error = json_string_value(json_object_get(res->v, "failed_rank_error"));
		const char *frame = json_string_value(json_object_get(res->v, "failed_rank_frame"));

		f->valid = 1;
		f->rank = (int)sj_int(res->v, "failed_rank", -1);
		snprintf(f->host, sizeof f->host, "%s", e->host);
		/* a rank of the user's program is a process of its own */
		f->pid = (int)sj_int(res->v, "failed_rank_pid", pid);
		f->exit_code = (int)sj_int(res->v, "failed_rank_code", code);
		snprintf(f->signal, sizeof f->signal, "%s", signame ? signame : "");
		f->time = sj_real(res->v, "fail_time", clock_wall());
		f->last_step = sj_int(res->v, "failed_rank_step", -1);
		snprintf(f->what, sizeof f->what, "%s", msg ? msg : "");
		snprintf(f->error, sizeof f->error, "%s", error ? error : "");
		snprintf(f->frame, sizeof f->frame, "%s", frame ? frame : "");
		f->secondary = json_is_true(json_object_get(res->v, "secondary"));
		exit_failure_oom_from(f, json_object_get(res->v, "failed_rank_oom"));
	} else if (code == STORK_EXIT_HANG) {
		struct exit_failure *f = &e->first_failure;

		f->valid = 1;
		f->rank = -1;
		snprintf(f->host, sizeof f->host, "%s", e->host);
		f->pid = (int)pid;
		f->exit_code = code;
		f->time = clock_wall();
		f->last_step = sj_int(res->v, "last_step", -1);
		snprintf(f->what, sizeof f->what, "%s", msg ? msg : "");
	}
}

/*
 * Launcher 0, after the rendezvous of a restart timed out: the nodes whose
 * launchers never came back (no record of this attempt) are lost. Requeue
 * the job without them, so that it comes back on the nodes that remain
 * (a job submitted with a node range, --nodes=1-2) instead of waiting for
 * them. Returns node_lost_requeued with the message in e, or code.
 */
static int requeue_without_lost(const char *run_dir, const struct layout *l,
				const struct exit_attempt *a, int code, struct exit_info *e)
{
	uint32_t job = slurm_job_id_from_env();
	char path[4200], hosts[1024] = "", err[1024];
	int *missing = calloc((size_t)l->launchers, sizeof *missing), n;
	json_t *env = NULL;
	size_t used = 0;

	if (!missing || !job)
		goto out;
	n = exit_info_missing(run_dir, l->launchers, a, 5.0, missing);
	if (path_join(path, sizeof path, run_dir, "config/slurm_env.json") < 0 ||
	    !(env = sj_load_file(path, err, sizeof err)))
		n = 0;
	for (int i = 0; i < n && used < sizeof hosts; i++) {
		const char *h = json_string_value(json_object_get(
			json_array_get(json_object_get(env, "nodes"), (size_t)missing[i]), "host"));

		if (h)
			used += (size_t)snprintf(hosts + used, sizeof hosts - used, "%s%s",
						 used ? "," : "", h);
	}
	if (!hosts[0] || used >= sizeof hosts)
		goto out;
	/* Slurm may have requeued it already (NODE_FAIL of a --requeue job):
	 * slurm_job_requeue counts that, and the exclusion is all that is left
	 * to do. A cancelled job stays cancelled. */
	if (slurm_job_requeue(job, err, sizeof err) != 0 ||
	    slurm_job_exclude_nodes(job, hosts, err, sizeof err) < 0) {
		stork_error("node(s) %s did not come back to the rendezvous of restart %d, and the "
			    "requeue without them failed: %s", hosts, a->attempt, err);
		goto out;
	}
	msg_format(e->message, sizeof e->message,
		   "node(s) %s did not come back to the rendezvous of restart %d: job %u requeued "
		   "without them (ExcNodeList=%s)", hosts, a->attempt, job, hosts);
	e->exit_code = code = STORK_EXIT_NODE_LOST;
	e->reason = exit_reason_name(code);
out:
	json_decref(env);
	free(missing);
	return code;
}

/*
 * Whether this launcher writes the run's summary: launcher 0, or once it
 * left while the others went on (restart.in_place), the first launcher
 * that remained (its daemon's nodes_left names every one before it);
 * never one that left, nor one that came back in a lost one's place
 * (restart.rejoin).
 */
static int summarises(const struct layout *l, const struct exit_info *node, int left)
{
	if (left || l->rejoin)
		return 0;
	for (int k = 0; k < l->index; k++)
		if (!exit_info_node_left(node, k))
			return 0;
	return 1;
}

/* The summary line, also in the run's TensorBoard files (at rank 0's last step). */
static void attempt_end_to_tensorboard(const char *run_dir, const struct exit_info *sum, int code,
				       int restarting)
{
	char text[1200];

	msg_format(text, sizeof text, "%s (exit %d)%s%s%s", sum->reason, code,
		   sum->message[0] ? ": " : "", sum->message, restarting ? "; restarting" : "");
	run_metrics_tensorboard_end(run_dir, rank_last_step(run_dir, 0), text);
}

/*
 * Write this node's exit_info for attempt a->attempt; the summariser
 * (summarises(): launcher 0 unless it left) also writes the summary (into
 * *sum), the attempts restarted before it listed, and says so in
 * *summary. A summary of an attempt about to be restarted is written
 * too, and overwritten by the next one's.
 */
static int finish(const char *run_dir, const struct layout *l, int code,
		  const struct daemon_result *res, pid_t pid, int sig, struct exit_attempt *a,
		  int restarting, int left, struct exit_info *sum, int *summary)
{
	struct exit_info node;
	char err[512];
	int final = code;

	node_exit_info(&node, code, l, run_dir, res, pid, sig);
	node.attempt = a->attempt;
	*summary = summarises(l, &node, left);
	run_metrics_write(run_dir, l->index, *summary);
	a->restart_count = node.restart_count;
	if (l->index == 0 && a->attempt > 0 && code == STORK_EXIT_RENDEZVOUS)
		code = requeue_without_lost(run_dir, l, a, code, &node);
	if (exit_info_write_node(run_dir, &node, err, sizeof err) < 0)
		stork_error("%s", err);
	if (!*summary) {
		*sum = node;
		return code;
	}
	a->summariser = l->index;
	/* Wait for the other nodes' records, unless they never joined. */
	final = exit_info_summarise(run_dir, l->launchers, a,
				    code == STORK_EXIT_RENDEZVOUS || code == STORK_EXIT_NODE_LOST ?
					    2.0 : 30.0, sum, err, sizeof err);
	end_notice_remove_all(run_dir); /* every node is done with them */
	membership_remove_all(run_dir);
	if (final < 0) {
		stork_error("%s", err);
		*sum = node;
		return code;
	}
	sum->attempt = a->attempt;
	printf("stork: %s (exit %d)%s%s%s\n", sum->reason, final, sum->message[0] ? ": " : "",
	       sum->message, restarting ? "; restarting" : "");
	fflush(stdout);
	attempt_end_to_tensorboard(run_dir, sum, final, restarting);
	if (!restarting && slurm_job_id_from_env()) {
		char comment[256];

		snprintf(comment, sizeof comment, "stork: %s%s", sum->reason,
			 a->nrestarts ? " after restarts" : "");
		slurm_job_set_comment(slurm_job_id_from_env(), comment);
	}
	return final;
}

/* The allocation's device-hours if it runs to its limit: GPUs when the job
 * has gres/gpu, else cores. */
static double allocation_hours(const struct slurm_job *job, int *per_node, const char **unit)
{
	*per_node = (job->gpus ? job->gpus : job->cpus) / (job->nodes > 0 ? job->nodes : 1);
	*unit = job->gpus ? "GPU" : "core";
	return (double)job->nodes * *per_node * job->limit_hours;
}

/*
 * run.max_gpu_hours: before anything is written, refuse a job whose
 * allocation would cost more than the budget if it ran to its limit (the
 * cost stork prints at start). Every launcher asks slurmctld, so that none
 * creates the run directory of a refused run. Outside Slurm there is no
 * allocation to pay for. slurmctld's answer is left in *asked (its id
 * stays 0 when nothing was asked). 0, or -1 with the reason.
 */
static int check_budget(const struct stork_config *cfg, struct slurm_job *asked, char *err,
			size_t len)
{
	uint32_t id = slurm_job_id_from_env();
	const char *where = config_origin(cfg, "run.max_gpu_hours"), *unit;
	struct slurm_job job;
	char why[512];
	double hours;
	int per_node;

	if (cfg->run.max_gpu_hours <= 0 || !id)
		return 0;
	if (slurm_job_query(id, &job, why, sizeof why) < 0) {
		msg_format(err, len, "%s: run.max_gpu_hours %g cannot be checked: %s", where,
			   cfg->run.max_gpu_hours, why);
		return -1;
	}
	*asked = job; /* launcher 0's check_job needs the same answer */
	if (job.limit_hours <= 0) {
		msg_format(err, len, "%s: run.max_gpu_hours %g: job %u has no time limit, so its cost "
			   "has no bound; submit it with --time", where, cfg->run.max_gpu_hours, id);
		return -1;
	}
	hours = allocation_hours(&job, &per_node, &unit);
	if (hours <= cfg->run.max_gpu_hours)
		return 0;
	msg_format(err, len, "%s: run.max_gpu_hours is %g but job %u's allocation costs %.2f "
		   "%s-hours if it runs to its limit (%d node(s) x %d %s%s x %.2f h): ask for less "
		   "time or fewer nodes, or raise run.max_gpu_hours", where, cfg->run.max_gpu_hours,
		   id, hours, unit, job.nodes, per_node, unit, per_node == 1 ? "" : "s",
		   job.limit_hours);
	return -1;
}

/*
 * The job's end that bounds staging (every launcher has slurmctld's answer
 * in asked); 0 when it has none. A test build may pretend one
 * (STORK_FAULT_JOB_END: seconds from now, as storkd takes it).
 */
static time_t job_end_for_staging(const struct slurm_job *asked)
{
#ifdef STORK_FAULT_INJECTION
	double fake = fault_seconds("STORK_FAULT_JOB_END");

	if (fake > 0)
		return time(NULL) + (time_t)fake;
#endif
	return asked->end_time;
}

/*
 * Before training (launcher 0 only): say when the job ends and whether it
 * can come back. Returns the end time (0: no limit, unknown, or not a
 * Slurm job), which storkd receives instead of asking slurmctld again.
 */
static time_t check_job(const struct slurm_job *asked)
{
	uint32_t id = slurm_job_id_from_env();
	struct slurm_job job;
	char err[512], when[64];

	if (!id)
		return 0;
	if (asked->id == id)
		job = *asked; /* the budget check asked already */
	else if (slurm_job_query(id, &job, err, sizeof err) < 0) {
		stork_warn("%s", err);
		return 0;
	}
	if (job.end_time) {
		struct tm tm;

		localtime_r(&job.end_time, &tm);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		stork_info("job %u ends at %s (in %ld s)", id, when, (long)(job.end_time - time(NULL)));
	} else {
		stork_info("job %u has no time limit", id);
	}
	if (job.limit_hours > 0 && job.nodes > 0) {
		/* what the allocation costs if it runs to its limit */
		const char *unit;
		int per_node;
		double hours = allocation_hours(&job, &per_node, &unit);

		stork_info("allocation: %d node(s) x %d %s x %.2f h = %.2f %s-hours if the job runs to "
			   "its limit", job.nodes, per_node, job.gpus ? "GPUs" : "cores",
			   job.limit_hours, hours, unit);
	}
	if (!job.requeue || !job.batch)
		stork_warn("job %u cannot be requeued (%s): a preemption signal will checkpoint and stop, "
			   "but the job will not come back by itself; submit with sbatch --requeue",
			   id, !job.batch ? "not a batch job" : "--no-requeue or JobRequeue=0");
	return job.end_time;
}

/*
 * Whether restart.max_restarts may mend how storkd ended: a rank that
 * crashed, was killed or hung (and so every rank of the node, whose
 * collectives broke). A configuration, data or checkpoint error, a
 * divergence, a stop or success would only happen again or must not.
 */
static int restartable(int code)
{
	return code == STORK_EXIT_RANK_FAILED || code == STORK_EXIT_HANG ||
	       code == STORK_EXIT_INTERNAL;
}

/*
 * Run storkd, and again after a failure while restart.max_restarts allows
 * (every node's launcher decides the same, as every node's daemon fails
 * with the first). Each attempt resumes from the latest checkpoint; a
 * stop signal (preemption) ends the restarts.
 */
/* The notification of how an attempt ended (launcher 0's summary). */
static void notify_end(struct notify *nt, int code, int restarting, const struct daemon_result *res,
		       const struct exit_info *sum)
{
	const char *event = restarting ? "restarted" :
			    code == STORK_EXIT_OK ? "completed" :
			    code == STORK_EXIT_CANCELLED ? "cancelled" :
			    code == STORK_EXIT_PREEMPTED || code == STORK_EXIT_TIMEOUT ||
					    code == STORK_EXIT_NODE_LOST ? "preempted" : "failed";

	notify_event(nt, event, res->v ? sj_int(res->v, "last_step", -1) : -1,
		     sum->reason ? sum->reason : exit_reason_name(code), sum->message);
}

static int attempts(const struct stork_config *cfg, const struct layout *l, const char *storkd, const char *run_dir,
		    const char *config_path, const char *nranks, const char *job_end, struct notify *nt)
{
	struct exit_info *failed = calloc((size_t)cfg->restart.max_restarts + 1, sizeof *failed);
	struct exit_attempt a = { .restarts = failed, .attempt = l->first_attempt };
	int code = STORK_EXIT_INTERNAL;

	if (!failed) {
		stork_error("out of memory");
		return STORK_EXIT_INTERNAL;
	}
	/* A PMIx client that dies makes Slurm's PMIx plugin cancel the whole
	 * step, restarts and all: daemons that may be restarted never become
	 * one, and meet over tcp from the first attempt. */
	if ((cfg->restart.max_restarts > 0 || cfg->restart.in_place) && getenv("PMIX_RANK")) {
		unsetenv("PMIX_RANK");
		unsetenv("PMIX_NAMESPACE");
		if (first_launcher(l))
			stork_info("%s: the daemons meet over tcp, not PMIx",
				   cfg->restart.in_place ? "restart.in_place" : "restart.max_restarts");
	}
	if (l->rejoin) {
		/* storkd knows a launcher by SLURM_PROCID, its place in the run:
		 * this one's is the lost launcher's, not the new step's 0 */
		char procid[16];

		snprintf(procid, sizeof procid, "%d", l->index);
		setenv("SLURM_PROCID", procid, 1);
	}
	for (;; a.attempt++) {
		char attempt_s[16];
		/* Only launcher 0 knows the end time; the others' lists end before it. */
		char *args[] = { (char *)storkd, "--config", (char *)config_path,
				 "--run-dir", (char *)run_dir, "--local-ranks", (char *)nranks,
				 "--attempt", attempt_s, "--result-fd", "@RESULT_FD@",
				 first_launcher(l) ? "--job-end" : NULL, (char *)job_end, NULL };
		struct daemon_result res = { 0 };
		pid_t pid = 0;
		int sig, restarting, left, summary;

		snprintf(attempt_s, sizeof attempt_s, "%d", a.attempt);
		code = supervise(storkd, args, run_dir, l->index, &res, &pid, &sig);
		left = in_place_leave(cfg, run_dir, l->index, l->launchers, a.attempt, code, sig,
				      json_string_value(json_object_get(res.v, "message")));
		/* a rejoiner's place ends with its attempt: the next starts without it */
		restarting = !left && !l->rejoin && restartable(code) &&
			     a.attempt < cfg->restart.max_restarts && !atomic_load(&stop_forwarded);
		code = finish(run_dir, l, code, &res, pid, sig, &a, restarting, left,
			      &failed[a.nrestarts], &summary);
		if (left)
			code = STORK_EXIT_OK; /* the run goes on: the others' exit says how it ends */
		if (summary)
			notify_end(nt, code, restarting, &res, &failed[a.nrestarts]);
		if (res.v)
			json_decref(res.v);
		if (!restarting)
			break;
		a.nrestarts++;
		if (cfg->program.command.n)
			stork_warn("starting the program again, which resumes from its own "
				   "checkpoint in STORK_CHECKPOINT_DIR (restart %d of "
				   "restart.max_restarts %d)", a.attempt + 1,
				   cfg->restart.max_restarts);
		else
			stork_warn("restarting storkd from the latest checkpoint (restart %d of "
				   "restart.max_restarts %d)", a.attempt + 1,
				   cfg->restart.max_restarts);
	}
	free(failed);
	return code;
}

/*
 * Data staging failed before storkd started (a 404, a wrong sha256, a
 * certificate): the run ends with exit_info saying so, as if storkd had
 * reported it, and the notification.
 */
static int staging_failed(const char *run_dir, const struct layout *l, int code, const char *why,
			  struct notify *nt)
{
	struct daemon_result res = { .have = 1 };
	struct exit_attempt a = { 0 };
	struct exit_info sum;
	int summary;

	res.v = json_pack("{s:i, s:i, s:o}", "exit_code", code, "last_step", -1, "message", sj_text(why));
	code = finish(run_dir, l, code, &res, 0, 0, &a, 0, 0, &sum, &summary);
	if (summary)
		notify_end(nt, code, 0, &res, &sum);
	json_decref(res.v);
	return code;
}

/* "started", at the step of the checkpoint the run resumes from (0: none). */
static void notify_started(struct notify *nt, const char *run_dir)
{
	char path[4200], target[256], message[300] = "a new run";
	long long step = 0;
	ssize_t len;

	if (!nt)
		return;
	if (path_join(path, sizeof path, run_dir, "checkpoints/latest") == 0 &&
	    (len = readlink(path, target, sizeof target - 1)) > 0) {
		target[len] = '\0';
		sscanf(target, "step_%lld", &step);
		snprintf(message, sizeof message, "resuming from checkpoint %s", target);
	}
	notify_event(nt, "started", step, "", message);
}

/*
 * stork run --check: the checks a start makes before its run directory
 * (preflight.c), and nothing else: no run directory, no storkd. This
 * node's driver counts only inside a job step, where the ranks would run;
 * on a login node it is not the nodes'.
 */
static int check_only(const struct run_options *o, const struct stork_config *cfg)
{
	struct preflight_data seen = { 0 };
	struct slurm_job job;
	uint32_t id = slurm_job_id_from_env();
	char err[1024];
	int known = id && slurm_job_query(id, &job, err, sizeof err) == 0;
	int code = preflight(cfg, known ? &job : NULL, getenv("SLURM_STEP_ID") != NULL, &seen, err,
			     sizeof err);

	if (code) {
		stork_error("%s", err);
		return code;
	}
	if (cfg->program.command.n) {
		printf("stork: %s: configuration and program check out; nothing was started\n",
		       o->config ? o->config : cfg->program.command.v[0]);
		return STORK_EXIT_OK;
	}
	printf("stork: %s: configuration and data check out: %d local shard(s) of data.train, "
	       "%llu tokens, for a %d-token model; nothing was started\n", o->config, seen.shards,
	       (unsigned long long)seen.tokens, cfg->model.vocab_size);
	return STORK_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
	struct run_options o;
	struct stork_config cfg;
	struct layout l;
	char run_dir[4096], storkd[4096], err[1024], config_path[4200];
	char nranks[16], job_end[24] = "";
	struct notify *nt = NULL;
	struct slurm_job asked = { 0 }; /* slurmctld's answer, once asked */
	struct host_tasks host = { .listen_fd = -1 };
	int code, rc;

	if (parse_run_options(argc, argv, &o) < 0)
		return STORK_EXIT_USAGE;
	/*
	 * A run outlives whatever reads its output: `stork run ... | head`
	 * closes the pipe after a few lines, and a SIGPIPE would end the
	 * launcher and storkd (which inherits the disposition) mid-training.
	 * Ignored, a write to the closed pipe fails instead, the training,
	 * the rank logs and exit_info.json carry on, and the exit code says
	 * how the run ended.
	 */
	signal(SIGPIPE, SIG_IGN);
	fault_delay("STORK_FAULT_START_DELAY"); /* preemption signals are blocked here */
	if (load_config(&o, &cfg) < 0) {
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	if (o.check) {
		code = check_only(&o, &cfg);
		goto out;
	}
	if (compute_layout(&o, &cfg, &l) < 0) {
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	if ((code = join_host_tasks(&o, &cfg, &l, &host)) != 0 || host.role == HOST_FOLLOWER)
		goto out;
	if (check_budget(&cfg, &asked, err, sizeof err) < 0) {
		stork_error("%s", err);
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	/* one question to slurmctld serves the checks below and launcher 0's
	 * check_job; unanswered, asked stays empty (id 0) and check_job says why */
	if (!asked.id && slurm_job_id_from_env())
		(void)slurm_job_query(slurm_job_id_from_env(), &asked, err, sizeof err);
	code = preflight(&cfg, asked.id ? &asked : NULL, 1, NULL, err, sizeof err);
	if (code) {
		stork_error("%s", err);
		goto out;
	}
	if (rundir_path(run_dir, sizeof run_dir, cfg.run.dir, cfg.run.name) < 0) {
		stork_error("the run directory's path is too long (run.dir, run.name)");
		code = STORK_EXIT_CONFIG;
		goto out;
	}
	if ((rc = rundir_create(run_dir, cfg.run.shared, err, sizeof err)) < 0) {
		stork_error("%s", err);
		/* refused: someone else's or open to others, a setting to change */
		code = rc == -2 ? STORK_EXIT_CONFIG : STORK_EXIT_INTERNAL;
		goto out;
	}
	if (write_resolved_config(run_dir, &cfg, first_launcher(&l)) < 0) {
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	provenance_dir = run_dir;
	if (first_launcher(&l)) {
		printf("stork: run directory %s\n", run_dir);
		snprintf(job_end, sizeof job_end, "%lld", (long long)check_job(&asked));
	}
	/* the user's program has a daemon of its own, which loads no engine */
	if (cfg.program.command.n)
		find_program_daemon(storkd, sizeof storkd);
	else
		find_storkd(o.storkd, storkd, sizeof storkd);
	snprintf(config_path, sizeof config_path, "%s/config/stork.yaml", run_dir);
	if (l.local_ranks)
		snprintf(nranks, sizeof nranks, "%d", l.local_ranks);
	else
		snprintf(nranks, sizeof nranks, "auto");
	if (first_launcher(&l)) {
		nt = notify_open(&cfg, run_dir);
		notify_started(nt, run_dir);
	}
	/* the user's own program reads its own data */
	code = cfg.program.command.n ? 0 : stage_data(&cfg, job_end_for_staging(&asked), err, sizeof err);
	if (code) {
		stork_error("%s", err);
		code = staging_failed(run_dir, &l, code, err, nt);
	} else {
		code = attempts(&cfg, &l, storkd, run_dir, config_path, nranks, job_end, nt);
	}
	write_provenance_once(); /* when no daemon started (staging failed) */
	notify_close(nt);
out:
	host_tasks_end(&host, code);
	config_free(&cfg);
	free(o.overrides);
	return code;
}
