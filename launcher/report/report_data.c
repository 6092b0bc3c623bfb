/*
 * launcher/report/report_data.c - load a run directory for `stork report`.
 *
 * Rank 0's metrics give the loss curves, split into attempts by the
 * requeue and attempt fields of each line (a requeued or restarted run
 * logs its first steps again from its checkpoint) or by a step logged
 * again inside one (a rollback), and the loss spikes; every rank's give the
 * step times and the stragglers: ranks whose median compute time is more
 * than 10% above the median of all ranks' medians (compute time, because
 * every rank's step time waits for the slowest one).
 */
#include "config.h"
#include "launcher/report/report.h"
#include "launcher/run/run_metrics.h"

#include "lib/bounded.h"
#include "lib/run/exit_info.h"
#include "lib/io/io.h"
#include "lib/run/metrics_file.h"
#include "lib/formats/stork_json.h"

#include <dirent.h>
#include <stddef.h>
#include <glob.h>
#include <sys/stat.h>
#include <time.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int series_push(struct series *s, long step, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		double *nv = realloc(s->v, cap * sizeof *nv);
		long *st;

		if (!nv)
			return -1;
		s->v = nv;
		if (!(st = realloc(s->step, cap * sizeof *st)))
			return -1;
		s->step = st;
		s->cap = cap;
	}
	s->step[s->n] = step;
	s->v[s->n++] = v;
	return 0;
}

/* Add a value, dropping those of this step and later ones logged before:
 * after a resume the latest value of a step is the one that counts. */
