/*
 * launcher/bench/bench_launch.c - `stork bench launch CONFIG [--nodes N]
 * [--repeat R]`: what Stork adds to a job step's start; `stork bench
 * launch --program [--nodes N] [--ranks R] [--repeat R] [-- PROGRAM...]`:
 * the same for the user's own program, one that prints the wall-clock
 * time as its line's last word (an MPI hello world once MPI_Init is done;
 * by default `date +%s.%N`).
 *
 * Run inside an allocation (sbatch or salloc). It times a bare
 * `srun -N N true`, then `srun -N N --mpi=pmix stork run CONFIG` for one
 * step, from the moment srun is started to the moment the first training
 * step begins (its metrics timestamp minus its duration), and prints the
 * medians and their difference: the launch overhead (rendezvous, binding,
 * model build, data open).
 */
#include "config.h"
#include "launcher/bench/bench_util.h"
#include "lib/clock.h"
#include "launcher/commands.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/io.h"
#include "lib/run/metrics_file.h"
#include "lib/formats/stork_json.h"
#include "lib/log.h"
#include "lib/run/rundir.h"
#include "lib/config/stork_config.h"

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

/* The latest of the times ("1795561546.102") the ranks printed in file. */
static double latest_printed_time(const char *path)
{
	char *text = file_text(path, 1 << 20), *line, *save = NULL;
	double latest = -1;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char *p = strrchr(line, ' '), *end;
		double t = strtod(p ? p + 1 : line, &end);

		if (*end == '\0' && t > latest)
			latest = t;
	}
	free(text);
	return latest;
}

/* argv of fixed words, then prog's words, NULL-terminated (malloc'ed; NULL: no memory). */
static char **with_program(char *const *fixed, int nfixed, char *const *prog, int nprog)
{
	char **v = calloc((size_t)(nfixed + nprog + 1), sizeof *v);

	if (!v)
		return NULL;
	memcpy(v, fixed, (size_t)nfixed * sizeof *v);
	memcpy(v + nfixed, prog, (size_t)nprog * sizeof *v);
	return v;
}

/*
 * --program: from srun's start to the last rank's printed time (the rank
 * prints its own clock, so both launches are timed alike), R ranks on each
 * of N nodes: plain srun --mpi=pmix, one task per rank, with the plugin's
 * environment (the floor: Slurm's own PMIx server for an MPI program),
 * beside srun stork run --local-ranks R -- PROGRAM.
 */
static int bench_program(int nodes, int ranks, int repeat, char *const *prog, int nprog)
{
	char self[4096], out[64], per_node[40], count[16], total[16], local[16], name[96];
	char *date[] = { "/bin/sh", "-c", "date +%s.%N", NULL };
	double plain[64], stork[64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	if (!nprog) {
		prog = date;
		nprog = 3;
	}

	self[n > 0 ? n : 0] = '\0';
	snprintf(count, sizeof count, "%d", nodes);
	snprintf(total, sizeof total, "%d", nodes * ranks);
	snprintf(per_node, sizeof per_node, "--ntasks-per-node=%d", ranks);
	snprintf(local, sizeof local, "%d", ranks);
	snprintf(out, sizeof out, ".bench-launch-%d.out", (int)getpid());
	for (int i = 0; i < repeat; i++) {
		char *plain_words[] = { "srun", "-N", count, "-n", total, per_node, "--mpi=pmix" };
		char *stork_words[] = { "srun", "-N", count, "-n", count, "--ntasks-per-node=1",
					"--mpi=pmix", self, "run", "--local-ranks", local, "--set", name,
					"--set", "program.tee=all", "--" };
		char **plain_argv = with_program(plain_words, 7, prog, nprog);
		char **stork_argv = with_program(stork_words, 16, prog, nprog);
		char run_dir[4096];
		double t0 = clock_wall();
		int failed;

		if (!plain_argv || !stork_argv) {
			free(plain_argv);
			free(stork_argv);
			stork_error("out of memory");
			return STORK_EXIT_INTERNAL;
		}
		failed = spawn_wait(plain_argv, out) != 0;
		free(plain_argv);
		if (failed) {
			free(stork_argv);
			stork_error("'srun ... %s' failed", prog[0]);
			return STORK_EXIT_INTERNAL;
		}
		plain[i] = latest_printed_time(out) - t0;
		snprintf(name, sizeof name, "run.name=bench-launch-%d-%d", (int)getpid(), i);
		rundir_path(run_dir, sizeof run_dir, "runs", name + 9);
		t0 = clock_wall();
		failed = spawn_wait(stork_argv, out) != 0;
		free(stork_argv);
		if (failed) {
			stork_error("'srun ... stork run -- %s' failed", prog[0]);
			return STORK_EXIT_INTERNAL;
		}
		stork[i] = latest_printed_time(out) - t0;
		if (remove_tree(run_dir) < 0)
			stork_warn("cannot remove %s: %s", run_dir, strerror(errno));
		printf("run %d: srun (plugin) %.3f s, srun stork run -- %.3f s to every rank's printed "
		       "time\n", i + 1, plain[i], stork[i]);
	}
	unlink(out);
	printf("median over %d runs, %d node(s) x %d rank(s): srun with the plugin %.3f s; stork "
	       "run -- PROGRAM %.3f s; stork adds %.3f s\n", repeat, nodes, ranks,
	       bench_median(plain, repeat), bench_median(stork, repeat),
	       bench_median(stork, repeat) - bench_median(plain, repeat));
	return STORK_EXIT_OK;
}

int cmd_bench_launch(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "nodes", required_argument, NULL, 'N' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "program", no_argument, NULL, 'p' },
		{ "ranks", required_argument, NULL, 'R' },
		{ 0 },
	};
	int nodes = 2, repeat = 5, program = 0, ranks = 2, c;
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
		else if (c == 'R' && atoi(optarg) > 0 && atoi(optarg) <= 4096)
			ranks = atoi(optarg);
		else if (c == 'p')
			program = 1;
		else
			goto usage;
	}
	if (program ? optind < argc && strcmp(argv[optind - 1], "--") : optind != argc - 1)
		goto usage;
	if (!getenv("SLURM_JOB_ID")) {
		stork_error("bench launch runs srun: start it inside an allocation (sbatch or salloc)");
		return STORK_EXIT_USAGE;
	}
	if (program)
		return bench_program(nodes, ranks, repeat, argv + optind, argc - optind);
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
	fprintf(stderr, "usage: stork bench launch CONFIG [--nodes N] [--repeat R]\n"
			"       stork bench launch --program [--nodes N] [--ranks R] [--repeat R] "
			"[-- PROGRAM...]\n");
	return STORK_EXIT_USAGE;
}
