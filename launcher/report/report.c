/*
 * launcher/report/report.c - `stork report`: RUN_DIR writes the run's HTML page
 * (launcher/report/report_html.c), --text RUN_DIR prints its summary, RUNS_DIR one
 * line per run. Each run is loaded by launcher/report/report_data.c.
 *
 * One run: why it ended and the first failure in words, the restarts
 * inside the allocation, the layout and the nodes, the steps and final
 * losses, throughput, each rank's compute time and the stragglers (ranks
 * whose median compute time is more than 10% above the median of all
 * ranks' medians), the loss spikes, the checkpoints. Several runs (a directory of run
 * directories): one line each.
 *
 * Everything comes from the files stork(1) documents (exit_info.json,
 * config/slurm_env.json, logs/rank-NNN.metrics.jsonl, checkpoints/); a file
 * that is missing or damaged is said, never fatal.
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/report/report.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/term_text.h"
#include "lib/formats/stork_json.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void print_failure(const char *label, const json_t *f)
{
	const json_t *rank = json_object_get(f, "rank");
	const char *signal = json_string_value(json_object_get(f, "signal"));

	if (!json_is_object(f)) {
		term_printf(stdout, "%s: none\n", label);
		return;
	}
	term_printf(stdout, "%s: ", label);
	if (json_is_integer(rank))
		term_printf(stdout, "rank %lld", (long long)json_integer_value(rank));
	else
		term_printf(stdout, "the daemon");
	term_printf(stdout, " on %s (pid %lld), ", json_string_value(json_object_get(f, "host")) ?: "?",
	       (long long)sj_int(f, "pid", 0));
	if (signal)
		term_printf(stdout, "killed by %s", signal);
	else
		term_printf(stdout, "exit %lld", (long long)sj_int(f, "exit_code", -1));
	term_printf(stdout, " after step %lld at %s%s: %s\n", (long long)sj_int(f, "last_step", -1),
	       json_string_value(json_object_get(f, "time")) ?: "?",
	       json_is_true(json_object_get(f, "secondary")) ? " (in consequence of another)" :
							       "",
	       json_string_value(json_object_get(f, "what")) ?: "");
}

/* Each line of text, after prefix. */
static void print_lines(const char *prefix, const char *text)
{
	while (*text) {
		int n = (int)strcspn(text, "\n");

		term_printf(stdout, "%s%.*s\n", prefix, n, text);
		text += n + (text[n] == '\n');
	}
}

static void print_exit(const struct run_report *rep)
{
	const json_t *e = rep->exit_info;
	const json_t *restarts = json_object_get(e, "restarts");
	size_t i;
	json_t *r;

	term_printf(stdout, "reason: %s (exit %lld): %s\n", json_string_value(json_object_get(e, "reason")) ?: "?",
	       (long long)sj_int(e, "exit_code", -1),
	       json_string_value(json_object_get(e, "message")) ?: "");
	print_failure("first failure", json_object_get(e, "first_failure"));
	if (report_oom_advice(rep))
		term_printf(stdout, "out of memory, to fit: %s\n", report_oom_advice(rep));
	term_printf(stdout, "requeues: %lld; restarts inside the allocation: %zu\n",
	       (long long)sj_int(e, "restart_count", 0), json_array_size(restarts));
	/* each requeue and why (report_data.c: read_requeues), under the count */
	print_lines("  ", rep->requeues);
	json_array_foreach(restarts, i, r)
		term_printf(stdout, "  restart after attempt %lld: %s: %s\n", (long long)sj_int(r, "attempt", -1),
		       json_string_value(json_object_get(r, "reason")) ?: "?",
		       json_string_value(json_object_get(r, "message")) ?: "");
}

