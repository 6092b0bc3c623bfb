/*
 * launcher/run/host_tasks.c - the tasks of one host run as one launcher (see
 * launcher/run/host_tasks.h for why and how).
 *
 * Protocol, one connection per follower, fixed-size records:
 *
 *   follower -> leader   struct offer    its SLURM_LOCALID, ranks, cores, GPUs
 *   leader -> follower   struct verdict  the exit code, when the run has ended
 *
 * A follower whose leader is not listening yet retries until the timeout;
 * a leader that ends (or dies) closes the connections, so a follower never
 * outlives it.
 */
#define _GNU_SOURCE
#include "config.h"
#include "launcher/run/host_tasks.h"

#include "lib/clock.h"
#include "lib/env_number.h"
#include "lib/exit_codes.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/slurm/slurm_tasks.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define HOST_MAX_CPUS 8192
#define HOST_MAX_NODES 65536
#define OFFER_MAGIC "STKHOST1"
#define VERDICT_MAGIC "STKHEND1"

struct offer {
	char magic[8];
	int32_t local_id;
	int32_t ranks;
	int32_t has_gpus;           /* CUDA_VISIBLE_DEVICES was set */
	char gpus[256];             /* its value, NUL-terminated */
	uint8_t cpus[HOST_MAX_CPUS / 8]; /* sched_getaffinity's mask */
};

struct verdict {
	char magic[8];
	int32_t code;
};

/* ------------------------------------------------------------ the role */

static long long env_or(const char *name, long long min, long long max, long long dflt, int *bad,
			char *err, size_t errlen)
{
	long long v;

	if (env_number(name, min, max, dflt, &v, err, errlen) < 0)
		*bad = 1;
	return v;
}

int host_tasks_init(struct host_tasks *h, bool merge, char *err, size_t errlen)
{
	static int counts[HOST_MAX_NODES];
	const char *per_node = getenv("SLURM_STEP_TASKS_PER_NODE");
	int n, bad = 0;

	memset(h, 0, sizeof *h);
	h->listen_fd = -1;
	h->role = HOST_ALONE;
	if (!merge || !getenv("SLURM_STEP_ID") || !per_node)
		return 0;
	n = slurm_tasks_per_node(per_node, counts, HOST_MAX_NODES);
	if (n < 1) {
		snprintf(err, errlen, "SLURM_STEP_TASKS_PER_NODE='%s' is not Slurm's form", per_node);
		return -1;
	}
	h->node_id = (int)env_or("SLURM_NODEID", 0, n - 1, -1, &bad, err, errlen);
	if (!bad)
		h->local_id = (int)env_or("SLURM_LOCALID", 0, INT32_MAX, -1, &bad, err, errlen);
	if (bad)
		return -1;
	if (h->node_id < 0 || h->local_id < 0)
		return 0; /* not told where it is: run alone, as before */
	h->ntasks = counts[h->node_id];
	h->nnodes = n;
	if (h->local_id >= h->ntasks) {
		snprintf(err, errlen, "SLURM_LOCALID=%d, but SLURM_STEP_TASKS_PER_NODE='%s' gives "
			 "node %d %d task(s)", h->local_id, per_node, h->node_id, h->ntasks);
		return -1;
	}
	if (h->ntasks > 1)
		h->role = h->local_id == 0 ? HOST_LEADER : HOST_FOLLOWER;
	/* abstract: no file to plant or leave behind; the name is public, the uid check is not */
	snprintf(h->name + 1, sizeof h->name - 1, "stork-host-tasks.%u.%s.%s.%d", (unsigned)getuid(),
		 getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "0", getenv("SLURM_STEP_ID"),
		 h->node_id);
	return 0;
}

