/*
 * lib/run/exit_info.c - see exit_info.h.
 */
#include "config.h"
#include "lib/run/exit_info.h"
#include "lib/run/hang_explain.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/env_number.h"
#include "lib/exit_codes.h"
#include "lib/formats/stork_json.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct {
	int code;
	const char *name;
} reasons[] = {
	{ STORK_EXIT_OK, "completed" },
	{ STORK_EXIT_PREEMPTED, "preempted_requeued" },
	{ STORK_EXIT_TIMEOUT, "timeout_requeued" },
	{ STORK_EXIT_RANK_FAILED, "rank_failed" },
	{ STORK_EXIT_HANG, "hang" },
	{ STORK_EXIT_RENDEZVOUS, "rendezvous_timeout" },
	{ STORK_EXIT_OUT_OF_MEMORY, "out_of_memory" },
	{ STORK_EXIT_REQUEUE_FAILED, "requeue_failed" },
	{ STORK_EXIT_CHECKPOINT_FAILED, "checkpoint_failed" },
	{ STORK_EXIT_DIVERGED, "diverged" },
	{ STORK_EXIT_NODE_LOST, "node_lost_requeued" },
	{ STORK_EXIT_CANCELLED, "cancelled" },
	{ STORK_EXIT_PREFLIGHT, "preflight_failed" },
	{ STORK_EXIT_CONFIG, "config_error" },
	{ STORK_EXIT_DATA, "data_error" },
	/* Bad input of other kinds keeps its own exit code but reports one of
	 * the reasons of DESIGN's fixed list; the message says which input. */
	{ STORK_EXIT_CHECKPOINT_BAD, "config_error" },
	{ STORK_EXIT_USAGE, "config_error" },
	{ STORK_EXIT_INTERNAL, "rank_failed" },
};

const char *exit_reason_name(int exit_code)
{
	for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
		if (reasons[i].code == exit_code)
			return reasons[i].name;
	return "rank_failed";
}

/*
 * Rank of an exit code's severity: failures > stops > success. Among the
 * stops, one that leaves the job ended outranks a requeue: a cancellation
 * that only rank 0 saw (scancel during the stop's checkpoint) is the
 * run's reason.
 */
static int severity(int code)
{
	switch (code) {
	case STORK_EXIT_OK: return 0;
	case STORK_EXIT_PREEMPTED:
	case STORK_EXIT_TIMEOUT:
	case STORK_EXIT_NODE_LOST: return 1;
	case STORK_EXIT_CANCELLED:
	case STORK_EXIT_REQUEUE_FAILED: return 2;
	case STORK_EXIT_RANK_FAILED:
	case STORK_EXIT_OUT_OF_MEMORY:
	case STORK_EXIT_HANG: return 4;
	default: return 3;
	}
}

int exit_code_worst(int a, int b)
{
	return severity(b) > severity(a) ? b : a;
}

static void copy_env(char *dst, size_t len, const char *name, const char *dflt)
{
	const char *v = getenv(name);

	snprintf(dst, len, "%s", v && *v ? v : dflt);
}

void exit_info_init(struct exit_info *e, int exit_code, int node_rank)
{
	long long restarts;
	char err[256];

	/* stork run and storkd refuse a malformed value before anything is
	 * written; 0 stands for it here. */
	if (env_number("SLURM_RESTART_COUNT", 0, INT_MAX, 0, &restarts, err, sizeof err) < 0)
		restarts = 0;
	memset(e, 0, sizeof *e);
	e->exit_code = exit_code;
	e->reason = exit_reason_name(exit_code);
	e->node_rank = node_rank;
	e->restart_count = (int)restarts;
	e->last_checkpoint_step = -1;
	e->first_failure.last_step = -1;
	copy_env(e->job_id, sizeof e->job_id, "SLURM_JOB_ID", "local");
	copy_env(e->step_id, sizeof e->step_id, "SLURM_STEP_ID", "");
	gethostname(e->host, sizeof e->host - 1);
}

