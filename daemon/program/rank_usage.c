/*
 * daemon/program/rank_usage.c - see rank_usage.h.
 */
#include "config.h"
#include "daemon/program/rank_usage.h"

#include "lib/clock.h"
#include "lib/run/metrics_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void rank_usage_init(struct rank_usage *u)
{
	memset(u, 0, sizeof *u);
	oom_watch_init(&u->oom);
	oom_watch_mark(&u->oom);
	u->step = -1;
}

/* A line's "step" (metrics_file_follow's callback): the newest one seen. */
static int take_step(char *line, size_t len, void *arg)
{
	struct rank_usage *u = arg;

	(void)len;
	for (char *p = line; (p = strstr(p, "\"step\":")); p += 7)
		u->step = strtoll(p + 7, NULL, 10);
	return 0;
}

/* The newest "step" in what the metrics file gained since the last look. */
static void read_step(struct rank_usage *u, const char *path)
{
	(void)metrics_file_follow(path, &u->read_to, take_step, u);
}

static double mtime_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9 : 0;
}

void rank_usage_watch(struct rank_usage *u, pid_t pid, struct rank_log *rl, double sample_s)
{
	double now = clock_monotonic(), cpu_s, held;
	int64_t at;

	oom_watch_follow(&u->oom, pid);
	if (now < u->sample_at)
		return;
	u->sample_at = now + sample_s;
	oom_watch_mark(&u->oom);
	held = oom_group_resident(pid, &cpu_s);
	if (held < 0)
		return;
	u->oom.held = held;
	read_step(u, rl->metrics_path);
	/* before the program's first step: step 0 */
	at = u->step > 0 ? u->step : 0;
	rank_metric(rl, at, "host_rss_bytes", held, "bytes");
	if (u->cpu_at > 0 && now > u->cpu_at)
		rank_metric(rl, at, "cpu_pct", 100 * (cpu_s - u->cpu_s) / (now - u->cpu_at), "%");
	u->cpu_s = cpu_s;
	u->cpu_at = now;
	u->own_mtime = mtime_of(rl->metrics_path);
	read_step(u, rl->metrics_path); /* past its own lines */
}

int rank_usage_own_write(const struct rank_usage *u, double mtime)
{
	return u->own_mtime > 0 && mtime == u->own_mtime;
}
