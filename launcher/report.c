/*
 * launcher/report.c - `stork report --text RUN_DIR` and `stork report
 * RUNS_DIR`: a run read back from its directory, for a terminal.
 *
 * One run: why it ended and the first failure in words, the restarts
 * inside the allocation, the layout and the nodes, the steps and final
 * losses, throughput, each rank's compute time and the stragglers (ranks
 * whose median compute time is more than 10% above the median of all
 * ranks' medians), the checkpoints. Several runs (a directory of run
 * directories): one line each.
 *
 * Everything comes from the files stork(1) documents (exit_info.json,
 * config/slurm_env.json, logs/rank-NNN.metrics.jsonl, checkpoints/); a file
 * that is missing or damaged is said, never fatal.
 */
#include "config.h"
#include "launcher/commands.h"

#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/stork_json.h"

#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STRAGGLER_MARGIN 0.10

/* The values of one metric of one rank, in step order (the last value
 * logged for a step wins: a resumed run may log a step twice). */
struct series {
	double *v;
	long *step;
	size_t n, cap;
};

static void series_add(struct series *s, long step, double v)
{
	if (s->n && s->step[s->n - 1] >= step) {
		/* a step logged again after a resume: keep the latest value */
		while (s->n && s->step[s->n - 1] >= step)
			s->n--;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		double *nv = realloc(s->v, cap * sizeof *nv);
		long *st;

		if (!nv)
			return;
		s->v = nv;
		if (!(st = realloc(s->step, cap * sizeof *st)))
			return;
		s->step = st;
		s->cap = cap;
	}
	s->step[s->n] = step;
	s->v[s->n++] = v;
}

static void series_free(struct series *s)
{
	free(s->v);
	free(s->step);
	memset(s, 0, sizeof *s);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const struct series *s)
{
	double *c, m;

	if (!s->n || !(c = malloc(s->n * sizeof *c)))
		return NAN;
	memcpy(c, s->v, s->n * sizeof *c);
	qsort(c, s->n, sizeof *c, cmp_double);
	m = s->n % 2 ? c[s->n / 2] : (c[s->n / 2 - 1] + c[s->n / 2]) / 2;
	free(c);
	return m;
}

/* One rank's metrics file: the series of the metrics the report shows. */
struct rank_metrics {
	struct series train_loss, val_loss, tps, step_ms, compute_ms;
};

static void read_rank(const char *path, struct rank_metrics *m)
{
	char line[4096], err[256];
	FILE *f = fopen_regular(path);

	while (f && fgets(line, sizeof line, f)) {
		json_t *v = sj_parse(line, strlen(line), path, err, sizeof err);
		const char *name = json_string_value(json_object_get(v, "metric"));
		const json_t *value = json_object_get(v, "value");
		long step = (long)sj_int(v, "step", -1);
		struct series *s = NULL;

		if (name && json_is_number(value)) {
			if (!strcmp(name, "train_loss"))
				s = &m->train_loss;
			else if (!strcmp(name, "val_loss"))
				s = &m->val_loss;
			else if (!strcmp(name, "tokens_per_sec"))
				s = &m->tps;
			else if (!strcmp(name, "step_time_ms"))
				s = &m->step_ms;
			else if (!strcmp(name, "compute_ms"))
				s = &m->compute_ms;
		}
		if (s)
			series_add(s, step, json_number_value(value));
		json_decref(v);
	}
	if (f)
		fclose(f);
}

static void free_rank(struct rank_metrics *m)
{
	series_free(&m->train_loss);
	series_free(&m->val_loss);
	series_free(&m->tps);
	series_free(&m->step_ms);
	series_free(&m->compute_ms);
}

/* A JSON file of the run directory, or NULL with the reason printed. */
static json_t *load(const char *dir, const char *name, int quiet)
{
	char path[4200], err[1024];
	json_t *v;

	if (path_join(path, sizeof path, dir, name) < 0)
		return NULL;
	v = sj_load_file(path, err, sizeof err);
	if (!v && !quiet)
		printf("(%s)\n", err);
	return v;
}