static void iso_time(double t, char *buf, size_t len)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* first_failure: null, or the object stork(1) documents. */
static json_t *failure_json(const struct exit_failure *f)
{
	char ts[40];
	json_t *v;

	if (!f->valid)
		return json_null();
	iso_time(f->time, ts, sizeof ts);
	v = json_pack("{s:o, s:o, s:i, s:o, s:o, s:s, s:o, s:I, s:o, s:b}",
			 "rank", f->rank >= 0 ? json_integer(f->rank) : json_null(),
			 "host", sj_text(f->host),
			 "pid", f->pid,
			 "exit_code", f->signal[0] ? json_null() : json_integer(f->exit_code),
			 "signal", f->signal[0] ? sj_text(f->signal) : json_null(),
			 "time", ts,
			 "timestamp", sj_number(f->time),
			 "last_step", (json_int_t)f->last_step,
			 "what", sj_text(f->what),
			 "secondary", f->secondary != 0);
	if (v && f->error[0])
		json_object_set_new(v, "error", sj_text(f->error));
	if (v && f->frame[0])
		json_object_set_new(v, "traceback_last_frame", sj_text(f->frame));
	if (v && f->oom)
		json_object_set_new(v, "out_of_memory", json_pack(
			"{s:o, s:o, s:o}", "cgroup", f->oom_cgroup[0] ? sj_text(f->oom_cgroup) : json_null(),
			"limit_bytes", f->oom_limit > 0 ? json_real(f->oom_limit) : json_null(),
			"held_bytes", f->oom_held >= 0 ? json_real(f->oom_held) : json_null()));
	return v;
}

int exit_info_node_path(char *path, size_t len, const char *run_dir, int n, int restart_count,
			int attempt)
{
	int used;

	if (attempt > 0)
		used = snprintf(path, len, "%s/exit_info.node-%03d.requeue-%d.restart-%d.json", run_dir,
				n, restart_count, attempt);
	else
		used = snprintf(path, len, "%s/exit_info.node-%03d.requeue-%d.json", run_dir, n,
				restart_count);
	return used >= 0 && (size_t)used < len ? 0 : -1;
}

/* "restarts": each attempt that failed and was restarted, with its cause. */
static json_t *restarts_json(const struct exit_attempt *a)
{
	json_t *list = json_array();

	for (int i = 0; list && a && i < a->nrestarts; i++) {
		const struct exit_info *r = &a->restarts[i];

		json_array_append_new(list, json_pack("{s:i, s:o, s:i, s:o, s:o}",
						       "attempt", r->attempt,
						       "reason", sj_text(r->reason),
						       "exit_code", r->exit_code,
						       "first_failure", failure_json(&r->first_failure),
						       "message", sj_text(r->message)));
	}
	return list;
}

static void str_field(const json_t *o, const char *key, char *dst, size_t len)
{
	const char *s = json_string_value(json_object_get(o, key));

	snprintf(dst, len, "%s", s ? s : "");
}

void exit_failure_oom_from(struct exit_failure *f, const json_t *oom)
{
	const json_t *limit = json_object_get(oom, "limit_bytes"), *held = json_object_get(oom, "held_bytes");

	f->oom = json_is_object(oom);
	str_field(oom, "cgroup", f->oom_cgroup, sizeof f->oom_cgroup);
	f->oom_limit = json_is_number(limit) ? json_number_value(limit) : 0;
	f->oom_held = json_is_number(held) ? json_number_value(held) : -1;
}

void exit_info_set_left(struct exit_info *e, const json_t *left)
{
	size_t i;
	const json_t *x;

	e->nleft = 0;
	json_array_foreach(left, i, x) {
		struct exit_left *l = &e->left[e->nleft];

		if (e->nleft == EXIT_MAX_LEFT)
			break;
		l->node = (int)sj_int(x, "node", -1);
		str_field(x, "host", l->host, sizeof l->host);
		l->after_step = sj_int(x, "after_step", -1);
		l->seconds = sj_real(x, "seconds", 0);
		str_field(x, "why", l->why, sizeof l->why);
		e->nleft += l->node >= 0;
	}
}

