/*
 * daemon/engine/checkpoint/checkpoint_schedule.h - when a periodic
 * checkpoint is due besides checkpoint.every's steps: by wall time
 * (checkpoint.every_minutes), by Young's interval (checkpoint.every: auto:
 * sqrt(2 x commit time x checkpoint.mtbf_hours), the time between
 * checkpoints that loses the least to failures and to checkpoints
 * together), and at milestones (checkpoint.keep_every), which are kept.
 *
 * Rank 0 keeps the clock (the commit it times waits for every rank); its
 * answer reaches every rank in the step's stop agreement
 * (rank_agree_stop), so all checkpoint at the same step.
 */
#ifndef STORK_CHECKPOINT_SCHEDULE_H
#define STORK_CHECKPOINT_SCHEDULE_H

#include "daemon/engine/checkpoint/checkpoint.h"

#include <stdint.h>

struct rank;
struct stork_config;

/* What a commit keeps: checkpoint.keep's newest and keep_every's milestones. */
struct ckpt_keep checkpoint_keep(const struct stork_config *c);

/* At the rank's start: the clock starts; rank 0 says how checkpoints are timed. */
void checkpoint_schedule_start(struct rank *r);

/* Rank 0: whether the wall time since the last checkpoint calls for one now. */
int checkpoint_time_due(const struct rank *r);

/* Whether steps_done is one of checkpoint.keep_every's milestones. */
int checkpoint_milestone(const struct stork_config *c, int64_t steps_done);

/* Whether steps_done is a step checkpoint.every or keep_every asks for. */
int checkpoint_step_due(const struct stork_config *c, int64_t steps_done);

/* A checkpoint was committed: the clock starts again; with every: auto rank 0
 * takes the commit time it measured, and says so when the interval moves. */
void checkpoint_schedule_committed(struct rank *r);

#endif
