/*
 * daemon/node/tensorboard.c - see tensorboard.h.
 */
#include "config.h"
#include "daemon/node/tensorboard.h"

#include "lib/clock.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/run/metrics_file.h"
#include "lib/run/metrics_line.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The configuration's text at most (TensorBoard shows it in its Text tab). */
#define CONFIG_TEXT_MAX (256 * 1024)

/* Rank 0's first event: the resolved configuration, as Markdown code. */
static void put_config(struct tensorboard_rank *r, const char *run_dir)
{
	char path[4200], *text = malloc(CONFIG_TEXT_MAX + 16);
	int fd;
	ssize_t n = -1;

	snprintf(path, sizeof path, "%s/config/stork.yaml", run_dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (text && fd >= 0) {
		memcpy(text, "```\n", 4);
		n = read(fd, text + 4, CONFIG_TEXT_MAX);
	}
	if (n > 0) {
		memcpy(text + 4 + n, "\n```", 5);
		tfevents_text(&r->events, clock_wall(), 0, "config", text);
	}
	if (fd >= 0)
		close(fd);
	free(text);
}

/* Write what rank r's file keeps, unless failed already; a file that cannot be written is given up, said once. */
static void write_or_give_up(struct tensorboard *tb, struct tensorboard_rank *r, int failed)
{
	if (failed || tfevents_flush(&r->events) < 0) {
		if (!tb->warned++)
			stork_warn("TensorBoard files: cannot write %s: %s; the run goes on without them",
				   r->events.path, strerror(errno));
		tfevents_close(&r->events);
	}
}

void tensorboard_start(struct tensorboard *tb, const char *run_dir, const char *host,
		       int rank_base, int n)
{
	char err[4600], dir[4200];

	memset(tb, 0, sizeof tb[0]);
	tb->r = calloc((size_t)n, sizeof *tb->r);
	if (!tb->r) {
		stork_warn("TensorBoard files: out of memory; the run goes on without them");
		return;
	}
	tb->n = n;
	for (int i = 0; i < n; i++) {
		struct tensorboard_rank *r = &tb->r[i];
		struct stat st;

		r->rank = rank_base + i;
		r->events.fd = -1;
		snprintf(r->metrics, sizeof r->metrics, "%s/logs/rank-%03d.metrics.jsonl", run_dir,
			 r->rank);
		/* earlier attempts' lines are in earlier files */
		r->read_to = lstat(r->metrics, &st) == 0 ? st.st_size : 0;
		snprintf(dir, sizeof dir, "%s/tensorboard/rank-%03d", run_dir, r->rank);
		if (tfevents_open(&r->events, dir, host, clock_wall(), err, sizeof err) < 0) {
			if (!tb->warned++)
				stork_warn("TensorBoard files: %s; the run goes on without them", err);
			continue;
		}
		if (r->rank == 0) {
			put_config(r, run_dir);
			write_or_give_up(tb, r, 0);
		}
	}
}

/* A line the scanner could not read (metrics_line.h), parsed: a scalar's event when it is one. */
static int put_parsed(struct tensorboard_rank *r, const char *line, size_t len)
{
	json_t *v = json_loadb(line, len, 0, NULL);
	const json_t *value = json_object_get(v, "value"), *step = json_object_get(v, "step");
	const char *metric = json_string_value(json_object_get(v, "metric"));
	int rc = 0;

	if (metric && json_is_number(value) && json_is_integer(step))
		rc = tfevents_scalar(&r->events, json_number_value(json_object_get(v, "ts")),
				     json_integer_value(step), metric,
				     (float)json_number_value(value));
	json_decref(v);
	return rc;
}

/* One metrics line (metrics_file_follow's callback): a scalar when it has a metric, a numeric value and a step. */
static int put_line(char *line, size_t len, void *arg)
{
	struct tensorboard_rank *r = arg;
	struct metrics_scalar s;
	int rc = 0;

	switch (metrics_line_scalar(line, len, &s)) {
	case 1: rc = tfevents_scalar(&r->events, s.ts, s.step, s.metric, (float)s.value); break;
	case 0: break;
	default: rc = put_parsed(r, line, len); break;
	}
	return rc < 0 ? 1 : 0;
}

/* What rank r's metrics file gained, as events, written at once. */
static void follow(struct tensorboard *tb, struct tensorboard_rank *r)
{
	if (r->events.fd >= 0)
		write_or_give_up(tb, r, metrics_file_follow(r->metrics, &r->read_to, put_line, r) > 0);
}

void tensorboard_poll(struct tensorboard *tb, int now)
{
	double t = clock_monotonic();

	if (!now && t < tb->poll_at)
		return;
	tb->poll_at = t + 1.0;
	for (int i = 0; i < tb->n; i++)
		follow(tb, &tb->r[i]);
}

void tensorboard_end(struct tensorboard *tb)
{
	tensorboard_poll(tb, 1);
	for (int i = 0; i < tb->n; i++)
		tfevents_close(&tb->r[i].events);
	free(tb->r);
	tb->r = NULL;
	tb->n = 0;
}