/* "nodes_left": [{node, host, after_step, seconds, why}, ...] */
static json_t *left_json(const struct exit_info *e)
{
	json_t *list = json_array();

	for (int i = 0; list && i < e->nleft; i++)
		json_array_append_new(list, json_pack("{s:i, s:o, s:I, s:o, s:o}",
						       "node", e->left[i].node,
						       "host", sj_text(e->left[i].host),
						       "after_step", (json_int_t)e->left[i].after_step,
						       "seconds", sj_number(e->left[i].seconds),
						       "why", sj_text(e->left[i].why)));
	return list;
}

int exit_info_node_left(const struct exit_info *e, int n)
{
	for (int i = 0; i < e->nleft; i++)
		if (e->left[i].node == n)
			return 1;
	return 0;
}

static int write_json(const char *path, const struct exit_info *e, int nnodes,
		      const struct exit_attempt *a, char *err, size_t errlen)
{
	json_t *v = json_pack("{s:o, s:i, s:o, s:o, s:i, s:o, s:o}",
			      "reason", sj_text(e->reason),
			      "exit_code", e->exit_code,
			      "first_failure", failure_json(&e->first_failure),
			      "last_checkpoint", e->last_checkpoint[0] ?
				      json_pack("{s:o, s:I}", "path", sj_text(e->last_checkpoint),
						"step", (json_int_t)e->last_checkpoint_step) :
				      json_null(),
			      "restart_count", e->restart_count,
			      "job_id", sj_text(e->job_id),
			      "step_id", sj_text(e->step_id));
	int rc = -1;

	if (v && nnodes > 0) {
		json_object_set_new(v, "nodes", json_integer(nnodes));
		json_object_set_new(v, "restarts", restarts_json(a));
	} else if (v) {
		json_object_set_new(v, "attempt", json_integer(e->attempt));
		json_object_set_new(v, "node_rank", json_integer(e->node_rank));
		json_object_set_new(v, "host", sj_text(e->host));
	}
	if (v && e->nleft)
		json_object_set_new(v, "nodes_left", left_json(e));
	if (v && json_object_set_new(v, "message", sj_text(e->message)) == 0)
		rc = sj_write_file(path, v, err, errlen);
	else
		snprintf(err, errlen, "cannot format %s: out of memory", path);
	json_decref(v);
	return rc;
}

