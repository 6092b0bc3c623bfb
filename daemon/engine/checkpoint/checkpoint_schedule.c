/* daemon/engine/checkpoint/checkpoint_schedule.c - see checkpoint_schedule.h. */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"

#include "daemon/engine/train/train_rank.h"
#include "lib/clock.h"
#include "lib/config/stork_config.h"

#include <math.h>
#include <stdio.h>

struct ckpt_keep checkpoint_keep(const struct stork_config *c)
{
	return (struct ckpt_keep){ .newest = c->checkpoint.keep,
				   .milestones = c->checkpoint.keep_every };
}

/* Young's interval in seconds for a commit of commit_s. */
static double young_s(const struct stork_config *c, double commit_s)
{
	return sqrt(2.0 * commit_s * c->checkpoint.mtbf_hours * 3600.0);
}

/* "2.1 s (measured)" or "6.3 s (estimated: 124.4M parameters at 100 MB/s ...)". */
static double commit_s(const struct rank *r, char *how, size_t len)
{
	double est = checkpoint_commit_estimate(r);

	if (r->ckpt_seconds > 0)
		snprintf(how, len, "%.2f s, the last commit's", est);
	else
		snprintf(how, len, "%.2f s, estimated for %.1fM parameters until one is timed", est,
			 r->model.num_params / 1e6);
	return est;
}

void checkpoint_schedule_start(struct rank *r)
{
	const struct stork_config *c = r->cfg;
	char how[160];
	double c_s;

	r->ckpt_last_at = clock_monotonic();
	if (r->rank != 0)
		return;
	if (c->checkpoint.every == CHECKPOINT_EVERY_AUTO) {
		c_s = commit_s(r, how, sizeof how);
		r->ckpt_interval_s = young_s(c, c_s);
		printf("checkpoint.every auto: a checkpoint every %.*f s of wall time (Young's "
		       "interval sqrt(2 x commit time x MTBF): commit time %s; "
		       "checkpoint.mtbf_hours %g)\n", r->ckpt_interval_s < 10 ? 1 : 0,
		       r->ckpt_interval_s, how, c->checkpoint.mtbf_hours);
	} else if (c->checkpoint.every_minutes > 0) {
		r->ckpt_interval_s = c->checkpoint.every_minutes * 60.0;
		printf("checkpoint.every_minutes: a checkpoint every %g min of wall time%s\n",
		       c->checkpoint.every_minutes,
		       c->checkpoint.every > 0 ? ", and every checkpoint.every steps" : "");
	}
	if (c->checkpoint.keep_every > 0)
		printf("checkpoint.keep_every: a milestone every %d steps, kept beside the newest %d\n",
		       c->checkpoint.keep_every, c->checkpoint.keep);
	fflush(stdout);
}

int checkpoint_time_due(const struct rank *r)
{
	return r->rank == 0 && r->ckpt_interval_s > 0 &&
	       clock_monotonic() - r->ckpt_last_at >= r->ckpt_interval_s;
}

int checkpoint_milestone(const struct stork_config *c, int64_t steps_done)
{
	return c->checkpoint.keep_every > 0 && steps_done % c->checkpoint.keep_every == 0;
}

int checkpoint_step_due(const struct stork_config *c, int64_t steps_done)
{
	return (c->checkpoint.every > 0 && steps_done % c->checkpoint.every == 0) ||
	       checkpoint_milestone(c, steps_done);
}

void checkpoint_schedule_committed(struct rank *r)
{
	const struct stork_config *c = r->cfg;
	char how[160];
	double next;

	r->ckpt_last_at = clock_monotonic();
	if (r->rank != 0 || c->checkpoint.every != CHECKPOINT_EVERY_AUTO)
		return;
	next = young_s(c, commit_s(r, how, sizeof how));
	/* said again only when it moves by a fifth: commits vary a little */
	if (fabs(next - r->ckpt_interval_s) > 0.2 * r->ckpt_interval_s) {
		printf("checkpoint.every auto: a checkpoint every %.*f s now (commit time %s)\n",
		       next < 10 ? 1 : 0, next, how);
		fflush(stdout);
	}
	r->ckpt_interval_s = next;
}
