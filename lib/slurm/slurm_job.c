/*
 * lib/slurm/slurm_job.c - see slurm_job.h.
 */
#include "config.h"
#include "lib/slurm/slurm_job.h"
#include "lib/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <slurm/slurm.h>
#include <spawn.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

extern char **environ;

uint32_t slurm_job_id_from_env(void)
{
	const char *s = getenv("SLURM_JOB_ID");

	return s ? (uint32_t)strtoul(s, NULL, 10) : 0;
}

/*
 * Is there a slurm.conf for libslurm to read? Without one its parser
 * retries for 60 s before giving up, which a process that merely carries
 * SLURM_JOB_ID (a test, a copied environment) should not sit through. In a
 * job step the file is there: /etc/slurm, or where SLURM_CONF points (as
 * slurmd sets it in configless clusters, to its cached copy), or slurmd's
 * cache /run/slurm/conf.
 */
static int slurm_config_present(char *err, size_t errlen)
{
	const char *env = getenv("SLURM_CONF");
	const char *paths[] = { env && *env ? env : "/etc/slurm/slurm.conf",
				"/run/slurm/conf/slurm.conf" };
	int first_errno = 0;

	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		if (access(paths[i], R_OK) == 0)
			return 1;
		if (i == 0)
			first_errno = errno;
	}
	snprintf(err, errlen, "no Slurm configuration to reach slurmctld with (%s: %s)", paths[0],
		 strerror(first_errno));
	return 0;
}

/* Slurm's "no limit" end time: a year after the start. */
#define SLURM_YEAR_S (365L * 24 * 3600)