int exit_info_write_node(const char *run_dir, const struct exit_info *e, char *err, size_t errlen)
{
	char path[4096];

	/* Each attempt of a requeued job keeps its own record; the plain name
	 * is the latest attempt's, which the summary reads. */
	exit_info_node_path(path, sizeof path, run_dir, e->node_rank, e->restart_count, e->attempt);
	if (write_json(path, e, 0, NULL, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/exit_info.node-%03d.json", run_dir, e->node_rank);
	return write_json(path, e, 0, NULL, err, errlen);
}

/*
 * Read one node's record. Another node wrote it, perhaps while dying: a
 * file that is not JSON or lacks the fields the summary needs is refused
 * with the reason in why (naming the file), never half used.
 */
static int read_node(const char *path, struct exit_info *e, char *why, size_t len)
{
	const json_t *f, *ck;
	json_t *v;

	v = sj_load_file(path, why, len);
	if (!v)
		return -1;
	if (!json_is_object(v) || !json_is_string(json_object_get(v, "reason")) ||
	    !json_is_integer(json_object_get(v, "exit_code"))) {
		snprintf(why, len, "%s: not an exit_info record (no reason and integer exit_code)",
			 path);
		json_decref(v);
		return -1;
	}
	memset(e, 0, sizeof *e);
	e->exit_code = (int)sj_int(v, "exit_code", STORK_EXIT_INTERNAL);
	e->reason = exit_reason_name(e->exit_code);
	e->node_rank = (int)sj_int(v, "node_rank", -1);
	e->restart_count = (int)sj_int(v, "restart_count", 0);
	e->attempt = (int)sj_int(v, "attempt", 0);
	str_field(v, "job_id", e->job_id, sizeof e->job_id);
	str_field(v, "step_id", e->step_id, sizeof e->step_id);
	str_field(v, "host", e->host, sizeof e->host);
	str_field(v, "message", e->message, sizeof e->message);
	ck = json_object_get(v, "last_checkpoint");
	e->last_checkpoint_step = -1;
	if (json_is_string(json_object_get(ck, "path"))) {
		str_field(ck, "path", e->last_checkpoint, sizeof e->last_checkpoint);
		e->last_checkpoint_step = sj_int(ck, "step", -1);
	}
	exit_info_set_left(e, json_object_get(v, "nodes_left"));
	f = json_object_get(v, "first_failure");
	if (json_is_string(json_object_get(f, "host"))) {
		struct exit_failure *ff = &e->first_failure;

		ff->valid = 1;
		ff->rank = (int)sj_int(f, "rank", -1);
		str_field(f, "host", ff->host, sizeof ff->host);
		ff->pid = (int)sj_int(f, "pid", 0);
		ff->exit_code = (int)sj_int(f, "exit_code", -1);
		str_field(f, "signal", ff->signal, sizeof ff->signal);
		ff->time = sj_real(f, "timestamp", 0);
		ff->last_step = sj_int(f, "last_step", -1);
		ff->secondary = json_is_true(json_object_get(f, "secondary"));
		str_field(f, "what", ff->what, sizeof ff->what);
		str_field(f, "error", ff->error, sizeof ff->error);
		str_field(f, "traceback_last_frame", ff->frame, sizeof ff->frame);
		exit_failure_oom_from(ff, json_object_get(f, "out_of_memory"));
	}
	json_decref(v);
	return 0;
}

/* A node whose ranks failed only because another did. */
static int only_secondary(const struct exit_info *e)
{
	return e->first_failure.valid && e->first_failure.secondary;
}

static void merge(struct exit_info *sum, const struct exit_info *node)
{
	/* The node of the cause sets the reason; the nodes that failed in
	 * consequence (a collective broken by it) never outrank it. */
	int worse = exit_code_worst(sum->exit_code, node->exit_code) != sum->exit_code &&
		    !(only_secondary(node) && sum->first_failure.valid && !only_secondary(sum));
	/* ... and among failures as grave, the node of the first cause sets
	 * the reason and the message (a hang that made other nodes' ranks
	 * fail is a hang; the others only say they were ended) */
	int cause = severity(node->exit_code) == severity(sum->exit_code) &&
		    node->first_failure.valid && !node->first_failure.secondary &&
		    (!sum->first_failure.valid || sum->first_failure.secondary ||
		     node->first_failure.time < sum->first_failure.time);

	if (worse || cause) {
		sum->exit_code = node->exit_code;
		sum->reason = node->reason;
		snprintf(sum->message, sizeof sum->message, "%s", node->message);
	}
	/* The first cause: a primary failure before any secondary one, then time. */
	if (node->first_failure.valid &&
	    (!sum->first_failure.valid ||
	     node->first_failure.secondary < sum->first_failure.secondary ||
	     (node->first_failure.secondary == sum->first_failure.secondary &&
	      node->first_failure.time < sum->first_failure.time)))
		sum->first_failure = node->first_failure;
	if (node->last_checkpoint_step > sum->last_checkpoint_step) {
		sum->last_checkpoint_step = node->last_checkpoint_step;
		snprintf(sum->last_checkpoint, sizeof sum->last_checkpoint, "%s", node->last_checkpoint);
	}
}

int exit_info_missing(const char *run_dir, int nnodes, const struct exit_attempt *a,
		      double wait_s, int *missing)
{
	struct timespec nap = { 0, 100 * 1000 * 1000 };
	char path[4096];
	int n = 0;

	for (double waited = 0;; waited += 0.1) {
		n = 0;
		for (int i = 1; i < nnodes; i++) {
			exit_info_node_path(path, sizeof path, run_dir, i, a->restart_count, a->attempt);
			if (access(path, F_OK) < 0)
				missing[n++] = i;
		}
		if (n == 0 || waited >= wait_s)
			return n;
		nanosleep(&nap, NULL);
	}
}

/*
 * A hang: every node's watchdog left where its ranks were; together they
 * say who waits in what and who never came (lib/run/hang_explain.h), which
 * replaces the nodes' own messages ("no progress for ... on n2: rank 3").
 */
static void explain_hang(const char *run_dir, int nnodes, const struct exit_attempt *a,
			 struct exit_info *sum)
{
	json_t *all = json_array();
	char path[4200], why[256], text[sizeof sum->message];
	int nodes = 0;

	for (int n = 0; all && n < nnodes; n++) {
		json_t *v;

		hang_records_path(path, sizeof path, run_dir, n, a->restart_count, a->attempt);
		if (!(v = sj_load_file(path, why, sizeof why)))
			continue;
		if (json_is_array(v) && json_array_extend(all, v) == 0)
			nodes++;
		json_decref(v);
	}
	if (nodes && hang_explain(all, text, sizeof text) > 0)
		msg_format(sum->message, sizeof sum->message, "no progress for preempt.hang_timeout%s: %s",
			   nodes == nnodes ? "" : " (some nodes left no record)", text);
	json_decref(all);
}

int exit_info_summarise(const char *run_dir, int nnodes, const struct exit_attempt *a,
			double wait_s, struct exit_info *sum, char *err, size_t errlen)
{
	char path[4096], missing[512] = "", damaged[1024] = "", why[1024];
	struct timespec nap = { 0, 100 * 1000 * 1000 };
	double waited = 0;
	int have = 0;

	for (int i = 0; i < nnodes; i++) {
		int n = (a->summariser + i) % nnodes;
		struct exit_info node;

		/* a node that left while the others went on (restart.in_place):
		 * its end is not the run's, and its node may be gone with its record */
		if (have && exit_info_node_left(sum, n))
			continue;
		/* This attempt's record: an earlier attempt's must not be read
		 * while the node is still writing the current one. */
		exit_info_node_path(path, sizeof path, run_dir, n, a->restart_count, a->attempt);
		while (read_node(path, &node, why, sizeof why) < 0 && waited < wait_s) {
			nanosleep(&nap, NULL);
			waited += 0.1;
		}
		if (read_node(path, &node, why, sizeof why) < 0) {
			size_t l = strlen(missing);

			snprintf(missing + l, sizeof missing - l, "%s%d", l ? ", " : "", n);
			/* A file that is there but unreadable is named with its fault. */
			if (access(path, F_OK) == 0 && !damaged[0])
				msg_format(damaged, sizeof damaged, "; %s", why);
			continue;
		}
		if (have++ == 0) {
			*sum = node;
			sum->reason = exit_reason_name(sum->exit_code);
		} else {
			merge(sum, &node);
		}
	}
	if (!have) {
		snprintf(err, errlen, "no node wrote its exit_info file in %s", run_dir);
		return -1;
	}
	if (missing[0]) {
		size_t l = strlen(sum->message);

		snprintf(sum->message + l, sizeof sum->message - l,
			 "%s(node(s) %s wrote no readable exit_info file%s)", l ? " " : "", missing,
			 damaged);
		/* A node that never joined is what rendezvous_timeout (or the
		 * requeue without it) says already. */
		if (sum->exit_code != STORK_EXIT_RENDEZVOUS && sum->exit_code != STORK_EXIT_NODE_LOST) {
			sum->exit_code = exit_code_worst(sum->exit_code, STORK_EXIT_RANK_FAILED);
			sum->reason = exit_reason_name(sum->exit_code);
		}
	}
	if (sum->exit_code == STORK_EXIT_HANG)
		explain_hang(run_dir, nnodes, a, sum);
	snprintf(path, sizeof path, "%s/exit_info.json", run_dir);
	if (write_json(path, sum, nnodes, a, err, errlen) < 0)
		return -1;
	return sum->exit_code;
}