static void print_layout(const json_t *env)
{
	const json_t *par = json_object_get(env, "parallel"), *nodes = json_object_get(env, "nodes");
	size_t i;
	json_t *n;

	/* a run of the user's own program has no layout of the engine's */
	if (par)
		term_printf(stdout, "layout: dp %lld x tp %lld x pp %lld%s%.0lld, ",
			    (long long)sj_int(par, "dp", 1), (long long)sj_int(par, "tp", 1),
			    (long long)sj_int(par, "pp", 1), sj_int(par, "zero", 0) ? " with ZeRO-" : "",
			    (long long)sj_int(par, "zero", 0));
	else
		term_printf(stdout, "layout: the program's own, ");
	term_printf(stdout, "%lld rank(s) on %zu node(s), rendezvous %s "
	       "(%.3f s)\n", (long long)sj_int(env, "world_size", 0), json_array_size(nodes),
	       json_string_value(json_object_get(env, "rendezvous")) ?: "?",
	       sj_real(env, "rendezvous_seconds", 0));
	json_array_foreach(nodes, i, n) {
		long long base = sj_int(n, "rank_base", 0), count = sj_int(n, "local_ranks", 0);
		size_t k;
		json_t *b;

		term_printf(stdout, "  node %zu %s: ranks %lld-%lld;", i,
		       json_string_value(json_object_get(n, "host")) ?: "?", base, base + count - 1);
		json_array_foreach(json_object_get(n, "ranks"), k, b)
			term_printf(stdout, " rank %lld cpus %s gpu %lld numa %lld;", base + (long long)k,
			       json_string_value(json_object_get(b, "cpus")) ?: "?",
			       (long long)sj_int(b, "gpu", -1), (long long)sj_int(b, "numa", -1));
		term_printf(stdout, "\n");
	}
}

/* The lead's MFU, every rank's data wait and memory, each node's storkd (when logged). */
static void print_telemetry(const struct run_report *rep)
{
	int any_wait = 0, any_rss = 0;

	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];

		if (rk->mfu.n)
			term_printf(stdout, "MFU: median %.1f%% (rank %d's; stork(1): MFU)\n",
				    100 * series_median(&rk->mfu), rk->rank);
		any_wait |= rk->data_wait_ms.n > 0;
		any_rss |= rk->rss.n > 0;
	}
	if (any_wait) {
		term_printf(stdout, "data wait per rank (median ms per step):");
		for (int r = 0; r < rep->nranks; r++)
			if (rep->ranks[r].data_wait_ms.n)
				term_printf(stdout, " %d: %.2f", rep->ranks[r].rank,
					    series_median(&rep->ranks[r].data_wait_ms));
		term_printf(stdout, "\n");
	}
	if (any_rss) {
		term_printf(stdout, "host memory (%s):",
			    rep->program ? "each rank's processes with their children, peak MiB" :
					   "storkd resident, peak MiB, by each node's first rank");
		for (int r = 0; r < rep->nranks; r++)
			if (rep->ranks[r].rss.n)
				term_printf(stdout, " %d: %.1f", rep->ranks[r].rank,
					    series_max(&rep->ranks[r].rss) / (1 << 20));
		term_printf(stdout, "\n");
	}
}

/* Each rank's median compute time, and the stragglers (report_data.c). */
static void print_ranks(const struct run_report *rep)
{
	term_printf(stdout, "compute time per rank (median ms):");
	for (int r = 0; r < rep->nranks; r++)
		term_printf(stdout, " %d: %.2f", rep->ranks[r].rank, rep->ranks[r].median_compute_ms);
	term_printf(stdout, "\n");
	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];

		if (rk->straggler)
			term_printf(stdout, "straggler: rank %d, median compute %.2f ms, %.0f%% above the median of all "
			       "ranks (%.2f ms)\n", rk->rank, rk->median_compute_ms,
			       100 * (rk->median_compute_ms / rep->median_compute_ms - 1),
			       rep->median_compute_ms);
	}
	if (!rep->stragglers)
		term_printf(stdout, "stragglers: none (no rank more than %.0f%% above the median of all ranks, "
		       "%.2f ms)\n", 100 * REPORT_STRAGGLER_MARGIN, rep->median_compute_ms);
}

static void print_problems(const struct run_report *rep)
{
	const char *p = rep->problems;

	while (*p) {
		size_t len = strcspn(p, "\n");

		term_printf(stdout, "(%.*s)\n", (int)len, p);
		p += len + (p[len] == '\n');
	}
}

/* Where each attempt but the last stopped, and why: the loss chart's numbered markers in words. */
static void print_stops(const struct run_report *rep)
{
	for (int i = 0, k = 0; i + 1 < rep->nattempts; i++) {
		const struct report_attempt *a = &rep->attempts[i];

		if (report_stop_step(a) >= 0)
			term_printf(stdout, "stop %d: step %ld, %s%s%s\n", ++k, report_stop_step(a),
			       report_stop_reason(a), a->message[0] ? ": " : "", a->message);
	}
}

