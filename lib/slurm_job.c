/*
 * lib/slurm_job.c - see slurm_job.h.
 */
#include "config.h"
#include "lib/slurm_job.h"

#include <errno.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

uint32_t slurm_job_id_from_env(void)
{
	const char *s = getenv("SLURM_JOB_ID");

	return s ? (uint32_t)strtoul(s, NULL, 10) : 0;
}

int slurm_job_query(uint32_t id, struct slurm_job *job, char *err, size_t errlen)
{
	job_info_msg_t *msg = NULL;

	memset(job, 0, sizeof *job);
	if (slurm_load_job(&msg, id, SHOW_ALL) != SLURM_SUCCESS || !msg || msg->record_count < 1) {
		snprintf(err, errlen, "cannot read job %u from slurmctld: %s", id,
			 slurm_strerror(slurm_get_errno()));
		if (msg)
			slurm_free_job_info_msg(msg);
		return -1;
	}
	job->id = id;
	job->end_time = msg->job_array[0].time_limit == INFINITE ? 0 : msg->job_array[0].end_time;
	job->start_time = msg->job_array[0].start_time;
	job->requeue = msg->job_array[0].requeue != 0;
	job->batch = msg->job_array[0].batch_flag != 0;
	slurm_free_job_info_msg(msg);
	return 0;
}

/* `scontrol requeue ID`, its output appended to err on failure. */
static int scontrol_requeue(uint32_t id, char *err, size_t errlen)
{
	char cmd[64], line[256];
	size_t used = strlen(err);
	FILE *p;
	int status;

	snprintf(cmd, sizeof cmd, "scontrol requeue %u 2>&1", id);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof line, p)) {
		line[strcspn(line, "\n")] = '\0';
		if (used + 3 < errlen) {
			snprintf(err + used, errlen - used, "; scontrol: %s", line);
			used = strlen(err);
		}
	}
	status = pclose(p);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int slurm_job_requeue(uint32_t id, char *err, size_t errlen)
{
	if (slurm_requeue(id, 0) == SLURM_SUCCESS)
		return 0;
	snprintf(err, errlen, "slurm_requeue(%u): %s", id, slurm_strerror(slurm_get_errno()));
	return scontrol_requeue(id, err, errlen);
}

int slurm_job_set_comment(uint32_t id, const char *comment)
{
	job_desc_msg_t desc;
	char text[256];

	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	snprintf(text, sizeof text, "%s", comment);
	desc.comment = text;
	return slurm_update_job(&desc) == SLURM_SUCCESS ? 0 : -1;
}