static void print_failure(const char *label, const json_t *f)
{
	const json_t *rank = json_object_get(f, "rank");
	const char *signal = json_string_value(json_object_get(f, "signal"));

	if (!json_is_object(f)) {
		printf("%s: none\n", label);
		return;
	}
	printf("%s: ", label);
	if (json_is_integer(rank))
		printf("rank %lld", (long long)json_integer_value(rank));
	else
		printf("the daemon");
	printf(" on %s (pid %lld), ", json_string_value(json_object_get(f, "host")) ?: "?",
	       (long long)sj_int(f, "pid", 0));
	if (signal)
		printf("killed by %s", signal);
	else
		printf("exit %lld", (long long)sj_int(f, "exit_code", -1));
	printf(" after step %lld at %s%s: %s\n", (long long)sj_int(f, "last_step", -1),
	       json_string_value(json_object_get(f, "time")) ?: "?",
	       json_is_true(json_object_get(f, "secondary")) ? " (in consequence of another)" :
							       "",
	       json_string_value(json_object_get(f, "what")) ?: "");
}

static void print_exit(const json_t *e)
{
	const json_t *restarts = json_object_get(e, "restarts");
	size_t i;
	json_t *r;

	printf("reason: %s (exit %lld): %s\n", json_string_value(json_object_get(e, "reason")) ?: "?",
	       (long long)sj_int(e, "exit_code", -1),
	       json_string_value(json_object_get(e, "message")) ?: "");
	print_failure("first failure", json_object_get(e, "first_failure"));
	printf("requeues: %lld; restarts inside the allocation: %zu\n",
	       (long long)sj_int(e, "restart_count", 0), json_array_size(restarts));
	json_array_foreach(restarts, i, r)
		printf("  restart after attempt %lld: %s: %s\n", (long long)sj_int(r, "attempt", -1),
		       json_string_value(json_object_get(r, "reason")) ?: "?",
		       json_string_value(json_object_get(r, "message")) ?: "");
}

static void print_layout(const json_t *env)
{
	const json_t *par = json_object_get(env, "parallel"), *nodes = json_object_get(env, "nodes");
	size_t i;
	json_t *n;

	printf("layout: dp %lld x tp %lld x pp %lld%s, %lld rank(s) on %zu node(s), rendezvous %s "
	       "(%.3f s)\n", (long long)sj_int(par, "dp", 1), (long long)sj_int(par, "tp", 1),
	       (long long)sj_int(par, "pp", 1), sj_int(par, "zero", 0) ? " with ZeRO-1" : "",
	       (long long)sj_int(env, "world_size", 0), json_array_size(nodes),
	       json_string_value(json_object_get(env, "rendezvous")) ?: "?",
	       sj_real(env, "rendezvous_seconds", 0));
	json_array_foreach(nodes, i, n) {
		long long base = sj_int(n, "rank_base", 0), count = sj_int(n, "local_ranks", 0);
		size_t k;
		json_t *b;

		printf("  node %zu %s: ranks %lld-%lld;", i,
		       json_string_value(json_object_get(n, "host")) ?: "?", base, base + count - 1);
		json_array_foreach(json_object_get(n, "ranks"), k, b)
			printf(" rank %lld cpus %s gpu %lld numa %lld;", base + (long long)k,
			       json_string_value(json_object_get(b, "cpus")) ?: "?",
			       (long long)sj_int(b, "gpu", -1), (long long)sj_int(b, "numa", -1));
		printf("\n");
	}
}

/*
 * Each rank's median compute time, and the stragglers: more than 10% above
 * the median of those medians. Returns the number of stragglers.
 */
static int print_ranks(struct rank_metrics *m, int n)
{
	struct series meds = { 0 };
	double all;
	int slow = 0;

	printf("compute time per rank (median ms):");
	for (int r = 0; r < n; r++) {
		double med = median(&m[r].compute_ms);

		printf(" %d: %.2f", r, med);
		if (!isnan(med))
			series_add(&meds, r, med);
	}
	printf("\n");
	all = median(&meds);
	for (int r = 0; r < n && !isnan(all); r++) {
		double med = median(&m[r].compute_ms);

		if (med > all * (1 + STRAGGLER_MARGIN)) {
			printf("straggler: rank %d, median compute %.2f ms, %.0f%% above the median of all "
			       "ranks (%.2f ms)\n", r, med, 100 * (med / all - 1), all);
			slow++;
		}
	}
	if (!slow)
		printf("stragglers: none (no rank more than %.0f%% above the median of all ranks, "
		       "%.2f ms)\n", 100 * STRAGGLER_MARGIN, all);
	series_free(&meds);
	return slow;
}

/* rank-NNN.metrics.jsonl files of dir, in rank order; *n their number. */
static struct rank_metrics *read_ranks(const char *dir, int *n)
{
	char pattern[4200];
	glob_t g = { 0 };
	struct rank_metrics *m;