static int node_down(const char *host)
{
	node_info_msg_t *msg = NULL;
	int down = -1;

	if (slurm_load_node_single(&msg, (char *)host, SHOW_ALL) == SLURM_SUCCESS && msg &&
	    msg->record_count == 1) {
		uint32_t state = msg->node_array[0].node_state;

		down = (state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
		       (state & NODE_STATE_NO_RESPOND) != 0;
	}
	if (msg)
		slurm_free_node_info_msg(msg);
	return down;
}

static int node_left_job(uint32_t id, const char *host)
{
	job_info_msg_t *msg = NULL;
	hostlist_t hl;
	int left = -1;

	if (slurm_load_job(&msg, id, SHOW_ALL) == SLURM_SUCCESS && msg && msg->record_count >= 1 &&
	    msg->job_array[0].nodes && (hl = slurm_hostlist_create(msg->job_array[0].nodes))) {
		left = slurm_hostlist_find(hl, host) < 0;
		slurm_hostlist_destroy(hl);
	}
	if (msg)
		slurm_free_job_info_msg(msg);
	return left;
}

int slurm_job_lost_node(uint32_t id, const char *host)
{
	char err[256];

	if (!slurm_config_present(err, sizeof err))
		return -1;
	if (node_down(host) == 1 || node_left_job(id, host) == 1)
		return 1;
	return 0;
}

int slurm_job_query(uint32_t id, struct slurm_job *job, char *err, size_t errlen)
{
	job_info_msg_t *msg = NULL;
	int unlimited;

	memset(job, 0, sizeof *job);
	if (!slurm_config_present(err, errlen))
		return -1;
	if (slurm_load_job(&msg, id, SHOW_ALL) != SLURM_SUCCESS || !msg || msg->record_count < 1) {
		snprintf(err, errlen, "cannot read job %u from slurmctld: %s", id,
			 slurm_strerror(slurm_get_errno()));
		if (msg)
			slurm_free_job_info_msg(msg);
		return -1;
	}
	job->id = id;
	job->start_time = msg->job_array[0].start_time;
	/* no time limit: INFINITE, or NO_VAL, or (as a requeued job of an
	 * unlimited partition reads) an end Slurm put a year after the start */
	unlimited = msg->job_array[0].time_limit == INFINITE ||
		    msg->job_array[0].time_limit == NO_VAL ||
		    msg->job_array[0].end_time - msg->job_array[0].start_time >= SLURM_YEAR_S;
	job->end_time = unlimited ? 0 : msg->job_array[0].end_time;
	job->requeue = msg->job_array[0].requeue != 0;
	job->batch = msg->job_array[0].batch_flag != 0;
	job->pending = (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_PENDING;
	/* scancel sets CANCELLED (with COMPLETING while the steps end) before
	 * its TERM reaches them; preemption sets PENDING (requeued) or
	 * PREEMPTED, the time limit TIMEOUT */
	job->cancelled = (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_CANCELLED;
	job->limit_hours = unlimited ? 0 : msg->job_array[0].time_limit / 60.0;
	job->nodes = (int)msg->job_array[0].num_nodes;
	job->cpus = (int)msg->job_array[0].num_cpus;
	{
		/* "cpu=4,mem=8G,node=2,billing=4,gres/gpu=8" */
		const char *tres = msg->job_array[0].tres_alloc_str;
		const char *g = tres ? strstr(tres, "gres/gpu=") : NULL;

		job->gpus = g ? (int)strtol(g + 9, NULL, 10) : 0;
	}
	slurm_free_job_info_msg(msg);
	return 0;
}

int slurm_kill_wait(void)
{
	slurm_conf_t *conf = NULL;
	char err[256];
	int kw;

	if (!slurm_config_present(err, sizeof err))
		return -1;
	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS || !conf)
		return -1;
	kw = (int)conf->kill_wait;
	slurm_free_ctl_conf(conf);
	return kw;
}

/*
 * `scontrol requeue ID`, its output appended to err on failure. storkd has
 * threads, so the child is started with posix_spawn (nothing runs between
 * fork and exec in our code), and its pipe is close-on-exec everywhere
 * else. The child gets no other descriptor: those above stderr are closed
 * in it (glibc 2.34's addclosefrom), since not every descriptor of the
 * process is close-on-exec (libraries', the test harness's).
 * The child starts with the stop signals (lib/stop_signals.h) blocked:
 * Slurm signals every process of the step, and a child that died of USR1
 * would lose the requeue.
 */
static int scontrol_requeue(uint32_t id, char *err, size_t errlen)
{
	char idstr[16], line[256];
	char *argv[] = { "scontrol", "requeue", idstr, NULL };
	size_t used = strlen(err);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int pipefd[2], status, rc;
	FILE *out;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	snprintf(idstr, sizeof idstr, "%u", id);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	stop_signals_spawnattr(&attr);
	rc = posix_spawnp(&pid, "scontrol", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		snprintf(err + used, errlen - used, "; cannot run scontrol: %s", strerror(rc));
		return -1;
	}
	out = fdopen(pipefd[0], "r");
	while (out && fgets(line, sizeof line, out)) {
		line[strcspn(line, "\n")] = '\0';
		if (used + 3 < errlen) {
			snprintf(err + used, errlen - used, "; scontrol: %s", line);
			used = strlen(err);
		}
	}
	if (out)
		fclose(out);
	else
		close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int slurm_job_requeue(uint32_t id, char *err, size_t errlen)
{
	struct slurm_job job;

	/* Slurm refuses to requeue a pending job, and requeues a cancelled one
	 * as readily as a running one. When slurmctld cannot be asked, the
	 * requeue is tried all the same: it says why it failed, if it does. */
	if (slurm_job_query(id, &job, err, errlen) == 0) {
		if (job.cancelled) {
			snprintf(err, errlen, "job %u was cancelled (scancel): not requeued", id);
			return SLURM_JOB_WAS_CANCELLED;
		}
		if (job.pending)
			return 0;
	}
	if (!slurm_config_present(err, errlen))
		return -1;
	if (slurm_requeue(id, 0) == SLURM_SUCCESS)
		return 0;
	snprintf(err, errlen, "slurm_requeue(%u): %s", id, slurm_strerror(slurm_get_errno()));
	return scontrol_requeue(id, err, errlen);
}

int slurm_job_exclude_nodes(uint32_t id, const char *hosts, char *err, size_t errlen)
{
	job_desc_msg_t desc;
	char list[1024];

	if (!slurm_config_present(err, errlen))
		return -1;
	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	snprintf(list, sizeof list, "%s", hosts);
	desc.exc_nodes = list;
	if (slurm_update_job(&desc) == SLURM_SUCCESS)
		return 0;
	snprintf(err, errlen, "cannot exclude %s from job %u: %s", hosts, id,
		 slurm_strerror(slurm_get_errno()));
	return -1;
}

int slurm_job_set_comment(uint32_t id, const char *comment)
{
	job_desc_msg_t desc;
	char text[256];

	if (!slurm_config_present(text, sizeof text))
		return -1;
	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	snprintf(text, sizeof text, "%s", comment);
	desc.comment = text;
	return slurm_update_job(&desc) == SLURM_SUCCESS ? 0 : -1;
}

/*
 * One --signal value, "[{R|B}:]SIG[@LEAD]" (SIG a name, with or without
 * "SIG", or a number; LEAD 60 when left out, as sbatch takes it).
 */
static void parse_signal(const char *v, int *signo, int *lead)
{
	char name[16];
	size_t n = strcspn(v, "@");

	if ((v[0] == 'R' || v[0] == 'B') && v[1] == ':')
		v += 2, n -= 2;
	if (n == 0 || n >= sizeof name)
		return;
	memcpy(name, v, n);
	name[n] = '\0';
	*signo = (int)strtol(name, NULL, 10);
	for (int s = 1; !*signo && s < NSIG; s++) {
		const char *abbrev = sigabbrev_np(s);

		if (abbrev && (!strcmp(name, abbrev) ||
			       (!strncmp(name, "SIG", 3) && !strcmp(name + 3, abbrev))))
			*signo = s;
	}
	*lead = v[n] == '@' ? (int)strtol(v + n + 1, NULL, 10) : 60;
}

/* Job id's batch script, as slurmctld keeps it (malloc'd), or NULL. */
static char *batch_script(uint32_t id)
{
	char *text = NULL, err[256];
	size_t len = 0;
	FILE *f;

	if (!slurm_config_present(err, sizeof err) || !(f = open_memstream(&text, &len)))
		return NULL;
	if (slurm_job_batch_script(f, id) != SLURM_SUCCESS) {
		fclose(f);
		free(text);
		return NULL;
	}
	fclose(f);
	return text;
}

/* Each #SBATCH line of text before the first command, in turn (text is cut up). */
static char *next_sbatch_line(char **text, char **save)
{
	char *line;

	while ((line = strtok_r(*text, "\n", save))) {
		*text = NULL;
		if (line[0] != '#' && line[strspn(line, " \t")] != '\0')
			return NULL; /* sbatch reads #SBATCH lines until the first command */
		if (!strncmp(line, "#SBATCH", 7))
			return line + 7;
	}
	return NULL;
}

int slurm_job_signal(uint32_t id, int *signo, int *lead)
{
	char *text = batch_script(id), *cur = text, *line, *save = NULL;

	*signo = *lead = 0;
	if (!text)
		return -1;
	while ((line = next_sbatch_line(&cur, &save))) {
		const char *opt = strstr(line, "--signal");

		if (!opt)
			continue;
		opt += 8;
		if (*opt == '=' || *opt == ' ')
			parse_signal(opt + 1 + strspn(opt + 1, " "), signo, lead);
	}
	free(text);
	return 0;
}

int slurm_job_script_min_nodes(uint32_t id)
{
	char *text = batch_script(id), *cur = text, *line, *save = NULL;
	int min = 0;

	if (!text)
		return 0;
	while ((line = next_sbatch_line(&cur, &save))) {
		char *tok, *tsave = NULL;
		const char *val = NULL;

		for (tok = strtok_r(line, " \t", &tsave); tok; tok = strtok_r(NULL, " \t", &tsave)) {
			if (!strcmp(tok, "-N") || !strcmp(tok, "--nodes"))
				val = strtok_r(NULL, " \t", &tsave);
			else if (!strncmp(tok, "--nodes=", 8))
				val = tok + 8;
			else if (!strncmp(tok, "-N", 2))
				val = tok + 2;
			if (val) {
				min = (int)strtol(val, NULL, 10); /* "2-3": 2 */
				val = NULL;
			}
		}
	}
	free(text);
	return min;
}
