/*
 * lib/oom_watch.c - see oom_watch.h.
 */
#include "config.h"
#include "lib/oom_watch.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the memory controller is mounted: v1's memory hierarchy, or the v2 tree. */
static struct {
	char root[1024];   /* the mount's root inside the hierarchy */
	char point[1024];  /* where it is mounted */
	int v2;
	int found;
} mount;
static pthread_once_t mount_once = PTHREAD_ONCE_INIT;

/* mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS] - FSTYPE SOURCE SUPEROPTS" */
static void find_mount(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], root[1024], point[1024], fstype[64], super[1024];

	while (f && fgets(line, sizeof line, f)) {
		const char *dash = strstr(line, " - ");
		int v1;

		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		v1 = !strcmp(fstype, "cgroup") && strstr(super, "memory");
		/* a v1 memory hierarchy wins over a v2 tree without the controller */
		if (v1 || (!strcmp(fstype, "cgroup2") && !mount.found)) {
			snprintf(mount.root, sizeof mount.root, "%s", root);
			snprintf(mount.point, sizeof mount.point, "%s", point);
			mount.v2 = !v1;
			mount.found = 1;
			if (v1)
				break;
		}
	}
	if (f)
		fclose(f);
}

static long long read_counter(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char name[64];
	long long v, found = -1;

	while (f && fscanf(f, "%63s %lld", name, &v) == 2)
		if (!strcmp(name, key)) {
			found = v;
			break;
		}
	if (f)
		fclose(f);
	return found;
}

static long long cgroup_kills(const char *dir)
{
	char path[2200];

	snprintf(path, sizeof path, "%s/%s", dir, mount.v2 ? "memory.events" : "memory.oom_control");
	return read_counter(path, "oom_kill");
}

/* The cgroup's limit; 0 when it has none (v1 says so with a huge number, v2 with "max"). */
static double cgroup_limit(const char *dir)
{
	char path[2200], text[64] = "";
	FILE *f;
	double v;

	snprintf(path, sizeof path, "%s/%s", dir, mount.v2 ? "memory.max" : "memory.limit_in_bytes");
	if (!(f = fopen(path, "re")))
		return 0;
	if (!fgets(text, sizeof text, f))
		text[0] = '\0';
	fclose(f);
	v = strtod(text, NULL);
	return isdigit((unsigned char)text[0]) && v < 1e18 ? v : 0;
}