static socklen_t socket_address(const struct host_tasks *h, struct sockaddr_un *a)
{
	size_t len = 1 + strlen(h->name + 1);

	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, h->name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

/* The peer of fd runs as this user: anything else is another user's process. */
static int peer_is_us(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof cred;

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

/* Read len bytes before the deadline (monotonic seconds; < 0: none). 0, or -1. */
static int read_until(int fd, void *buf, size_t len, double deadline)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int wait_ms = deadline < 0 ? -1 : (int)((deadline - clock_monotonic()) * 1000);
		ssize_t got;

		if (deadline >= 0 && wait_ms <= 0)
			return -1;
		if (poll(&pfd, 1, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got = read(fd, p, len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return -1;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* ------------------------------------------------------------ the leader */

/* One follower's offer on a new connection, checked. 0, or -1 (the connection is dropped). */
static int take_offer(struct host_tasks *h, int fd, double deadline, struct offer *all,
		      char *why, size_t whylen)
{
	struct offer o;

	if (!peer_is_us(fd)) {
		snprintf(why, whylen, "a process of another user connected to %s", h->name + 1);
		return -1;
	}
	if (read_until(fd, &o, sizeof o, deadline) < 0 ||
	    memcmp(o.magic, OFFER_MAGIC, sizeof o.magic) || o.local_id < 1 ||
	    o.local_id >= h->ntasks || o.ranks < 1 || o.gpus[sizeof o.gpus - 1] ||
	    h->followers[o.local_id - 1] >= 0) {
		snprintf(why, whylen, "a malformed or repeated offer on %s", h->name + 1);
		return -1;
	}
	all[o.local_id] = o;
	h->followers[o.local_id - 1] = fd;
	return 0;
}

static void name_missing(const struct host_tasks *h, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 1; i < h->ntasks && off < len; i++)
		if (h->followers[i - 1] < 0) {
			int n = snprintf(buf + off, len - off, "%s%d", off ? ", " : "", i);

			if (n < 0)
				return;
			off += (size_t)n;
		}
}

static int listen_socket(struct host_tasks *h, char *err, size_t errlen)
{
	struct sockaddr_un a;
	socklen_t alen = socket_address(h, &a);

	h->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&a, alen) < 0 ||
	    listen(h->listen_fd, h->ntasks) < 0) {
		snprintf(err, errlen, "the host's tasks cannot meet on the local socket @%s: %s%s",
			 h->name + 1, strerror(errno),
			 errno == EADDRINUSE ? " (another process holds the name)" : "");
		return -1;
	}
	return 0;
}

/* Wait for every follower's offer into all[1..ntasks-1]. */
static int accept_followers(struct host_tasks *h, double timeout, struct offer *all, char *err,
			    size_t errlen)
{
	double deadline = clock_monotonic() + timeout;
	int have = 0;

	while (have < h->ntasks - 1) {
		struct pollfd pfd = { .fd = h->listen_fd, .events = POLLIN };
		int wait_ms = (int)((deadline - clock_monotonic()) * 1000), fd;
		char why[256];

		if (wait_ms <= 0 || poll(&pfd, 1, wait_ms) == 0) {
			char missing[256];

			name_missing(h, missing, sizeof missing);
			snprintf(err, errlen, "task(s) %s of this host (node %d) did not join its first "
				 "task within %.0f s (run.rendezvous_timeout)", missing, h->node_id,
				 timeout);
			return -1;
		}
		fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (take_offer(h, fd, deadline, all, why, sizeof why) < 0) {
			stork_warn("%s: ignored", why);
			close(fd);
			continue;
		}
		have++;
	}
	return 0;
}

/* The cores of every task of the host, the leader's included, for storkd's bindings. */
static void widen_cores(const struct host_tasks *h, const struct offer *all)
{
	cpu_set_t *set = CPU_ALLOC(HOST_MAX_CPUS);
	size_t size = CPU_ALLOC_SIZE(HOST_MAX_CPUS);

	if (!set)
		return;
	CPU_ZERO_S(size, set);
	for (int t = 0; t < h->ntasks; t++)
		for (int c = 0; c < HOST_MAX_CPUS; c++)
			if (all[t].cpus[c / 8] & (1u << (c % 8)))
				CPU_SET_S((size_t)c, size, set);
	if (sched_setaffinity(0, size, set) < 0)
		stork_warn("cannot take the cores of this host's other tasks: %s", strerror(errno));
	CPU_FREE(set);
}

/* CUDA_VISIBLE_DEVICES of the host's tasks, in task order: rank i of the
 * host has task i's GPUs when each task has one. */
static void widen_gpus(const struct host_tasks *h, const struct offer *all)
{
	char list[4096] = "";
	size_t off = 0;
	int any = 0;

	for (int t = 0; t < h->ntasks; t++) {
		if (!all[t].has_gpus || !all[t].gpus[0])
			continue;
		any = 1;
		off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? "," : "",
					all[t].gpus);
		if (off >= sizeof list)
			return; /* cannot be: 256 tasks' worth */
	}
	if (any)
		setenv("CUDA_VISIBLE_DEVICES", list, 1);
}

/* What every part of Stork reads of the step is now one task per host. */
static void as_one_task_per_host(const struct host_tasks *h)
{
	char v[32];

	snprintf(v, sizeof v, "%d", h->node_id);
	setenv("SLURM_PROCID", v, 1);
	setenv("SLURM_LOCALID", "0", 1);
	snprintf(v, sizeof v, "%d", h->nnodes);
	setenv("SLURM_STEP_NUM_TASKS", v, 1);
	setenv("SLURM_NTASKS", v, 1);
	snprintf(v, sizeof v, "1(x%d)", h->nnodes);
	setenv("SLURM_STEP_TASKS_PER_NODE", v, 1);
	setenv("SLURM_TASKS_PER_NODE", v, 1);
	/* a PMIx fence waits for every task of the step, and the followers never come */
	unsetenv("PMIX_RANK");
	unsetenv("PMIX_NAMESPACE");
}

static void offer_of_this_task(struct offer *o, int local_id, int ranks)
{
	cpu_set_t *set = CPU_ALLOC(HOST_MAX_CPUS);
	size_t size = CPU_ALLOC_SIZE(HOST_MAX_CPUS);
	const char *gpus = getenv("CUDA_VISIBLE_DEVICES");

	memset(o, 0, sizeof *o);
	memcpy(o->magic, OFFER_MAGIC, sizeof o->magic);
	o->local_id = local_id;
	o->ranks = ranks;
	o->has_gpus = gpus != NULL;
	snprintf(o->gpus, sizeof o->gpus, "%s", gpus ? gpus : "");
	if (set && sched_getaffinity(0, size, set) == 0) {
		for (int c = 0; c < HOST_MAX_CPUS; c++)
			if (CPU_ISSET_S((size_t)c, size, set))
				o->cpus[c / 8] |= (uint8_t)(1u << (c % 8));
	}
	if (set)
		CPU_FREE(set);
}

int host_tasks_gather(struct host_tasks *h, int ranks, double timeout, int *total, char *err,
		      size_t errlen)
{
	struct offer *all = calloc((size_t)h->ntasks, sizeof *all);
	int rc = -1;

	h->followers = malloc((size_t)(h->ntasks - 1) * sizeof *h->followers);
	if (!all || !h->followers) {
		snprintf(err, errlen, "out of memory for %d tasks", h->ntasks);
		goto out;
	}
	for (int i = 0; i < h->ntasks - 1; i++)
		h->followers[i] = -1;
	offer_of_this_task(&all[0], 0, ranks);
	if (listen_socket(h, err, errlen) < 0 || accept_followers(h, timeout, all, err, errlen) < 0)
		goto out;
	*total = 0;
	for (int t = 0; t < h->ntasks; t++)
		*total += all[t].ranks;
	widen_cores(h, all);
	widen_gpus(h, all);
	as_one_task_per_host(h);
	stork_info("the %d tasks on this host run as one launcher: %d rank(s), threads of one storkd "
		   "(parallel.merge_tasks)", h->ntasks, *total);
	rc = 0;
out:
	free(all);
	return rc;
}

void host_tasks_end(struct host_tasks *h, int code)
{
	struct verdict v = { .code = code };

	memcpy(v.magic, VERDICT_MAGIC, sizeof v.magic);
	for (int i = 0; h->followers && i < h->ntasks - 1; i++)
		if (h->followers[i] >= 0) {
			(void)write_all(h->followers[i], &v, sizeof v);
			close(h->followers[i]);
		}
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	free(h->followers);
	h->followers = NULL;
	h->listen_fd = -1;
}

/* ------------------------------------------------------------ a follower */

static int connect_leader(const struct host_tasks *h, double timeout)
{
	struct sockaddr_un a;
	socklen_t alen = socket_address(h, &a);
	double deadline = clock_monotonic() + timeout;

	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, alen) == 0)
			return fd;
		close(fd);
		if (clock_monotonic() >= deadline)
			return -1;
		usleep(20000); /* the leader is still loading its configuration */
	}
}

