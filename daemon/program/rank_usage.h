/*
 * daemon/program/rank_usage.h - what a rank of the user's program uses,
 * sampled by its daemon every metrics.sample_s: the resident memory and
 * CPU of its process group (the rank and every child it started: data
 * loader workers, a compiler), as host_rss_bytes and cpu_pct lines in the
 * rank's metrics file at the program's last logged step; and whether its
 * death by SIGKILL was for memory (lib/oom_watch.h).
 *
 * The rank's metrics file is also its heartbeat (program.c's read_beat):
 * the modification time of the daemon's own last line is remembered so
 * that it is not taken for the program's beat.
 */
#ifndef STORK_DAEMON_RANK_USAGE_H
#define STORK_DAEMON_RANK_USAGE_H

#include "daemon/node/rank_log.h"
#include "lib/oom_watch.h"

#include <stdint.h>
#include <sys/types.h>

struct rank_usage {
	struct oom_watch oom;
	double sample_at;        /* monotonic: the next sample */
	double cpu_s, cpu_at;    /* the group's CPU seconds at the last sample, and when */
	int64_t step;            /* the last "step" of the metrics file; -1 none */
	long long read_to;       /* how far the metrics file was read for it */
	double own_mtime;        /* the file's modification time after the daemon's own line */
};

void rank_usage_init(struct rank_usage *u);

/*
 * Follow the rank (pid, its process group's leader) and, when its sample
 * is due (every sample_s), log its figures in rl.
 */
void rank_usage_watch(struct rank_usage *u, pid_t pid, struct rank_log *rl, double sample_s);

/* Whether a modification time of the metrics file was the daemon's own line. */
int rank_usage_own_write(const struct rank_usage *u, double mtime);

#endif