/* pid's memory cgroup as /proc names it ("/slurm/uid_0/job_5/step_0/task_1"); -1 none. */
static int memory_cgroup(pid_t pid, char *out, size_t len)
{
	char path[64], line[2048];
	FILE *f;
	int found = -1;

	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		int match;

		if (!c2)
			continue;
		*c2 = '\0';
		/* v2: "0::/path"; v1: "4:memory:/path" (or with other controllers) */
		match = mount.v2 ? c1[1] == '\0' :
			(!strcmp(c1 + 1, "memory") || strstr(c1 + 1, "memory,") ||
			 (strlen(c1 + 1) > 7 && !strcmp(c2 - 7, ",memory")));
		if (match) {
			c2[1 + strcspn(c2 + 1, "\n")] = '\0';
			snprintf(out, len, "%s", c2 + 1);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

void oom_watch_init(struct oom_watch *w)
{
	memset(w, 0, sizeof *w);
	w->node_kills = -1;
	w->held = -1;
	pthread_once(&mount_once, find_mount);
}

/* The directories of cg and the cgroups above it, up to the mount's root. */
static void take_levels(struct oom_watch *w, const char *cg)
{
	size_t rl = strlen(mount.root);
	char rel[1024];

	/* a path outside the mount's root (another namespace's) is not reachable */
	if (strncmp(cg, mount.root, rl) || (rl > 1 && cg[rl] && cg[rl] != '/'))
		return;
	snprintf(rel, sizeof rel, "%s", rl > 1 ? cg + rl : cg);
	for (int own = 1; w->levels < OOM_WATCH_LEVELS; own = 0) {
		char *slash;
		int seen = 0;

		snprintf(w->dir[w->levels], sizeof w->dir[0], "%s%s", mount.point,
			 strcmp(rel, "/") ? rel : "");
		for (int i = 0; i < w->levels && !seen; i++)
			seen = !strcmp(w->dir[i], w->dir[w->levels]);
		if (!seen) {
			w->kills[w->levels] = cgroup_kills(w->dir[w->levels]);
			w->own[w->levels++] = own;
		}
		slash = strrchr(rel, '/');
		if (!slash || !strcmp(rel, "/"))
			break;
		if (slash == rel)
			rel[1] = '\0';
		else
			*slash = '\0';
	}
}

int oom_watch_follow(struct oom_watch *w, pid_t pid)
{
	char cg[sizeof w->cgroup];

	if (!mount.found || memory_cgroup(pid, cg, sizeof cg) < 0 || !strcmp(cg, w->cgroup))
		return 0;
	snprintf(w->cgroup, sizeof w->cgroup, "%s", cg);
	take_levels(w, cg);
	return 1;
}

void oom_watch_mark(struct oom_watch *w)
{
	w->node_kills = read_counter("/proc/vmstat", "oom_kill");
}

int oom_watch_verdict(const struct oom_watch *w, struct oom_verdict *v)
{
	long long node;

	memset(v, 0, sizeof *v);
	v->held = w->held;
	/*
	 * The lowest cgroup whose counter grew: the one whose limit was reached
	 * (v1 counts a kill in the cgroup whose limit it was). v2 counts a kill
	 * in the victim's cgroup and every one above it, so the process's own
	 * says it all, and one above would count its siblings' kills too.
	 */
	for (int i = 0; i < w->levels; i++) {
		long long now = cgroup_kills(w->dir[i]);

		if (mount.v2 && !w->own[i])
			continue;
		if (w->kills[i] >= 0 && now > w->kills[i]) {
			v->cgroup = 1;
			snprintf(v->dir, sizeof v->dir, "%s", w->dir[i]);
			/* v1 kills in the cgroup whose limit it was; v2 counts
			 * a limit above in every cgroup on the way: the nearest
			 * limit, there or above */
			for (int k = i; k < w->levels && (k == i || !w->own[k]) && !v->limit; k++)
				v->limit = cgroup_limit(w->dir[k]);
			return 1;
		}
	}
	node = read_counter("/proc/vmstat", "oom_kill");
	return w->node_kills >= 0 && node > w->node_kills;
}

static void bytes_text(double b, char *buf, size_t len)
{
	if (b >= 1 << 30)
		snprintf(buf, len, "%.1f GiB", b / (1 << 30));
	else
		snprintf(buf, len, "%.1f MiB", b / (1 << 20));
}

void oom_verdict_text(const struct oom_verdict *v, char *buf, size_t len)
{
	char limit[48] = "its limit", held[64] = "", amount[32];
	int n;

	if (v->limit > 0) {
		bytes_text(v->limit, amount, sizeof amount);
		snprintf(limit, sizeof limit, "its limit of %s", amount);
	}
	if (v->held >= 0) {
		bytes_text(v->held, amount, sizeof amount);
		snprintf(held, sizeof held, " (it held %s at the last sample)", amount);
	}
	if (!v->cgroup) {
		snprintf(buf, len, "killed by the kernel's out-of-memory killer on the node%s", held);
		return;
	}
	n = snprintf(buf, len, "killed by the out-of-memory killer: its memory cgroup %s reached ",
		     v->dir);
	if (n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "%s%s", limit, held);
}

/*
 * /proc/PID/stat after the command's ")": state ppid pgrp ... utime(12)
 * stime(13) cutime cstime ... rss(22). A process that is dying (its
 * memory released already: no resident page) or has died and is not
 * reaped yet (state Z or X) holds nothing any more: -1, not a zero that
 * would replace what it held at the last sample.
 */
static int proc_stat(const char *pid, pid_t *pgrp, double *cpu_s, double *rss)
{
	char path[64], text[1024], *p, state;
	unsigned long long ut, st, cut, cst;
	long long pages;
	int fd, n;

	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = (int)read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	if (!(p = strrchr(text, ')')))
		return -1;
	if (sscanf(p + 2, "%c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu %*d %*d "
			  "%*d %*d %*u %*u %lld", &state, pgrp, &ut, &st, &cut, &cst, &pages) != 7 ||
	    state == 'Z' || state == 'X' || pages <= 0)
		return -1;
	*cpu_s = (double)(ut + st + cut + cst) / (double)sysconf(_SC_CLK_TCK);
	*rss = (double)pages * (double)sysconf(_SC_PAGESIZE);
	return 0;
}

double oom_group_resident(pid_t pgid, double *cpu_s)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	double total = -1, cpu = 0;

	while (d && (e = readdir(d))) {
		double c, rss;
		pid_t g;

		if (!isdigit((unsigned char)e->d_name[0]) || proc_stat(e->d_name, &g, &c, &rss) < 0 ||
		    g != pgid)
			continue;
		total = (total < 0 ? 0 : total) + rss;
		cpu += c;
	}
	if (d)
		closedir(d);
	if (cpu_s)
		*cpu_s = cpu;
	return total;
}
