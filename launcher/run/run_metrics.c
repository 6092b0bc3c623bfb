/*
 * launcher/run/run_metrics.c - see run_metrics.h.
 */
#include "config.h"
#include "launcher/run/run_metrics.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/formats/tfevents.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/run/metrics_rollup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The state field of sacct's row of job itself (what follows "JOB|"), or NULL when it has none. */
static const char *job_state(const char *text, const char *job)
{
	size_t len = strlen(job);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, job, len) && l[len] == '|')
			return l + len + 1;
	return NULL;
}

/*
 * Whether sacct's answer lacks the job's own row, or still has it pending:
 * slurmdbd learns of the job's start from slurmctld a moment after its
 * steps may already be recorded, and a short run can end in between.
 */
static int job_row_missing(const char *out, const char *job)
{
	const char *state = job_state(out, job);

	return !state || !strncmp(state, "PENDING|", 8);
}

char *run_metrics_sacct(const char *job, int *status)
{
	char cmd[256];

	*status = -1;
	if (!*job || strspn(job, "0123456789_") != strlen(job))
		return NULL; /* a job id only: this goes through a shell */
	snprintf(cmd, sizeof cmd, "sacct -j %s --format=JobID,State,Elapsed,MaxRSS,ReqMem,"
		 "AllocTRES%%30,ExitCode -P 2>&1", job);
	return command_output(cmd, status);
}

int run_metrics_sacct_final(const char *text, const char *job)
{
	static const char *const running[] = { "RUNNING|", "PENDING|", "REQUEUED|", "SUSPENDED|",
					       "COMPLETING|", "CONFIGURING|", "RESIZING|" };
	const char *state = job_state(text, job);

	for (size_t i = 0; state && i < sizeof running / sizeof *running; i++)
		if (!strncmp(state, running[i], strlen(running[i])))
			return 0;
	return state != NULL;
}

/* sacct.csv: the job's row(s), or a comment saying why there are none. */
static void write_sacct(const char *run_dir, const char *job)
{
	char path[4200], err[512];
	char *out = NULL;
	int status = -1;

	if (path_join(path, sizeof path, run_dir, "metrics/sacct.csv") < 0)
		return;
	/* up to 5 s for slurmdbd to record the running job's allocation */
	for (int tries = 0; tries < 10; tries++) {
		free(out);
		out = run_metrics_sacct(job, &status);
		if (!out || status != 0 || !job_row_missing(out, job))
			break;
		usleep(500 * 1000);
	}
	if (!out || status != 0) {
		char line[1024];

		msg_format(line, sizeof line, "# no accounting for job %s: %s\n", job,
			   out && out[0] ? strtok(out, "\n") : "sacct cannot run");
		free(out);
		out = strdup(line);
		stork_warn("metrics/sacct.csv: %s", line + 2);
	}
	if (out && atomic_write_file(path, out, strlen(out), err, sizeof err) < 0)
		stork_warn("%s", err);
	free(out);
}

/* nvidia-smi.node-NNN.xml, once per node: the GPUs as the run found them. */
static void write_gpus(const char *run_dir, int node_index)
{
	char path[4200], name[64], err[512];
	char *out;
	int status = -1;

	snprintf(name, sizeof name, "metrics/nvidia-smi.node-%03d.xml", node_index);
	if (path_join(path, sizeof path, run_dir, name) < 0 || access(path, F_OK) == 0)
		return;
	out = command_output("nvidia-smi -q -x 2>/dev/null", &status);
	if (out && status == 0 && out[0] &&
	    atomic_write_file(path, out, strlen(out), err, sizeof err) < 0)
		stork_warn("%s", err);
	free(out);
}

void run_metrics_write(const char *run_dir, int node_index, int summarise)
{
	const char *job = getenv("SLURM_JOB_ID");
	char err[1024];
	long skipped = 0;

	write_gpus(run_dir, node_index);
	if (!summarise)
		return;
	if (metrics_rollup(run_dir, &skipped, err, sizeof err) < 0)
		stork_warn("metrics/summary.csv: %s", err);
	if (job && *job)
		write_sacct(run_dir, job);
}

void run_metrics_tensorboard_end(const char *run_dir, long long step, const char *text)
{
	struct tfevents ev;
	struct stat st;
	char dir[4200], host[64] = "", err[4600] = "";

	snprintf(dir, sizeof dir, "%s/tensorboard/rank-000", run_dir);
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return; /* metrics.tensorboard: false */
	gethostname(host, sizeof host - 1);
	if (tfevents_open(&ev, dir, host, clock_wall(), err, sizeof err) < 0) {
		stork_warn("TensorBoard files: the run's end: %s", err);
		return;
	}
	if (tfevents_text(&ev, clock_wall(), step < 0 ? 0 : step, "exit", text) < 0 ||
	    tfevents_close(&ev) < 0) {
		stork_warn("TensorBoard files: the run's end: cannot write %s: %s", ev.path,
			   strerror(errno));
		tfevents_close(&ev);
	}
}
