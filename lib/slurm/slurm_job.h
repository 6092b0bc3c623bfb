/*
 * lib/slurm/slurm_job.h - the few questions Stork asks slurmctld about its own job:
 * its end time, whether it may be requeued and whether it was cancelled,
 * the requeue itself, the job's Comment, and whether one of its nodes is
 * down. Linked by the launcher and
 * the daemon only (the plugin runs inside Slurm's own processes and must
 * not load libslurm again).
 */
#ifndef STORK_SLURM_JOB_H
#define STORK_SLURM_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct slurm_job {
	uint32_t id;
	time_t end_time;          /* 0 when unknown or unlimited */
	time_t start_time;
	int requeue;              /* the job may be requeued (--requeue / JobRequeue) */
	int batch;                /* a batch job (only those can be requeued) */
	int pending;              /* waiting to run (e.g. requeued by Slurm itself) */
	int cancelled;            /* ended by scancel: state CANCELLED, never to be requeued */
	double limit_hours;       /* the time limit, 0 when none */
	int nodes, cpus, gpus;    /* allocated: nodes, CPUs and GPUs (gres/gpu) in all */
};

/*
 * Whether job id lost node host, as slurmctld sees it: the node is DOWN or
 * not responding, or no longer in the job's node list (a --no-kill job
 * goes on without a failed node). 1, 0 when not, -1 when it cannot say.
 */
int slurm_job_lost_node(uint32_t id, const char *host);

/* The job id of this process's allocation (SLURM_JOB_ID), 0 outside Slurm. */
uint32_t slurm_job_id_from_env(void);

/* Ask slurmctld about job id. Returns 0, or -1 with Slurm's message. */
int slurm_job_query(uint32_t id, struct slurm_job *job, char *err, size_t errlen);

/* slurm_job_requeue's answer when the job was cancelled. */
#define SLURM_JOB_WAS_CANCELLED 1

/*
 * The --signal of batch job id's script (#SBATCH --signal=[R:|B:]SIG[@LEAD]):
 * *signo and *lead (seconds before the end), both 0 when the script asks
 * for none. slurmctld keeps no record of it that libslurm returns, and a
 * --signal given on sbatch's command line is not in the script: unseen.
 * Returns 0, or -1 when the script cannot be read (not a batch job).
 */
int slurm_job_signal(uint32_t id, int *signo, int *lead);

/*
 * Requeue the job: libslurm's slurm_requeue, then `scontrol requeue` if that
 * fails; but never a cancelled job. Slurm requeues a job that scancel is
 * ending as readily as a running one (it requeues ending jobs by design),
 * so slurmctld is asked first. Returns 0 when the job is requeued (now, or
 * already by Slurm itself, as PreemptMode=REQUEUE does before its TERM),
 * SLURM_JOB_WAS_CANCELLED (nothing done, err says so), or -1 with Slurm's
 * message(s) in err.
 */
int slurm_job_requeue(uint32_t id, char *err, size_t errlen);

/*
 * The controller's KillWait: seconds between the TERM at a job's time limit
 * and the KILL, the time a run has left once that TERM arrives. -1 when
 * slurmctld cannot be asked.
 */
int slurm_kill_wait(void);

/*
 * Keep job id off the nodes in hosts ("n2,n5") when it runs again: its
 * ExcNodeList. Slurm takes it only while the job is pending, that is right
 * after a requeue. 0, or -1 with Slurm's reason in err.
 */
int slurm_job_exclude_nodes(uint32_t id, const char *hosts, char *err, size_t errlen);

/*
 * The minimum node count batch job id's script asks for (#SBATCH -N2,
 * --nodes=2-3: 2), or 0 when it says none (given on sbatch's command line,
 * or no script to read). slurmctld tells a running job only what it got.
 */
int slurm_job_script_min_nodes(uint32_t id);

/* Set the job's Comment (best effort). Returns 0 or -1. */
int slurm_job_set_comment(uint32_t id, const char *comment);

#endif