/* Each node lost while the others went on (restart.in_place), a line each. */
static void print_members(const struct run_report *rep)
{
	for (int i = 0; i < rep->nmembers; i++) {
		const struct report_member *m = &rep->members[i];

		if (m->joined) {
			term_printf(stdout, "node back: %s at step %ld; %d ranks went on (regroup "
				    "%.2f s)\n", m->lost, m->step, m->ranks, m->seconds);
			continue;
		}
		term_printf(stdout, "node lost: %s after step %ld (%s); %s%s%d ranks went on, the "
			    "failure cost %.2f s (regroup %.2f s)\n", m->lost, m->step, m->why,
			    m->by, m->by[0] ? " in its place; " : "", m->ranks, m->lost_s, m->seconds);
	}
}

/* Each loss spike train.on_spike found, a line each. */
static void print_spikes(const struct run_report *rep)
{
	for (int i = 0; i < rep->nspikes; i++) {
		const struct report_spike *sp = &rep->spikes[i];

		term_printf(stdout, "loss spike: step %ld, %s: loss %.4g (z %.1f), grad norm %.4g (z %.1f)\n",
		       sp->step, sp->action, sp->loss, sp->loss_z, sp->norm, sp->norm_z);
	}
}

/* What a figure the run did not log is called. */
static const char *not_reported(const struct run_report *rep)
{
	return rep->program ? "not reported by the program (its STORK_METRICS_FILE: stork(1))" :
			      "none logged";
}

static int report_text(const char *dir)
{
	struct run_report rep;

	if (report_load(dir, &rep) < 0) {
		report_free(&rep);
		stork_error("out of memory reading %s", dir);
		return STORK_EXIT_INTERNAL;
	}
	term_printf(stdout, "run: %s\n", dir);
	print_problems(&rep);
	if (rep.exit_info)
		print_exit(&rep);
	if (rep.env)
		print_layout(rep.env);
	/* what the preflight did, a line each (report_data.c: read_preflight) */
	print_lines("preflight: ", rep.preflight);
	/* what the run's metrics hold: a program may log only its loss, or nothing */
	if (rep.train_loss.n)
		term_printf(stdout, "steps: %zu; final train loss %.4f", rep.train_loss.n,
			    series_last(&rep.train_loss));
	else
		term_printf(stdout, "steps and loss: %s", not_reported(&rep));
	if (rep.val_loss.n)
		term_printf(stdout, ", last validation loss %.4f", series_last(&rep.val_loss));
	term_printf(stdout, "\n");
	if (rep.nranks > 0) {
		const struct report_rank *r0 = &rep.ranks[0];

		if (isfinite(r0->median_tps) || isfinite(r0->median_step_ms))
			term_printf(stdout, "throughput: median %.0f tokens/s, median step %.1f ms\n", r0->median_tps,
			       r0->median_step_ms);
		print_telemetry(&rep);
		if (isfinite(rep.median_compute_ms))
			print_ranks(&rep);
	}
	print_stops(&rep);
	print_members(&rep);
	print_spikes(&rep);
	if (rep.program && rep.program_checkpoint[0])
		term_printf(stdout, "latest checkpoint: %s (the program's own, in "
			    "STORK_CHECKPOINT_DIR)\n", rep.program_checkpoint);
	else if (rep.program)
		term_printf(stdout, "latest checkpoint: none (the program saved nothing in "
			    "STORK_CHECKPOINT_DIR)\n");
	else
		term_printf(stdout, "latest checkpoint: %s\n",
			    rep.latest_checkpoint[0] ? rep.latest_checkpoint : "none");
	report_free(&rep);
	return STORK_EXIT_OK;
}

/* Device-hours spent in training steps: rank 0's step times (the latest of
 * each step) times the ranks, each of which holds one GPU or its cores. */
static double device_hours(const struct run_report *rep)
{
	double ms = 0;

	if (!rep->nranks || !rep->ranks[0].step_ms.n)
		return NAN; /* no step times: a program that logs none */
	for (size_t i = 0; i < rep->ranks[0].step_ms.n; i++)
		ms += rep->ranks[0].step_ms.v[i];
	return ms * rep->nranks / 3.6e6;
}

