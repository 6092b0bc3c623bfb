/*
 * launcher/bench_launch.c - `stork bench launch CONFIG [--nodes N]
 * [--repeat R]`: what Stork adds to a job step's start.
 *
 * Run inside an allocation (sbatch or salloc). It times a bare
 * `srun -N N true`, then `srun -N N --mpi=pmix stork run CONFIG` for one
 * step, from the moment srun is started to the moment the first training
 * step begins (its metrics timestamp minus its duration), and prints the
 * medians and their difference: the launch overhead (rendezvous, binding,
 * model build, data open).
 */
#include "config.h"
#include "launcher/bench_util.h"
#include "lib/clock.h"
#include "launcher/commands.h"

#include "lib/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io.h"
#include "lib/metrics_file.h"
#include "lib/stork_json.h"
#include "lib/log.h"
#include "lib/rundir.h"
#include "lib/stork_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Step 1's start: its step_time_ms line's "ts" minus the value. Stops there. */
static int first_step_line(const char *line, void *arg)
{
	double *start = arg, ts, ms;
	char err[256];
	json_t *v;

	if (!metrics_line_is(line, "step_time_ms") ||
	    !(v = sj_parse(line, strlen(line), "metrics line", err, sizeof err)))
		return 0;
	ts = sj_real(v, "ts", -1);
	ms = sj_real(v, "value", -1);
	if (sj_int(v, "step", 0) == 1 && ts > 0 && ms >= 0)
		*start = ts - ms / 1e3;
	json_decref(v);
	return *start > 0;
}

/* Start of step 1 in a run directory: its metrics "ts" minus its duration. */
static double first_step_start(const char *run_dir)
{
	char path[4200];
	double start = -1;

	snprintf(path, sizeof path, "%s/logs/rank-000.metrics.jsonl", run_dir);
	metrics_file_lines(path, first_step_line, &start);
	return start;
}

/* The rendezvous' seconds, as slurm_env.json recorded them; -1 unknown. */
static double rendezvous_seconds(const char *run_dir)
{
	char path[4200], err[512];
	json_t *v;
	double s;

	if (path_join(path, sizeof path, run_dir, "config/slurm_env.json") < 0)
		return -1;
	v = sj_load_file(path, err, sizeof err);
	s = sj_real(v, "rendezvous_seconds", -1);
	json_decref(v);
	return s;
}

int cmd_bench_launch(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "nodes", required_argument, NULL, 'N' },
		{ "repeat", required_argument, NULL, 'r' },
		{ 0 },
	};
	int nodes = 2, repeat = 5, c;
	char self[4096], run_dir[4096], name[64], name_arg[80], count[16];
	const char *what = "srun";
	double bare[64], stork[64], rdv[64];
	struct stork_config cfg;
	char err[1024];
	ssize_t n;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'N' && atoi(optarg) > 0)
			nodes = atoi(optarg);
		else if (c == 'r' && atoi(optarg) > 0 && atoi(optarg) <= 64)
			repeat = atoi(optarg);
		else
			goto usage;
	}
	if (optind != argc - 1)
		goto usage;
	if (!getenv("SLURM_JOB_ID")) {
		stork_error("bench launch runs srun: start it inside an allocation (sbatch or salloc)");
		return STORK_EXIT_USAGE;
	}
	if (config_load(&cfg, argv[optind], err, sizeof err) < 0 ||
	    config_validate(&cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = '\0';
	snprintf(count, sizeof count, "%d", nodes);
	for (int i = 0; i < repeat; i++) {
		double t0 = clock_wall();

		char *bare_argv[] = { "srun", "-N", count, "-n", count, "--ntasks-per-node=1", "true",
				      NULL };
		char *stork_argv[] = { "srun", "-N", count, "-n", count, "--ntasks-per-node=1",
				       "--mpi=pmix", self, "run", argv[optind], "train.steps=1",
				       "train.val_every=0", name_arg, NULL };

		what = "srun ... true";
		if (spawn_wait(bare_argv, NULL) != 0)
			goto failed;
		bare[i] = clock_wall() - t0;

		snprintf(name, sizeof name, "bench-launch-%d-%d", (int)getpid(), i);
		snprintf(name_arg, sizeof name_arg, "run.name=%s", name);
		rundir_path(run_dir, sizeof run_dir, cfg.run.dir, name);
		t0 = clock_wall();
		what = "srun ... stork run";
		if (spawn_wait(stork_argv, "/dev/null") != 0)
			goto failed;
		stork[i] = first_step_start(run_dir) - t0;
		rdv[i] = rendezvous_seconds(run_dir);
		if (remove_tree(run_dir) < 0)
			stork_warn("cannot remove %s: %s", run_dir, strerror(errno));
		printf("run %d: srun true %.3f s, srun stork run to the first step %.3f s "
		       "(rendezvous %.3f s)\n", i + 1, bare[i], stork[i], rdv[i]);
	}
	printf("median over %d runs on %d node(s): srun true %.3f s; stork run to step 1 %.3f s; "
	       "launch overhead %.3f s; rendezvous %.3f s\n", repeat, nodes, bench_median(bare, repeat),
	       bench_median(stork, repeat), bench_median(stork, repeat) - bench_median(bare, repeat),
	       bench_median(rdv, repeat));
	config_free(&cfg);
	return STORK_EXIT_OK;
failed:
	stork_error("'%s' failed", what);
	config_free(&cfg);
	return STORK_EXIT_INTERNAL;
usage:
	fprintf(stderr, "usage: stork bench launch CONFIG [--nodes N] [--repeat R]\n");
	return STORK_EXIT_USAGE;
}
