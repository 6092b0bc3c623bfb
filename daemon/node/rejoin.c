/* daemon/node/rejoin.c - see rejoin.h. */
#include "config.h"
#include "daemon/node/rejoin.h"

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/run/membership.h"
#include "lib/slurm/slurm_job.h"
#include "lib/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/*
 * The step's environment: this daemon's, with the place it takes, and
 * without the task counts of the step it runs in, which srun would read
 * as the new step's own (-n, --ntasks-per-node).
 */
static char **step_environment(const char *rejoin)
{
	static const char *const dropped[] = { "SLURM_NTASKS=", "SLURM_NPROCS=",
					       "SLURM_NTASKS_PER_NODE=", "SLURM_TASKS_PER_NODE=",
					       MEMBERSHIP_REJOIN_ENV "=" };
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	if (!(env = calloc(n + 2, sizeof *env)))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int keep = 1;

		for (size_t d = 0; d < sizeof dropped / sizeof dropped[0]; d++)
			keep &= strncmp(environ[i], dropped[d], strlen(dropped[d])) != 0;
		if (keep)
			env[k++] = environ[i];
	}
	env[k] = (char *)rejoin;
	return env;
}

int rejoin_start(struct rejoins *r, const char *run_dir, const char *host, int node, int nnodes,
		 int local_ranks, int attempt, int epoch, char *err, size_t errlen)
{
	char launcher[PATH_MAX], jobid[32], nodelist[96], config[4200], ranks[16], rejoin[96];
	char proc[64], dir[PATH_MAX];
	char *argv[] = { "srun", jobid, nodelist, "-N1", "-n1", "--overlap", "--mpi=none",
			 "--kill-on-bad-exit=0", launcher, "run", config, "--local-ranks", ranks,
			 NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	ssize_t len;
	char **env;
	pid_t pid;
	int rc;

	if (r->n >= REGROUP_MAX_LOSSES || !slurm_job_id_from_env()) {
		snprintf(err, errlen, "%s", r->n >= REGROUP_MAX_LOSSES ? "too many nodes rejoining" :
					    "not in a Slurm job");
		return -1;
	}
	/* the launcher is the program that started this daemon */
	snprintf(proc, sizeof proc, "/proc/%d/exe", (int)getppid());
	if ((len = readlink(proc, launcher, sizeof launcher - 1)) <= 0) {
		snprintf(err, errlen, "cannot find the launcher (%s): %s", proc, strerror(errno));
		return -1;
	}
	launcher[len] = '\0';
	snprintf(jobid, sizeof jobid, "--jobid=%u", slurm_job_id_from_env());
	snprintf(nodelist, sizeof nodelist, "--nodelist=%s", host);
	/* the new step starts where srun does; a relative run.dir is this daemon's */
	if (!realpath(run_dir, dir)) {
		snprintf(err, errlen, "%s: %s", run_dir, strerror(errno));
		return -1;
	}
	snprintf(config, sizeof config, "%s/config/stork.yaml", dir);
	snprintf(ranks, sizeof ranks, "%d", local_ranks);
	snprintf(rejoin, sizeof rejoin, MEMBERSHIP_REJOIN_ENV "=%d %d %d %d", node, nnodes, attempt,
		 epoch);
	if (!(env = step_environment(rejoin))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* as scontrol's (lib/slurm/slurm_job.c): nothing of ours between fork
	 * and exec, no descriptor but the standard ones, the stop signals
	 * blocked (they reach the new step's launcher from Slurm itself) */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	stop_signals_spawnattr(&attr);
	fflush(NULL);
	rc = posix_spawnp(&pid, "srun", &fa, &attr, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(env);
	if (rc) {
		snprintf(err, errlen, "cannot run srun: %s", strerror(rc));
		return -1;
	}
	r->steps[r->n].pid = pid;
	r->steps[r->n].node = node;
	r->n++;
	return 0;
}

/* Forget step i: the last takes its place. */
static void drop(struct rejoins *r, int i)
{
	r->steps[i] = r->steps[--r->n];
}

int rejoin_reap(struct rejoins *r, int *status)
{
	for (int i = 0; i < r->n; i++) {
		int node = r->steps[i].node;

		if (waitpid(r->steps[i].pid, status, WNOHANG) == r->steps[i].pid) {
			drop(r, i);
			return node;
		}
	}
	return -1;
}

/* Whether step i's rejoiner came in: then it ends with the run's last step. */
static int came_in(const struct rejoins *r, int i, const struct regroup *g)
{
	int k = r->steps[i].node;

	return g && g->alive[k] && !g->rejoin[k];
}

/* Wait up to seconds for the steps to end (reaping them); 1 when none is left. */
static int reap_all(struct rejoins *r, double seconds)
{
	double deadline = clock_monotonic() + seconds;
	int status;

	for (;;) {
		while (rejoin_reap(r, &status) >= 0)
			;
		if (!r->n || clock_monotonic() >= deadline)
			return !r->n;
		nanosleep(&(struct timespec){ 0, 100 * 1000 * 1000 }, NULL);
	}
}

void rejoin_end(struct rejoins *r, const struct regroup *g, double wait_s)
{
	int status;

	for (int i = 0; i < r->n; i++)
		if (!came_in(r, i, g)) {
			stork_info("restart.rejoin: ending launcher %d's step: the run ends before "
				   "it came in", r->steps[i].node);
			kill(r->steps[i].pid, SIGTERM);
		}
	if (reap_all(r, wait_s))
		return;
	for (int i = 0; i < r->n; i++) {
		stork_warn("restart.rejoin: launcher %d's step did not end with the run: ending it",
			   r->steps[i].node);
		kill(r->steps[i].pid, SIGTERM);
	}
	/* srun passes the TERM on and waits for its task; one that does not end is killed */
	if (reap_all(r, 15))
		return;
	for (int i = 0; i < r->n; i++) {
		kill(r->steps[i].pid, SIGKILL);
		waitpid(r->steps[i].pid, &status, 0);
	}
	r->n = 0;
}
