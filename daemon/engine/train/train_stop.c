/*
 * daemon/engine/train/train_stop.c - when and how a rank stops before its
 * last step, the same on every rank: the stop decision (a stop signal, the
 * job's time limit near, a cancellation), the stop's checkpoint, the
 * requeue, and a stop with no checkpoint.
 */
#include "config.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/data/data.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/train/hang_report.h"
#include "daemon/engine/model/hf_model.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "daemon/engine/parallel/pipeline.h"
#include "daemon/engine/train/preflight_probe.h"
#include "daemon/node/rank_log.h"
#include "daemon/engine/parallel/zero.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/bounded.h"
#include "lib/bind/bind.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/slurm/slurm_job.h"
#include "lib/slurm/time_limit_stop.h"
#include "lib/run/stage_path.h"
#include "lib/url.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static int agree_cancelled(struct rank *r, int *no_room, int *cancelled);

/*
 * The deadline guard (rank 0): whether another step and then a checkpoint
 * would no longer fit before the job's end, with preempt.deadline_lead
 * seconds to spare. Then the run stops now, without waiting for a signal
 * that may never come (a batch-shell trap, --signal forgotten).
 */
static int deadline_near(struct rank *r, double step_s)
{
	const struct stork_config *c = r->cfg;
	time_t end = r->node->job_end_time;
	double left, need;

	if (r->rank != 0 || !c->preempt.deadline_guard || !end)
		return 0;
	left = (double)(end - time(NULL));
	need = step_s + checkpoint_need(r) + c->preempt.deadline_lead;
	if (left >= need)
		return 0;
	rank_logf(&r->log,
		  "deadline guard: %.0f s left before the job's end; a step takes %.1f s, a "
		  "checkpoint about %.1f s, preempt.deadline_lead %.0f s: stopping now",
		  left, step_s, checkpoint_need(r), c->preempt.deadline_lead);
	printf("deadline guard: %.0f s left before the job's end: checkpointing and requeueing now\n",
	       left);
	fflush(stdout);
	return 1;
}

/*
 * The stop decision, the same on every rank: whether any rank has seen the
 * stop signal or rank 0's deadline guard fired (step_s: the step that just
 * ended took that long), and whether a stop checkpoint still fits before
 * the job's end. Only rank 0 answers the second (it timed the last commit,
 * which waits for every rank); the other ranks contribute 0, so one MAX
 * all-reduce carries both answers and no rank can stop differently. A stop
 * in a Slurm job then asks whether it is a cancellation (agree_cancelled).
 */
int rank_agree_stop(struct rank *r, int64_t steps_done, double step_s, int *stop, int *no_room,
		    int *cancelled, int *writing, int *time_due)
{
	int32_t v[4] = { atomic_load(r->node->stop_requested) ? 1 : 0, 0,
			 checkpoint_async_busy(r), checkpoint_time_due(r) };
	double left, need;

	if (r->node->stop_at_step > 0 && steps_done == r->node->stop_at_step)
		v[0] = 1;
	if (!v[0] && r->cfg->train.steps > steps_done && deadline_near(r, step_s))
		v[0] = 1;
	if (r->rank == 0 && !checkpoint_fits(r, &left, &need))
		v[1] = 1;
	if (comm_allreduce(r->comm, v, 4, COMM_INT32, COMM_MAX) < 0)
		return rank_fail_collective(r);
	*writing = v[2]; /* some rank's checkpoint.async write still runs */
	*time_due = v[3];
	*stop = v[0];
	*no_room = v[0] && v[1];
	*cancelled = 0;
	return *stop && r->node->slurm_job ? agree_cancelled(r, no_room, cancelled) : 0;
}

/* Rank 0: whether slurmctld says the job was cancelled (0 when it cannot
 * be asked: then the stop is a preemption, as the requeue will find out). */
static int job_cancelled(struct rank *r)
{
	struct slurm_job job;
	char err[512];

	if (slurm_job_query(r->node->slurm_job, &job, err, sizeof err) < 0) {
		rank_logf(&r->log, "warning: %s; the stop is taken for a preemption", err);
		return 0;
	}
	return job.cancelled;
}

