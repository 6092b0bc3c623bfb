/*
 * lib/oom_watch.h - whether a process killed by SIGKILL was killed for
 * memory: by its memory cgroup's limit (Slurm's --mem, a site's cgroup)
 * or by the kernel's out-of-memory killer.
 *
 * A dead process no longer says which cgroup it was in (a zombie's
 * /proc/PID/cgroup names the root), so the watch follows the process while
 * it lives: oom_watch_follow() notes each memory cgroup it is in and the oom_kill
 * counters of that cgroup and of each one above it (v1 counts a kill in
 * the cgroup whose limit it was, which may be the job's above a task's;
 * v2 in the victim's own and upwards) whenever it moves, and
 * oom_watch_mark() the node's counter (/proc/vmstat) now and then (a
 * watch never marked judges by cgroups alone). After
 * the death oom_watch_verdict() compares: a cgroup counter that grew names
 * that cgroup and its limit; else the node's counter grown since the last
 * mark names the kernel's killer (a coincidence with another process's
 * kill in that window is possible; the message says "on the node").
 *
 * cgroup v1 (memory.oom_control, memory.limit_in_bytes) and v2
 * (memory.events, memory.max) alike, found through /proc/self/mountinfo.
 */
#ifndef STORK_LIB_OOM_WATCH_H
#define STORK_LIB_OOM_WATCH_H

#include <stddef.h>
#include <sys/types.h>

#define OOM_WATCH_LEVELS 16

struct oom_watch {
	char cgroup[1024];                   /* the memory cgroup's path as /proc says it; "" none */
	/* every cgroup the process was seen in, each followed by those above it
	 * (a process that dies is moved to the root first: the earlier ones stay) */
	char dir[OOM_WATCH_LEVELS][2100];
	long long kills[OOM_WATCH_LEVELS];   /* their oom_kill counters when first seen; -1 none */
	int own[OOM_WATCH_LEVELS];           /* the process's own, not one above it */
	int levels;
	long long node_kills;                /* /proc/vmstat's oom_kill at the last mark; -1 none */
	double held;                         /* resident bytes at the last sample; -1 unknown */
};

struct oom_verdict {
	int cgroup;           /* 1: a cgroup's limit; 0: the kernel's killer on the node */
	char dir[2100];       /* the cgroup that hit its limit */
	double limit;         /* its limit in bytes; 0 none or unknown */
	double held;          /* the watch's held */
};

void oom_watch_init(struct oom_watch *w);

/* Note pid's memory cgroup, and its counters when it is a new one (cheap: one read); 1 when it was. */
int oom_watch_follow(struct oom_watch *w, pid_t pid);

/* Note the node's oom_kill counter. */
void oom_watch_mark(struct oom_watch *w);

/* After a death by SIGKILL: 1 and v filled when it was for memory, else 0. */
int oom_watch_verdict(const struct oom_watch *w, struct oom_verdict *v);

/* "killed by the out-of-memory killer: its cgroup /sys/... reached its limit of 256.0 MiB (it held 250.1 MiB at the last sample)" */
void oom_verdict_text(const struct oom_verdict *v, char *buf, size_t len);

/* The resident bytes of every process in process group pgid (a rank and its children); -1 none (a dead one not reaped yet counts as none). */
double oom_group_resident(pid_t pgid, double *cpu_s);

#endif
