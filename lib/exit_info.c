/*
 * lib/exit_info.c - see exit_info.h.
 */
#include "config.h"
#include "lib/exit_info.h"

#include "lib/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/json.h"

#include <errno.h>
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
	{ STORK_EXIT_REQUEUE_FAILED, "requeue_failed" },
	{ STORK_EXIT_CHECKPOINT_FAILED, "checkpoint_failed" },
	{ STORK_EXIT_DIVERGED, "diverged" },
	{ STORK_EXIT_CONFIG, "config_error" },
	/* Bad input of other kinds keeps its own exit code but reports one of
	 * the reasons of DESIGN's fixed list; the message says which input. */
	{ STORK_EXIT_DATA, "config_error" },
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

int exit_reason_code(const char *reason)
{
	for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
		if (!strcmp(reasons[i].name, reason))
			return reasons[i].code;
	return -1;
}

/* Rank of an exit code's severity: failures > stops > success. */
static int severity(int code)
{
	switch (code) {
	case STORK_EXIT_OK: return 0;
	case STORK_EXIT_PREEMPTED:
	case STORK_EXIT_TIMEOUT: return 1;
	case STORK_EXIT_REQUEUE_FAILED: return 2;
	case STORK_EXIT_RANK_FAILED:
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
	const char *rc = getenv("SLURM_RESTART_COUNT");

	memset(e, 0, sizeof *e);
	e->exit_code = exit_code;
	e->reason = exit_reason_name(exit_code);
	e->node_rank = node_rank;
	e->restart_count = rc ? atoi(rc) : 0;
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

static void write_failure(struct json *j, const struct exit_failure *f)
{
	char ts[40];

	if (!f->valid) {
		json_key_null(j, "first_failure");
		return;
	}
	json_key_begin_object(j, "first_failure");
	if (f->rank >= 0)
		json_key_int(j, "rank", f->rank);
	else
		json_key_null(j, "rank");
	json_key_string(j, "host", f->host);
	json_key_int(j, "pid", f->pid);
	if (f->signal[0]) {
		json_key_null(j, "exit_code");
		json_key_string(j, "signal", f->signal);
	} else {
		json_key_int(j, "exit_code", f->exit_code);
		json_key_null(j, "signal");
	}
	iso_time(f->time, ts, sizeof ts);
	json_key_string(j, "time", ts);
	json_key_double(j, "timestamp", f->time);
	json_key_int(j, "last_step", f->last_step);
	json_key_string(j, "what", f->what);
	json_key_bool(j, "secondary", f->secondary != 0);
	json_end_object(j);
}

static int write_json(const char *path, const struct exit_info *e, int nnodes, char *err,
		      size_t errlen)
{
	struct json j;
	int rc;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_string(&j, "reason", e->reason);
	json_key_int(&j, "exit_code", e->exit_code);
	write_failure(&j, &e->first_failure);
	if (e->last_checkpoint[0]) {
		json_key_begin_object(&j, "last_checkpoint");
		json_key_string(&j, "path", e->last_checkpoint);
		json_key_int(&j, "step", e->last_checkpoint_step);
		json_end_object(&j);
	} else {
		json_key_null(&j, "last_checkpoint");
	}
	json_key_int(&j, "restart_count", e->restart_count);
	json_key_string(&j, "job_id", e->job_id);
	json_key_string(&j, "step_id", e->step_id);
	if (nnodes > 0) {
		json_key_int(&j, "nodes", nnodes);
	} else {
		json_key_int(&j, "node_rank", e->node_rank);
		json_key_string(&j, "host", e->host);
	}
	json_key_string(&j, "message", e->message);
	json_end_object(&j);
	rc = json_error(&j) ? -1 : atomic_write_file(path, json_str(&j), json_len(&j), err, errlen);
	if (json_error(&j))
		snprintf(err, errlen, "cannot format %s", path);
	json_free(&j);
	return rc;
}

int exit_info_write_node(const char *run_dir, const struct exit_info *e, char *err, size_t errlen)
{
	char path[4096];

	/* Each attempt of a requeued job keeps its own record; the plain name
	 * is the latest attempt's, which the summary reads. */
	snprintf(path, sizeof path, "%s/exit_info.node-%03d.restart-%d.json", run_dir, e->node_rank,
		 e->restart_count);
	if (write_json(path, e, 0, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/exit_info.node-%03d.json", run_dir, e->node_rank);
	return write_json(path, e, 0, err, errlen);
}

static void str_field(const struct json_value *o, const char *key, char *dst, size_t len)
{
	const char *s = o ? json_get_string(o, key) : NULL;

	snprintf(dst, len, "%s", s ? s : "");
}

static int read_node(const char *path, struct exit_info *e)
{
	const struct json_value *f, *ck;
	struct json_value *v;
	char err[256], reason[64];
	int64_t i;
	double d;

	v = json_parse_file(path, err, sizeof err);
	if (!v)
		return -1;
	memset(e, 0, sizeof *e);
	str_field(v, "reason", reason, sizeof reason);
	e->exit_code = json_get_int(v, "exit_code", &i) == 0 ? (int)i : STORK_EXIT_INTERNAL;
	e->reason = exit_reason_name(e->exit_code);
	e->node_rank = json_get_int(v, "node_rank", &i) == 0 ? (int)i : -1;
	e->restart_count = json_get_int(v, "restart_count", &i) == 0 ? (int)i : 0;
	str_field(v, "job_id", e->job_id, sizeof e->job_id);
	str_field(v, "step_id", e->step_id, sizeof e->step_id);
	str_field(v, "host", e->host, sizeof e->host);
	str_field(v, "message", e->message, sizeof e->message);
	ck = json_get(v, "last_checkpoint");
	e->last_checkpoint_step = -1;
	if (ck && json_get_string(ck, "path")) {
		str_field(ck, "path", e->last_checkpoint, sizeof e->last_checkpoint);
		if (json_get_int(ck, "step", &i) == 0)
			e->last_checkpoint_step = i;
	}
	f = json_get(v, "first_failure");
	if (f && json_get_string(f, "host")) {
		struct exit_failure *ff = &e->first_failure;

		ff->valid = 1;
		ff->rank = json_get_int(f, "rank", &i) == 0 ? (int)i : -1;
		str_field(f, "host", ff->host, sizeof ff->host);
		ff->pid = json_get_int(f, "pid", &i) == 0 ? (int)i : 0;
		ff->exit_code = json_get_int(f, "exit_code", &i) == 0 ? (int)i : -1;
		str_field(f, "signal", ff->signal, sizeof ff->signal);
		ff->time = json_get_double(f, "timestamp", &d) == 0 ? d : 0;
		ff->last_step = json_get_int(f, "last_step", &i) == 0 ? i : -1;
		{
			bool b = false;

			ff->secondary = json_get_bool(f, "secondary", &b) == 0 && b;
		}
		str_field(f, "what", ff->what, sizeof ff->what);
	}
	json_value_free(v);
	return 0;
}

static void merge(struct exit_info *sum, const struct exit_info *node)
{
	int worse = exit_code_worst(sum->exit_code, node->exit_code) != sum->exit_code;

	if (worse) {
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

int exit_info_summarise(const char *run_dir, int nnodes, int restart_count, double wait_s,
			struct exit_info *sum, char *err, size_t errlen)
{
	char path[4096], missing[512] = "";
	struct timespec nap = { 0, 100 * 1000 * 1000 };
	double waited = 0;
	int have = 0;

	for (int n = 0; n < nnodes; n++) {
		struct exit_info node;

		/* This attempt's record: an earlier attempt's must not be read
		 * while the node is still writing the current one. */
		snprintf(path, sizeof path, "%s/exit_info.node-%03d.restart-%d.json", run_dir, n,
			 restart_count);
		while (read_node(path, &node) < 0 && waited < wait_s) {
			nanosleep(&nap, NULL);
			waited += 0.1;
		}
		if (read_node(path, &node) < 0) {
			size_t l = strlen(missing);

			snprintf(missing + l, sizeof missing - l, "%s%d", l ? ", " : "", n);
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
			 "%s(node(s) %s wrote no exit_info file)", l ? " " : "", missing);
		/* A node that never joined is what rendezvous_timeout says already. */
		if (sum->exit_code != STORK_EXIT_RENDEZVOUS) {
			sum->exit_code = exit_code_worst(sum->exit_code, STORK_EXIT_RANK_FAILED);
			sum->reason = exit_reason_name(sum->exit_code);
		}
	}
	snprintf(path, sizeof path, "%s/exit_info.json", run_dir);
	if (write_json(path, sum, nnodes, err, errlen) < 0)
		return -1;
	return sum->exit_code;
}