/*
 * A stop agreed in a Slurm job: is it a cancellation? scancel (with or
 * without --signal=KILL) ends a job with SIGCONT and SIGTERM to every task
 * and SIGKILL KillWait seconds later; but preemption (PreemptMode=REQUEUE
 * or CANCEL) and the time limit send the same TERM, and scancel --signal
 * sends anything. The signal cannot tell them apart; slurmctld can, since
 * scancel sets the job's state to CANCELLED before any signal leaves
 * (preemption sets PENDING or PREEMPTED, the time limit TIMEOUT). Rank 0
 * asks, once, and a second MAX all-reduce gives every rank the answer and,
 * for a cancellation, whether the checkpoint fits before the KILL.
 */
static int agree_cancelled(struct rank *r, int *no_room, int *cancelled)
{
	int32_t v[2] = { 0, 0 };
	double left, need;

	if (r->rank == 0 && job_cancelled(r)) {
		v[0] = 1;
		v[1] = !checkpoint_fits_kill(r, &left, &need);
	}
	if (comm_allreduce(r->comm, v, 2, COMM_INT32, COMM_MAX) < 0)
		return rank_fail_collective(r);
	*cancelled = v[0];
	if (v[0])
		*no_room = v[1];
	return 0;
}

/*
 * A cancellation (scancel): the job ends for good and nothing is requeued.
 * checkpointed: the checkpoint of steps_done was committed before Slurm's
 * KILL, for a new job to start from; else the previous one stays the
 * latest.
 */
int rank_stop_cancelled(struct rank *r, int64_t steps_done, int checkpointed)
{
	double left, need;

	rank_logf(&r->log, "job %s was cancelled: not requeued", r->node->job_id);
	if (checkpointed) {
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": checkpoint committed, job not requeued",
			 steps_done);
	} else if (r->rank == 0) {
		checkpoint_fits_kill(r, &left, &need);
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": %.0f s left before Slurm's KILL, too "
			 "little for a checkpoint (~%.0f s): the previous one stays the latest; job "
			 "not requeued", steps_done, left, need);
	} else {
		snprintf(r->res->message, sizeof r->res->message,
			 "cancelled after step %" PRId64 ": no time for a checkpoint before Slurm's "
			 "KILL, the previous one stays the latest; job not requeued", steps_done);
	}
	if (r->rank == 0) {
		printf("job %s cancelled after step %" PRId64 ": not requeued\n", r->node->job_id,
		       steps_done);
		fflush(stdout);
	}
	r->res->exit_code = STORK_EXIT_CANCELLED;
	return STORK_EXIT_CANCELLED;
}

/* "SIGUSR2": the signal that asked this node to stop, for the log; "" when
 * none did here (another node's, STORK_STOP_AT_STEP). */
const char *rank_stop_cause(const struct rank *r, char *buf, size_t len)
{
	int sig = atomic_load(r->node->stop_requested);

	if (!sig || !sigabbrev_np(sig))
		return "";
	snprintf(buf, len, "SIG%s", sigabbrev_np(sig));
	return buf;
}

/*
 * After the stop checkpoint is committed: global rank 0 requeues the job,
 * exactly once; every rank then ends with the same reason. A stop by the
 * job's time limit (its --signal as it falls due, Slurm's TERM at the
 * end, the deadline guard: lib/slurm/time_limit_stop.h) is a timeout, any
 * other a preemption.
 */