static int series_set(struct series *s, long step, double v)
{
	while (s->n && s->step[s->n - 1] >= step)
		s->n--;
	return series_push(s, step, v);
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

long report_stop_step(const struct report_attempt *a)
{
	return a->train_loss.n ? a->train_loss.step[a->train_loss.n - 1] : -1;
}

const char *report_oom_advice(const struct run_report *rep)
{
	const char *reason = json_string_value(json_object_get(rep->exit_info, "reason"));

	if (!reason || strcmp(reason, "out_of_memory"))
		return NULL;
	if (rep->program)
		return "the program's rank needed more memory than it had: a smaller batch per rank, "
		       "fewer data loader workers, or a larger memory limit (sbatch --mem, "
		       "--mem-per-cpu)";
	/* the levers `stork plan` weighs, from the largest saving of a rank's memory down */
	return "a rank needed more memory than it had: train.recompute: block or gelu "
	       "(activations recomputed in the backward), parallel.zero: 1 (the optimizer's moments split over "
	       "the replicas; 2 and 3 on CPU nodes split the gradients and the parameters too), a "
	       "smaller train.batch_size with a larger train.grad_accum (the same "
	       "global batch), or more ranks in parallel.tensor or parallel.pipeline; "
	       "`stork plan RUN_DIR/config/stork.yaml --nodes N --gpus-per-node G` prints each "
	       "layout's memory per rank";
}

const char *report_stop_reason(const struct report_attempt *a)
{
	return a->ended[0] ? a->ended : "restart";
}

double series_median(const struct series *s)
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

double series_last(const struct series *s)
{
	return s->n ? s->v[s->n - 1] : NAN;
}

double series_max(const struct series *s)
{
	double m = NAN;

	for (size_t i = 0; i < s->n; i++)
		if (!(s->v[i] <= m))
			m = s->v[i];
	return m;
}

static void problem(struct run_report *rep, const char *what)
{
	size_t used = strlen(rep->problems);

	snprintf(rep->problems + used, sizeof rep->problems - used, "%s\n", what);
}

/* The attempt rank 0's line belongs to: the last one, or a new one when the
 * line's (requeue, attempt) differs, or when its train steps go back (a
 * run started again by hand outside Slurm, or older metrics without the
 * fields). */
static struct report_attempt *attempt_of(struct run_report *rep, const json_t *v, long step,
					 int is_train)
{
	int requeue = (int)sj_int(v, "requeue", -1), attempt = (int)sj_int(v, "attempt", -1);
	struct report_attempt *a = rep->nattempts ? &rep->attempts[rep->nattempts - 1] : NULL, *na;

	if (a && a->requeue == requeue && a->attempt == attempt &&
	    !(is_train && a->train_loss.n && step <= a->train_loss.step[a->train_loss.n - 1]))
		return a;
	na = realloc(rep->attempts, (size_t)(rep->nattempts + 1) * sizeof *na);
	if (!na)
		return NULL;
	rep->attempts = na;
	a = &na[rep->nattempts++];
	memset(a, 0, sizeof *a);
	a->requeue = requeue;
	a->attempt = attempt;
	return a;
}

/*
 * metrics/sacct.csv is what sacct said as the last attempt ended, while the
 * job still ran ("RUNNING", no memory sample yet). A report made after the
 * job ended asks sacct again and shows its final row (in memory only: the
 * run directory's file stays as the run wrote it).
 */
static void refresh_sacct(struct run_report *rep)
{
	const char *job = json_string_value(json_object_get(rep->exit_info, "job_id"));
	char *fresh;
	int status;

	if (!job || !rep->sacct || rep->sacct[0] == '#' || run_metrics_sacct_final(rep->sacct, job))
		return;
	fresh = run_metrics_sacct(job, &status);
	if (fresh && status == 0 && run_metrics_sacct_final(fresh, job)) {
		free(rep->sacct);
		rep->sacct = fresh;
		rep->sacct_refreshed = 1;
		return;
	}
	free(fresh);
}

const struct report_spike *report_spike_at(const struct run_report *rep, long step)
{
	for (int i = 0; i < rep->nspikes; i++)
		if (rep->spikes[i].step == step)
			return &rep->spikes[i];
	return NULL;
}

/* A loss_spike line: in step order, replacing one of the same step (a step trained again). */
static int take_spike(struct run_report *rep, const json_t *v, long step)
{
	struct report_spike sp = { .step = step }, *ns;
	int i = 0;

	snprintf(sp.action, sizeof sp.action, "%s",
		 json_string_value(json_object_get(v, "action")) ?: "?");
	sp.z = sj_real(v, "value", NAN);
	sp.loss = sj_real(v, "loss", NAN);
	sp.loss_z = sj_real(v, "loss_z", NAN);
	sp.norm = sj_real(v, "grad_norm", NAN);
	sp.norm_z = sj_real(v, "grad_norm_z", NAN);
	while (i < rep->nspikes && rep->spikes[i].step < step)
		i++;
	if (i < rep->nspikes && rep->spikes[i].step == step) {
		rep->spikes[i] = sp;
		return 0;
	}
	if (!(ns = realloc(rep->spikes, (size_t)(rep->nspikes + 1) * sizeof *ns)))
		return -1;
	rep->spikes = ns;
	memmove(ns + i + 1, ns + i, (size_t)(rep->nspikes - i) * sizeof *ns);
	ns[i] = sp;
	rep->nspikes++;
	return 0;
}

/* A membership line (restart.in_place) of the lead's file: a node lost after its step, or back. */
static int take_member(struct run_report *rep, const json_t *v, long step)
{
	struct report_member m = { .step = step, .lost_s = NAN }, *nm;

	m.seconds = sj_real(v, "value", NAN);
	m.ranks = (int)sj_int(v, "ranks", -1);
	m.joined = !strcmp(json_string_value(json_object_get(v, "event")) ?: "", "joined");
	snprintf(m.lost, sizeof m.lost, "%s",
		 json_string_value(json_object_get(v, m.joined ? "came" : "lost")) ?: "?");
	snprintf(m.by, sizeof m.by, "%s", json_string_value(json_object_get(v, "by")) ?: "");
	snprintf(m.why, sizeof m.why, "%s", json_string_value(json_object_get(v, "why")) ?: "");
	if (!(nm = realloc(rep->members, (size_t)(rep->nmembers + 1) * sizeof *nm)))
		return -1;
	rep->members = nm;
	nm[rep->nmembers++] = m;
	return 0;
}

/* The metric recovery at step: the cost of the last loss before it. */
static void take_recovery(struct run_report *rep, long step, double seconds)
{
	for (int i = rep->nmembers - 1; i >= 0; i--)
		if (rep->members[i].step < step) {
			rep->members[i].lost_s = seconds;
			return;
		}
}

/* Each rank's series by metric name. */
static const struct {
	const char *metric;
	size_t off;
} rank_metrics[] = {
	{ "step_time_ms", offsetof(struct report_rank, step_ms) },
	{ "compute_ms", offsetof(struct report_rank, compute_ms) },
	{ "tokens_per_sec", offsetof(struct report_rank, tps) },
	{ "pipeline_wait_ms", offsetof(struct report_rank, pipe_wait_ms) },
	{ "net_bytes_sent", offsetof(struct report_rank, net_bytes) },
	{ "data_wait_ms", offsetof(struct report_rank, data_wait_ms) },
	{ "rank_bytes", offsetof(struct report_rank, rank_bytes) },
	{ "host_rss_bytes", offsetof(struct report_rank, rss) },
	{ "mfu", offsetof(struct report_rank, mfu) },
	{ "cpu_pct", offsetof(struct report_rank, cpu_pct) },
	{ "gpu_util_pct", offsetof(struct report_rank, gpu_util) },
	{ "gpu_mem_used_bytes", offsetof(struct report_rank, gpu_mem) },
};

static struct series *rank_series(struct report_rank *rk, const char *metric)
{
	for (size_t i = 0; i < sizeof rank_metrics / sizeof *rank_metrics; i++)
		if (!strcmp(metric, rank_metrics[i].metric))
			return (struct series *)((char *)rk + rank_metrics[i].off);
	return NULL;
}

/*
 * One metrics line of rank r: into the series the report shows. The
 * run's own figures come from one file, the lead's (lead_rank()).
 */
static int take_line(struct run_report *rep, int r, int lead, const char *line, const char *path)
{
	/* the first eight are the lead's alone */
	static const char *const wanted[] = { "train_loss", "val_loss", "checkpoint_s",
					      "checkpoint_stall_ms", "loss_spike", "rollback",
					      "membership", "recovery", "step_time_ms",
					      "compute_ms", "tokens_per_sec", "pipeline_wait_ms",
					      "net_bytes_sent", "data_wait_ms", "rank_bytes",
					      "host_rss_bytes", "mfu", "cpu_pct", "gpu_util_pct",
					      "gpu_mem_used_bytes" };
	struct report_rank *rk = &rep->ranks[r];
	struct report_attempt *a;
	struct series *mine;
	const char *name = NULL;
	char err[256];
	json_t *v, *value;
	long step;
	int rc = 0;

	for (size_t i = 0; i < sizeof wanted / sizeof *wanted && !name; i++)
		if ((r == lead || i >= 8) && metrics_line_is(line, wanted[i]))
			name = wanted[i];
	if (!name || !(v = sj_parse(line, strlen(line), path, err, sizeof err)))
		return 0; /* another metric, or a line cut short by a full disk */
	value = json_object_get(v, "value");
	step = (long)sj_int(v, "step", -1);
	if (!strcmp(name, "loss_spike") && step >= 0) /* its value may be null: an infinite z */
		rc = take_spike(rep, v, step);
	if (!json_is_number(value) || step < 0 || !strcmp(name, "loss_spike"))
		goto out;
	if ((mine = rank_series(rk, name))) {
		rc = series_set(mine, step, json_number_value(value));
	} else if (!strcmp(name, "checkpoint_s")) {
		rc = series_set(&rep->checkpoint_s, step, json_number_value(value));
	} else if (!strcmp(name, "membership")) {
		rc = take_member(rep, v, step);
	} else if (!strcmp(name, "recovery")) {
		take_recovery(rep, step, json_number_value(value));
	} else if (!strcmp(name, "rollback")) {
		rc = series_push(&rep->rollbacks, step, json_number_value(value));
	} else if (!strcmp(name, "checkpoint_stall_ms")) {
		rc = series_set(&rep->checkpoint_stall_ms, step, json_number_value(value));
	} else {
		int train = !strcmp(name, "train_loss");

		if (!(a = attempt_of(rep, v, step, train)))
			rc = -1;
		else if (train)
			rc = series_push(&a->train_loss, step, json_number_value(value)) |
			     series_set(&rep->train_loss, step, json_number_value(value));
		else
			rc = series_push(&a->val_loss, step, json_number_value(value)) |
			     series_set(&rep->val_loss, step, json_number_value(value));
	}
out:
	json_decref(v);
	return rc;
}

struct rank_reader {
	struct run_report *rep;
	int r, lead;
	const char *path;
};

static int take_rank_line(const char *line, void *arg)
{
	const struct rank_reader *rd = arg;

	return take_line(rd->rep, rd->r, rd->lead, line, rd->path) < 0;
}

static int count_train_loss(const char *line, void *arg)
{
	*(long *)arg += metrics_line_is(line, "train_loss");
	return 0;
}

/*
 * The file whose run-wide figures (losses, checkpoints, membership) the
 * report shows: rank 0's, unless another rank logged more steps. Under
 * restart.in_place a lost node's ranks' files end early and the others go
 * on under new numbers in their own files: a rank that saw the whole run
 * has it all (every rank logs the same loss, averaged over the replicas).
 */
static int lead_rank(char *const *paths, int n)
{
	long best = -1;
	int lead = 0;

	for (int r = 0; r < n; r++) {
		long steps = 0;

		if (metrics_file_lines(paths[r], count_train_loss, &steps) == 0 && steps > best) {
			best = steps;
			lead = r;
		}
	}
	return lead;
}

/* Rank r's metrics; 0, or -1 when out of memory. */
static int read_rank(struct run_report *rep, int r, int lead, const char *path)
{
	struct rank_reader rd = { rep, r, lead, path };
	int rc = metrics_file_lines(path, take_rank_line, &rd);

	if (rc < 0) {
		char what[4200];

		msg_format(what, sizeof what, "%s: cannot be read", path);
		problem(rep, what);
		return 0;
	}
	return rc ? -1 : 0;
}

/* rank-NNN.metrics.jsonl in rank order (the names sort as the ranks do). */
static int read_ranks(struct run_report *rep)
{
	char pattern[4200];
	glob_t g = { 0 };
	int rc = 0, lead;

	if (path_join(pattern, sizeof pattern, rep->dir, "logs/rank-*.metrics.jsonl") < 0)
		return 0;
	if (glob(pattern, 0, NULL, &g) != 0) {
		if (!rep->program) /* a program need not log any */
			problem(rep, "no metrics under logs/");
		globfree(&g);
		return 0;
	}
	rep->ranks = calloc(g.gl_pathc, sizeof *rep->ranks);
	if (!rep->ranks)
		rc = -1;
	rep->nranks = rep->ranks ? (int)g.gl_pathc : 0;
	lead = lead_rank(g.gl_pathv, rep->nranks);
	for (int r = 0; rc == 0 && r < rep->nranks; r++) {
		const char *base = strrchr(g.gl_pathv[r], '/');

		if (sscanf(base ? base + 1 : g.gl_pathv[r], "rank-%d.", &rep->ranks[r].rank) != 1)
			rep->ranks[r].rank = r;
		rc = read_rank(rep, r, lead, g.gl_pathv[r]);
	}
	globfree(&g);
	return rc;
}

/* Each rank's medians, and the stragglers. */
static int find_stragglers(struct run_report *rep)
{
	struct series meds = { 0 };

	for (int r = 0; r < rep->nranks; r++) {
		struct report_rank *rk = &rep->ranks[r];

		rk->median_step_ms = series_median(&rk->step_ms);
		rk->median_compute_ms = series_median(&rk->compute_ms);
		rk->median_tps = series_median(&rk->tps);
		if (!isnan(rk->median_compute_ms) && series_push(&meds, r, rk->median_compute_ms) < 0)
			return -1;
	}
	rep->median_compute_ms = series_median(&meds);
	for (int r = 0; r < rep->nranks && !isnan(rep->median_compute_ms); r++) {
		struct report_rank *rk = &rep->ranks[r];

		rk->straggler = rk->median_compute_ms >
				rep->median_compute_ms * (1 + REPORT_STRAGGLER_MARGIN);
		rep->stragglers += rk->straggler;
	}
	series_free(&meds);
	return 0;
}

static json_t *load_json(struct run_report *rep, const char *name)
{
	char path[4200], err[1024];
	json_t *v;

	if (path_join(path, sizeof path, rep->dir, name) < 0)
		return NULL;
	v = sj_load_file(path, err, sizeof err);
	if (!v)
		problem(rep, err);
	return v;
}

/*
 * An attempt whose next step rolled the run back (a rollback line at that
 * step: train.on_spike or train.on_nonfinite) ended in that rollback: the
 * step spiked (its loss_spike line says how) or diverged.
 */
static int ended_in_rollback(struct run_report *rep, int i)
{
	struct report_attempt *a = &rep->attempts[i];
	const struct report_spike *sp;
	long bad = report_stop_step(a) + 1;
	int rolled = 0;

	for (size_t k = 0; k < rep->rollbacks.n; k++)
		rolled |= rep->rollbacks.step[k] == bad;
	if (!rolled)
		return 0;
	snprintf(a->ended, sizeof a->ended, "rollback");
	if ((sp = report_spike_at(rep, bad)) && !strcmp(sp->action, "rollback"))
		snprintf(a->message, sizeof a->message, "loss spike at step %ld (loss %.4g, z %.1f; "
			 "grad norm %.4g, z %.1f): rolled back to the latest checkpoint", bad, sp->loss,
			 sp->loss_z, sp->norm, sp->norm_z);
	else
		snprintf(a->message, sizeof a->message, "step %ld diverged (train.on_nonfinite): "
			 "rolled back to the latest checkpoint", bad);
	return 1;
}

/* How each attempt ended, from node 0's record of it (or a rollback). */
static void attempts_ended(struct run_report *rep)
{
	for (int i = 0; i < rep->nattempts; i++) {
		struct report_attempt *a = &rep->attempts[i];
		char path[4200], err[512];
		json_t *v;

		if (i + 1 < rep->nattempts && ended_in_rollback(rep, i))
			continue;
		if (a->requeue < 0 ||
		    exit_info_node_path(path, sizeof path, rep->dir, 0, a->requeue, a->attempt) < 0 ||
		    access(path, F_OK) < 0)
			continue;
		if (!(v = sj_load_file(path, err, sizeof err))) {
			problem(rep, err);
			continue;
		}
		snprintf(a->ended, sizeof a->ended, "%s",
			 json_string_value(json_object_get(v, "reason")) ?: "");
		snprintf(a->message, sizeof a->message, "%s",
			 json_string_value(json_object_get(v, "message")) ?: "");
		json_decref(v);
	}
}

/*
 * Why the job was requeued each time: node 0's record of the last attempt
 * of each requeue before the current one (a preemption, the time limit,
 * the preflight leaving a node out, a lost node).
 */
static void read_requeues(struct run_report *rep)
{
	long long count = sj_int(rep->exit_info, "restart_count", 0);
	size_t used = 0;

	for (int q = 0; q < count && q < 1000 && used < sizeof rep->requeues; q++) {
		char path[4200], err[512], last[4200] = "";
		json_t *v;

		for (int a = 0; a < 1000; a++) {
			if (exit_info_node_path(path, sizeof path, rep->dir, 0, q, a) < 0 ||
			    access(path, F_OK) < 0)
				break;
			snprintf(last, sizeof last, "%s", path);
		}
		if (!last[0] || !(v = sj_load_file(last, err, sizeof err)))
			continue;
		used += (size_t)snprintf(rep->requeues + used, sizeof rep->requeues - used,
					 "requeue %d: %s: %s\n", q,
					 json_string_value(json_object_get(v, "reason")) ?: "?",
					 json_string_value(json_object_get(v, "message")) ?: "");
		json_decref(v);
	}
}

/* Append line to rep->preflight, unless it is there already. */
static void preflight_line(struct run_report *rep, const char *line)
{
	size_t used = strlen(rep->preflight);

	if (!strstr(rep->preflight, line) && used < sizeof rep->preflight)
		snprintf(rep->preflight + used, sizeof rep->preflight - used, "%s\n", line);
}

/*
 * What the preflight did: each requeue it asked for (node 0's record of
 * that attempt) and each node its last run named, kept or not
 * (metrics/preflight.csv's verdicts other than "ok").
 */
static void read_preflight(struct run_report *rep)
{
	char path[4200], line[1024], *csv, *save = NULL;

	for (int q = 0; q < 1000; q++) {
		json_t *v;
		const char *msg;

		if (exit_info_node_path(path, sizeof path, rep->dir, 0, q, 0) < 0 ||
		    access(path, F_OK) < 0)
			break;
		if (!(v = sj_load_file(path, line, sizeof line)))
			continue;
		msg = json_string_value(json_object_get(v, "message"));
		if (msg && !strncmp(msg, "preflight: ", 11)) {
			snprintf(line, sizeof line, "requeue %d: %s", q, msg + 11);
			preflight_line(rep, line);
		}
		json_decref(v);
	}
	if (path_join(path, sizeof path, rep->dir, "metrics/preflight.csv") < 0 ||
	    !(csv = file_text(path, 1 << 20)))
		return;
	/* rank,node,host,five figures,"verdict" */
	for (char *l = strtok_r(csv, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *host = strchr(l, ','), *verdict = strchr(l, '"');

		host = host ? strchr(host + 1, ',') : NULL;
		if (!host || !verdict || !strncmp(verdict, "\"ok\"", 4))
			continue;
		verdict[strcspn(verdict + 1, "\"") + 1] = 0;
		snprintf(line, sizeof line, "%.*s: %s", (int)strcspn(host + 1, ","), host + 1,
			 verdict + 1);
		preflight_line(rep, line);
	}
	free(csv);
}

/* The newest entry (by modification time) of dir/sub, not a hidden one, into out; "" when none. */
static void newest_entry(const struct run_report *rep, const char *sub, char *out, size_t len)
{
	char path[4200], entry[4500];
	struct dirent *e;
	struct stat st;
	time_t newest = 0;
	DIR *d;

	out[0] = '\0';
	if (path_join(path, sizeof path, rep->dir, sub) < 0 || !(d = opendir(path)))
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && snprintf(entry, sizeof entry, "%s/%s", path, e->d_name) > 0 &&
		    lstat(entry, &st) == 0 && (!out[0] || st.st_mtime >= newest)) {
			newest = st.st_mtime;
			snprintf(out, len, "%s", e->d_name);
		}
	closedir(d);
}

int report_load(const char *dir, struct run_report *rep)
{
	char path[4200];
	ssize_t len;

	memset(rep, 0, sizeof *rep);
	snprintf(rep->dir, sizeof rep->dir, "%s", dir);
	rep->exit_info = load_json(rep, "exit_info.json");
	rep->env = load_json(rep, "config/slurm_env.json");
	/* a program's run has no layout of the engine's, and checkpoints of its own */
	rep->program = rep->env && !json_object_get(rep->env, "parallel");
	if (read_ranks(rep) < 0 || find_stragglers(rep) < 0)
		return -1;
	attempts_ended(rep);
	read_requeues(rep);
	read_preflight(rep);
	if (path_join(path, sizeof path, dir, "metrics/sacct.csv") == 0 &&
	    (rep->sacct = file_text(path, 1 << 20)) && !rep->sacct[0]) {
		free(rep->sacct); /* an empty file says nothing */
		rep->sacct = NULL;
	}
	refresh_sacct(rep);
	if (path_join(path, sizeof path, dir, "checkpoints/latest") == 0 &&
	    (len = readlink(path, rep->latest_checkpoint, sizeof rep->latest_checkpoint - 1)) > 0)
		rep->latest_checkpoint[len] = '\0';
	if (rep->program)
		newest_entry(rep, "checkpoints", rep->program_checkpoint, sizeof rep->program_checkpoint);
	return 0;
}

void report_free(struct run_report *rep)
{
	json_decref(rep->exit_info);
	json_decref(rep->env);
	for (int i = 0; i < rep->nattempts; i++) {
		series_free(&rep->attempts[i].train_loss);
		series_free(&rep->attempts[i].val_loss);
	}
	free(rep->attempts);
	free(rep->spikes);
	for (int r = 0; r < rep->nranks; r++) {
		for (size_t i = 0; i < sizeof rank_metrics / sizeof *rank_metrics; i++)
			series_free((struct series *)((char *)&rep->ranks[r] + rank_metrics[i].off));
	}
	free(rep->ranks);
	series_free(&rep->train_loss);
	series_free(&rep->val_loss);
	series_free(&rep->checkpoint_s);
	series_free(&rep->checkpoint_stall_ms);
	series_free(&rep->rollbacks);
	free(rep->members);
	free(rep->sacct);
	memset(rep, 0, sizeof *rep);
}
