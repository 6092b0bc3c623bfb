/*
 * daemon/engine/checkpoint/train_checkpoint_step.c - what a rank does at a
 * checkpoint step: the node-local tier first (train_checkpoint_local.c),
 * then, when this checkpoint is to be persisted, the run directory's in
 * the background (train_checkpoint_async.c) or at once
 * (train_checkpoint.c).
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"
#include "daemon/engine/checkpoint/ckpt_writer.h"

#include "kernels/ops.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------ at a checkpoint step */

int checkpoint_at(struct rank *r, int64_t steps_done, int must)
{
	const struct stork_config *c = r->cfg;
	int failed, code, local = c->checkpoint.local_dir[0] != '\0';
	/* with a node-local tier, only every persist_every-th periodic one goes to the run directory */
	int persist = must || !local || c->checkpoint.every <= 0 ||
		      (steps_done / c->checkpoint.every) % c->checkpoint.persist_every == 0 ||
		      checkpoint_milestone(c, steps_done);

	/* ZeRO-3: the writers read every layer's parameters (given back at the next step) */
	if (r->lay.zero >= 3 && zero_paged_gather_all(&r->paged, &r->model) < 0)
		return rank_fail_collective(r);
	if (local && ((code = checkpoint_local(r, steps_done, &failed)) ||
		      (code = after_checkpoint(r, steps_done, failed, 0))))
		return code;
	if (!persist)
		return 0;
	/* a stop's and the last one are committed before the run goes on or ends */
	if (c->checkpoint.async && !must)
		return checkpoint_async_begin(r, steps_done);
	if ((code = checkpoint_async_drain(r)) || (code = checkpoint(r, steps_done, &failed)))
		return code;
	return after_checkpoint(r, steps_done, failed, must);
}