int rank_stop_and_requeue(struct rank *r, int64_t steps_done)
{
	const struct train_node *n = r->node;
	time_t now = time(NULL);
	int timeout = stop_is_time_limit(atomic_load(n->stop_requested), n->job_end_time != 0,
					 (double)(n->job_end_time - now), n->warn_signo,
					 n->warn_lead);
	int code = timeout ? STORK_EXIT_TIMEOUT : STORK_EXIT_PREEMPTED, rc;
	int32_t outcome;
	char err[768] = "", cause[32];

	if (*rank_stop_cause(r, cause, sizeof cause))
		rank_logf(&r->log, "stopping after step %" PRId64 " on request (%s%s)", steps_done,
			  cause, timeout ? "; the job's time limit is near" : "");
	else
		rank_logf(&r->log, "stopping after step %" PRId64 " on request%s", steps_done,
			  timeout ? " (the job's time limit is near)" : "");
	if (r->rank == 0) {
		if (!n->slurm_job) {
			snprintf(err, sizeof err, "not a Slurm job: nothing to requeue; run the same command again to resume");
			code = STORK_EXIT_REQUEUE_FAILED;
		} else if ((rc = slurm_job_requeue(n->slurm_job, err, sizeof err)) < 0) {
			code = STORK_EXIT_REQUEUE_FAILED;
		} else if (rc == SLURM_JOB_WAS_CANCELLED) {
			code = STORK_EXIT_CANCELLED; /* scancel came after the ranks agreed on a preemption */
		} else {
			rank_logf(&r->log, "job %u requeued", n->slurm_job);
			printf("job %u requeued after step %" PRId64 "\n", n->slurm_job, steps_done);
			fflush(stdout);
		}
	}
	/* every rank ends as rank 0's requeue went (a job submitted with
	 * --no-requeue: requeue_failed on every node, not "requeued" on some) */
	outcome = code;
	if (n->world_size > 1 && comm_broadcast(r->comm, &outcome, 1, COMM_INT32, 0) < 0)
		return rank_fail_collective(r);
	code = outcome;
	if (code == STORK_EXIT_CANCELLED)
		return rank_stop_cancelled(r, steps_done, 1);
	if (code == STORK_EXIT_REQUEUE_FAILED) {
		if (r->rank == 0) {
			rank_logf(&r->log, "requeue failed: %s", err);
			fprintf(stderr, "storkd: checkpoint committed but the requeue failed: %s\n", err);
			msg_format(r->res->message, sizeof r->res->message,
				   "stopped after step %" PRId64 ", checkpoint committed, requeue "
				   "failed: %s", steps_done, err);
		} else {
			msg_format(r->res->message, sizeof r->res->message,
				   "stopped after step %" PRId64 ", checkpoint committed, requeue "
				   "failed (rank 0's log says why)", steps_done);
		}
		r->res->exit_code = code;
		return code;
	}
	snprintf(r->res->message, sizeof r->res->message,
		 "stopped after step %" PRId64 " (%s), checkpoint committed, job requeued", steps_done,
		 timeout ? "time limit near" : "preempted");
	r->res->exit_code = code;
	return code;
}

/*
 * A stop with too little time left for its checkpoint (rank 0's verdict):
 * the previous checkpoint stays the latest, and the job is still requeued
 * so that it resumes from it.
 */
int rank_stop_without_checkpoint(struct rank *r, int64_t steps_done)
{
	double left, need;

	if (r->rank == 0) {
		checkpoint_fits(r, &left, &need);
		snprintf(r->err, sizeof r->err,
			 "stopped after step %" PRId64 " with %.0f s left before the job's end, too "
			 "little for a checkpoint (~%.0f s): no new checkpoint, the previous one stays "
			 "the latest", steps_done, left, need);
	} else {
		snprintf(r->err, sizeof r->err,
			 "stopped after step %" PRId64 ": rank 0 found too little time left before the "
			 "job's end for a checkpoint: no new checkpoint, the previous one stays the "
			 "latest", steps_done);
	}
	if (r->rank == 0 && r->node->slurm_job) {
		char why[512];
		size_t l = strlen(r->err);
		int rc = slurm_job_requeue(r->node->slurm_job, why, sizeof why);

		if (rc == 0)
			snprintf(r->err + l, sizeof r->err - l, "; job requeued");
		else
			snprintf(r->err + l, sizeof r->err - l, "; %s%s",
				 rc == SLURM_JOB_WAS_CANCELLED ? "" : "requeue failed: ", why);
	}
	return rank_fail_agreed(r, STORK_EXIT_CHECKPOINT_FAILED, r->err);
}