/* v with that many decimals, or "-" when the run logged none (NaN). */
static const char *figure(char *buf, size_t len, int decimals, double v)
{
	if (isfinite(v))
		snprintf(buf, len, "%.*f", decimals, v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* One line per run directory under root (name__job=...). A figure a run did not log is "-". */
static int report_runs(const char *root)
{
	struct dirent **list = NULL;
	int n = scandir(root, &list, NULL, alphasort), shown = 0;

	term_printf(stdout, "%-40s %8s %7s %10s %10s %10s %9s  %s\n", "run", "job", "steps", "train", "val",
	       "tok/s", "dev-hours", "reason");
	for (int i = 0; i < n; i++) {
		struct run_report rep;
		char dir[4200], *job;

		if (!(job = strstr(list[i]->d_name, "__job=")) ||
		    path_join(dir, sizeof dir, root, list[i]->d_name) < 0)
			goto next;
		if (report_load(dir, &rep) == 0) {
			char train[16], val[16], tps[16], hours[16];

			term_printf(stdout, "%-40.*s %8.*s %7zu %10s %10s %10s %9s  %s\n",
			       (int)(job - list[i]->d_name), list[i]->d_name,
			       (int)strcspn(job + 6, "_"), job + 6, rep.train_loss.n,
			       figure(train, sizeof train, 4, series_last(&rep.train_loss)),
			       figure(val, sizeof val, 4, series_last(&rep.val_loss)),
			       figure(tps, sizeof tps, 0, rep.nranks ? rep.ranks[0].median_tps : NAN),
			       figure(hours, sizeof hours, 4, device_hours(&rep)),
			       rep.exit_info ? json_string_value(json_object_get(rep.exit_info, "reason")) ?: "?" :
					       "(running, or no exit_info.json)");
		}
		report_free(&rep);
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
		term_printf(stdout, "(no run directories under %s)\n", root);
	return STORK_EXIT_OK;
}

/* The HTML page, written atomically to out (default RUN_DIR/report.html). */
static int report_html(const char *dir, const char *out)
{
	char path[4200], tmp[4300];
	struct run_report rep;
	FILE *f = NULL;
	int rc = STORK_EXIT_OK, fd;

	if (!out) {
		if (path_join(path, sizeof path, dir, "report.html") < 0) {
			stork_error("%s: path too long", dir);
			return STORK_EXIT_USAGE;
		}
		out = path;
	}
	if ((fd = atomic_tmp_open(out, tmp, sizeof tmp, 0666)) < 0 || !(f = fdopen(fd, "w"))) {
		stork_error("cannot write %s: %s (choose another file with -o)", out, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return STORK_EXIT_USAGE;
	}
	if (report_load(dir, &rep) < 0) {
		stork_error("out of memory reading %s", dir);
		rc = STORK_EXIT_INTERNAL;
	} else if (report_write_html(&rep, f) < 0 || fflush(f) == EOF || fsync(fileno(f)) < 0) {
		stork_error("cannot write %s: %s", out, strerror(errno));
		rc = STORK_EXIT_INTERNAL;
	}
	report_free(&rep);
	if (fclose(f) == EOF && rc == STORK_EXIT_OK) {
		stork_error("cannot write %s: %s", out, strerror(errno));
		rc = STORK_EXIT_INTERNAL;
	}
	if (rc == STORK_EXIT_OK && rename(tmp, out) < 0) {
		stork_error("cannot write %s: %s", out, strerror(errno));
		rc = STORK_EXIT_INTERNAL;
	}
	if (rc != STORK_EXIT_OK)
		unlink(tmp);
	else
		term_printf(stdout, "report: %s\n", out);
	return rc;
}

#define REPORT_USAGE \
	"usage: stork report RUN_DIR [-o FILE.html]   (default RUN_DIR/report.html)\n" \
	"       stork report --text RUN_DIR\n" \
	"       stork report RUNS_DIR                 (one line per run)\n"

int cmd_report(int argc, char **argv)
{
	const char *dir = NULL, *out = NULL;
	char path[4200];
	struct stat st;
	int text = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(REPORT_USAGE, stdout);
			return STORK_EXIT_OK;
		}
		if (!strcmp(argv[i], "--text"))
			text = 1;
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (argv[i][0] == '-' || dir)
			goto usage;
		else
			dir = argv[i];
	}
	if (!dir || (text && out))
		goto usage;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		stork_error("%s: not a directory", dir);
		return STORK_EXIT_USAGE;
	}
	if (path_join(path, sizeof path, dir, "config") == 0 && stat(path, &st) == 0)
		return text ? report_text(dir) : report_html(dir, out);
	if (out) {
		stork_error("%s is not a run directory (no config/): -o writes the report of one run", dir);
		return STORK_EXIT_USAGE;
	}
	return report_runs(dir);
usage:
	fputs(REPORT_USAGE, stderr);
	return STORK_EXIT_USAGE;
}