int host_tasks_follow(struct host_tasks *h, int ranks, double timeout)
{
	struct offer o;
	struct verdict v;
	int fd = connect_leader(h, timeout);

	if (fd < 0) {
		stork_error("task %d of this host (node %d) found no first task to join within %.0f s "
			    "(run.rendezvous_timeout)", h->local_id, h->node_id, timeout);
		return STORK_EXIT_RENDEZVOUS;
	}
	if (!peer_is_us(fd)) {
		stork_error("the local socket @%s belongs to another user: the host's tasks cannot "
			    "meet", h->name + 1);
		close(fd);
		return STORK_EXIT_RENDEZVOUS;
	}
	offer_of_this_task(&o, h->local_id, ranks);
	if (write_all(fd, &o, sizeof o) < 0) {
		stork_error("task %d of this host: the first task closed the connection",
			    h->local_id);
		close(fd);
		return STORK_EXIT_RENDEZVOUS;
	}
	/* the run lasts as long as it lasts: the leader's end, or death, wakes this */
	if (read_until(fd, &v, sizeof v, -1) < 0 ||
	    memcmp(v.magic, VERDICT_MAGIC, sizeof v.magic) || v.code < 0 || v.code > 255) {
		stork_error("task %d of this host: the first task, which ran this task's ranks, "
			    "ended without an exit code", h->local_id);
		close(fd);
		return STORK_EXIT_RANK_FAILED;
	}
	close(fd);
	return v.code;
}