	*n = 0;
	if (path_join(pattern, sizeof pattern, dir, "logs/rank-*.metrics.jsonl") < 0)
		return NULL;
	glob(pattern, 0, NULL, &g);
	m = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *m);
	for (size_t i = 0; m && i < g.gl_pathc; i++)
		read_rank(g.gl_pathv[i], &m[i]);
	*n = m ? (int)g.gl_pathc : 0;
	globfree(&g);
	return m;
}

static double last(const struct series *s)
{
	return s->n ? s->v[s->n - 1] : NAN;
}

static int report_text(const char *dir)
{
	json_t *e = load(dir, "exit_info.json", 0), *env = load(dir, "config/slurm_env.json", 0);
	struct rank_metrics *m;
	char link[4200], target[256];
	ssize_t len;
	int n;

	printf("run: %s\n", dir);
	if (e)
		print_exit(e);
	if (env)
		print_layout(env);
	m = read_ranks(dir, &n);
	if (m && n > 0) {
		printf("steps: %zu; final train loss %.4f, last validation loss %.4f\n",
		       m[0].train_loss.n, last(&m[0].train_loss), last(&m[0].val_loss));
		printf("throughput: median %.0f tokens/s, median step %.1f ms\n", median(&m[0].tps),
		       median(&m[0].step_ms));
		print_ranks(m, n);
	} else {
		printf("(no metrics under %s/logs)\n", dir);
	}
	if (path_join(link, sizeof link, dir, "checkpoints/latest") == 0 &&
	    (len = readlink(link, target, sizeof target - 1)) > 0) {
		target[len] = '\0';
		printf("latest checkpoint: %s\n", target);
	} else {
		printf("latest checkpoint: none\n");
	}
	for (int r = 0; m && r < n; r++)
		free_rank(&m[r]);
	free(m);
	json_decref(e);
	json_decref(env);
	return STORK_EXIT_OK;
}

/* One line per run directory under root (name__job=...). */
static int report_runs(const char *root)
{
	struct dirent **list = NULL;
	int n = scandir(root, &list, NULL, alphasort), shown = 0;

	printf("%-40s %8s %7s %10s %10s %10s  %s\n", "run", "job", "steps", "train", "val",
	       "tok/s", "reason");
	for (int i = 0; i < n; i++) {
		char dir[4200], *job;
		struct rank_metrics *m;
		json_t *e;
		int nr;

		if (!(job = strstr(list[i]->d_name, "__job=")) ||
		    path_join(dir, sizeof dir, root, list[i]->d_name) < 0)
			goto next;
		e = load(dir, "exit_info.json", 1);
		m = read_ranks(dir, &nr);
		printf("%-40.*s %8.*s %7zu %10.4f %10.4f %10.0f  %s\n", (int)(job - list[i]->d_name),
		       list[i]->d_name, (int)strcspn(job + 6, "_"), job + 6,
		       nr ? m[0].train_loss.n : 0, nr ? last(&m[0].train_loss) : NAN,
		       nr ? last(&m[0].val_loss) : NAN, nr ? median(&m[0].tps) : NAN,
		       e ? json_string_value(json_object_get(e, "reason")) ?: "?" : "(running, or no exit_info.json)");
		for (int r = 0; m && r < nr; r++)
			free_rank(&m[r]);
		free(m);
		json_decref(e);
		shown++;
next:
		free(list[i]);
	}
	free(list);
	if (n < 0) {
		stork_error("cannot read %s", root);
		return STORK_EXIT_USAGE;
	}
	if (!shown)
		printf("(no run directories under %s)\n", root);
	return STORK_EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
	char path[4200];
	struct stat st;
	const char *dir;
	int text = 0, i = 1;

	if (i < argc && !strcmp(argv[i], "--text")) {
		text = 1;
		i++;
	}
	if (i != argc - 1)
		goto usage;
	dir = argv[i];
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		stork_error("%s: not a directory", dir);
		return STORK_EXIT_USAGE;
	}
	if (path_join(path, sizeof path, dir, "config") == 0 && stat(path, &st) == 0) {
		if (!text) {
			stork_error("the HTML report of a run is not built yet: use stork report --text %s",
				    dir);
			return STORK_EXIT_USAGE;
		}
		return report_text(dir);
	}
	return report_runs(dir);
usage:
	fprintf(stderr, "usage: stork report --text RUN_DIR\n"
			"       stork report RUNS_DIR      (one line per run)\n");
	return STORK_EXIT_USAGE;
}
