/*
 * daemon/engine/train/train_rank.c - how a training rank fails (see
 * train_rank.h): the first cause recorded for exit_info, the other ranks
 * woken out of their collectives, and the rank's phase named for a hang's
 * report. Below every file of the training loop.
 */
#include "config.h"
#include "daemon/engine/train/train.h"
#include "daemon/engine/train/train_rank.h"

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

const char *rank_phase_name(int phase)
{
	switch (phase) {
	case GPT2_PHASE_FORWARD: return "in forward";
	case GPT2_PHASE_BACKWARD: return "in backward";
	case RANK_PHASE_STEP_START: return "at the start";
	case RANK_PHASE_UPDATE: return "in the update";
	case RANK_PHASE_VALIDATION: return "in validation";
	case RANK_PHASE_STOP_DECISION: return "in the stop decision";
	case RANK_PHASE_CHECKPOINT: return "in a checkpoint";
	}
	return "";
}

/*
 * A collective failed: another rank failed or aborted first (its own
 * record names the cause), so this failure is a consequence, marked
 * secondary so that exit_info.json names the first cause.
 */
static void record_failure(struct rank *r, int code, const char *msg, int say)
{
	if (r->res->exit_code == 0) {
		r->res->exit_code = code;
		r->res->fail_time = clock_wall();
		snprintf(r->res->message, sizeof r->res->message, "%s", msg);
	}
	rank_logf(&r->log, "error: %s", msg);
	if (say)
		fprintf(stderr, "storkd: rank %d on %s: %s\n", r->rank, r->node->host, msg);
}

int rank_fail_collective(struct rank *r)
{
	int first = r->res->exit_code == 0;
	const char *why = comm_abort_reason(r->comm);

	/* restart.in_place: the regroup may mend it, and its verdict is the line to read */
	record_failure(r, STORK_EXIT_RANK_FAILED, why, !r->node->regroup);
	if (r->comm)
		comm_abort(r->comm, why);
	if (first)      /* a rank that failed on its own first keeps that cause */
		r->res->secondary = 1;
	return STORK_EXIT_RANK_FAILED;
}

/*
 * Record why this rank stops (the first reason wins), for a stop every rank
 * has agreed on: no one is left waiting, so nothing is aborted (an abort
 * could break a peer still finishing the agreement's collective).
 */
int rank_fail_agreed(struct rank *r, int code, const char *msg)
{
	record_failure(r, code, msg, 1);
	return code;
}

/* Record why this rank stops, on its own: the other ranks must hear of it. */
int rank_fail(struct rank *r, int code, const char *msg)
{
	rank_fail_agreed(r, code, msg);
	/* Wake the other ranks out of any collective instead of leaving them
	 * waiting for this one. */
	if (r->comm)
		comm_abort(r->comm, msg);
	return code;
}
