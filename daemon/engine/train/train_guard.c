/*
 * daemon/engine/train/train_guard.c - what a step's loss and gradient norm decide before
 * its update: the divergence guard (train.on_nonfinite: a NaN or infinite
 * norm) and the spike guard (train.on_spike: a loss or norm far above the
 * recent steps', daemon/engine/train/spike.h), and the faults test builds inject to
 * exercise them.
 *
 * Both guards judge values that are the same on every rank (the global
 * gradient norm, the loss averaged over the replicas), so every rank
 * takes the same decision at the same step without a word exchanged: drop
 * the update, or roll back (train.c's rollback does it).
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"

#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/formats/stork_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Fault injection (test builds): a NaN in rank STORK_FAULT_NAN_RANK's loss
 * and gradients at the steps STORK_FAULT_NAN_STEP lists, as a numerical
 * blow-up would leave them; once per step, as a bad batch would cause it
 * (a rollback trains the step again on another batch).
 */
void inject_nan(struct rank *r, int64_t step, float *loss)
{
	const char *s = getenv("STORK_FAULT_NAN_RANK");
	float nan = NAN;

	if (!fault_at_step("STORK_FAULT_NAN_STEP", step + 1) || r->rank != (s ? atoi(s) : 0) ||
	    step <= r->nan_injected_step)
		return;
	r->nan_injected_step = step;
	*loss = NAN;
	r->model.ops->upload(r->model.grads, &nan, sizeof nan);
}

/*
 * The divergence guard: the gradient norm is the same on every rank (a
 * global sum), and a NaN or Inf anywhere makes it non-finite, so every rank
 * sees it at once. The first rank whose own loss was not finite is named
 * (one more all-reduce, only then). train.on_nonfinite: stop ends the run
 * (reason diverged, before anything is checkpointed); skip drops this
 * step's update. Returns 0 to go on without this update, or the exit code.
 */
int diverged(struct rank *r, int64_t step, float loss, float norm)
{
	int32_t first = isfinite(loss) ? INT32_MAX : r->rank;
	char who[64] = "its gradients (every rank's loss was finite)";

	if (comm_allreduce(r->comm, &first, 1, COMM_INT32, COMM_MIN) < 0)
		return rank_fail_collective(r);
	if (first != INT32_MAX)
		snprintf(who, sizeof who, "rank %d's loss first", (int)first);
	snprintf(r->err, sizeof r->err,
		 "step %" PRId64 ": the gradient norm is not finite (%g), seen in %s", step + 1,
		 (double)norm, who);
	if (r->cfg->train.on_nonfinite == STORK_NONFINITE_STOP ||
	    (r->cfg->train.on_nonfinite == STORK_NONFINITE_ROLLBACK &&
	     r->rollbacks >= r->cfg->train.max_rollbacks)) {
		if (r->cfg->train.on_nonfinite == STORK_NONFINITE_ROLLBACK) {
			size_t l = strlen(r->err);

			msg_format(r->err + l, sizeof r->err - l,
				   " (after train.max_rollbacks %d rollbacks)", r->rollbacks);
		}
		return rank_fail_agreed(r, STORK_EXIT_DIVERGED, r->err);
	}
	if (r->cfg->train.on_nonfinite == STORK_NONFINITE_ROLLBACK) {
		r->rollback_pending = ROLLBACK_NONFINITE; /* every rank: the norm is global */
		rank_logf(&r->log, "warning: %s; train.on_nonfinite: rollback", r->err);
		if (r->rank == 0) {
			fprintf(stderr, "storkd: warning: %s; rolling back to the latest checkpoint\n",
				r->err);
			fflush(stderr);
		}
		return 0;
	}
	rank_logf(&r->log, "warning: %s; train.on_nonfinite: skip: this step's update is dropped",
		  r->err);
	if (r->rank == 0) {
		fprintf(stderr, "storkd: warning: %s; the update is dropped\n", r->err);
		fflush(stderr);
	}
	return 0;
}


static const char *spike_action_name(enum stork_spike a)
{
	switch (a) {
	case STORK_SPIKE_OFF: return "off";
	case STORK_SPIKE_WARN: return "warn";
	case STORK_SPIKE_SKIP: return "skip";
	case STORK_SPIKE_ROLLBACK: return "rollback";
	}
	return "?";
}

/* "loss 2961.3 (z 9918.2 against a mean of 2.812), grad norm 412.1 (z 705.3 against 0.531)" */
static void spike_words(char *buf, size_t len, float loss, float norm, const struct spike_verdict *v)
{
	snprintf(buf, len, "loss %.4g (z %.1f against a mean of %.4g), grad norm %.4g (z %.1f "
		 "against %.4g)", (double)loss, v->loss_z, v->loss_mean, (double)norm, v->norm_z,
		 v->norm_mean);
}

/*
 * One spike in the rank's metrics (loss_spike: its value the larger
 * z-score, with the action, both values, their z-scores and the window's
 * means), its log and rank 0's progress output.
 */
static void spike_event(struct rank *r, int64_t step, float loss, float norm,
			const struct spike_verdict *v, enum stork_spike act, const char *outcome)
{
	char what[256];

	rank_metric_with(&r->log, step + 1, "loss_spike", fmax(v->loss_z, v->norm_z), "z",
			 json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:i}", "action",
				   spike_action_name(act), "loss", sj_number(loss), "loss_z",
				   sj_number(v->loss_z), "loss_mean", sj_number(v->loss_mean),
				   "grad_norm", sj_number(norm), "grad_norm_z", sj_number(v->norm_z),
				   "grad_norm_mean", sj_number(v->norm_mean), "window",
				   v->window));
	spike_words(what, sizeof what, loss, norm, v);
	rank_logf(&r->log, "warning: step %" PRId64 ": loss spike: %s over the last %d accepted "
		  "steps (train.spike_zscore %g); train.on_spike: %s: %s", step + 1, what,
		  v->window, r->cfg->train.spike_zscore, spike_action_name(act), outcome);
	if (r->rank == 0) {
		printf("step %" PRId64 "/%d | loss spike: %s | %s (train.on_spike: %s)\n", step + 1,
		       r->cfg->train.steps, what, outcome, spike_action_name(act));
		fflush(stdout);
	}
}

/* The spike after the last allowed rollback ends the run, as a divergence would. */
static int spike_stop(struct rank *r, int64_t step, float loss, float norm,
		      const struct spike_verdict *v)
{
	char what[256];

	spike_event(r, step, loss, norm, v, STORK_SPIKE_ROLLBACK, "no rollback left: stopping");
	spike_words(what, sizeof what, loss, norm, v);
	msg_format(r->err, sizeof r->err, "step %" PRId64 ": loss spike: %s (after "
		   "train.max_rollbacks %d rollbacks)", step + 1, what, r->rollbacks);
	return rank_fail_agreed(r, STORK_EXIT_DIVERGED, r->err);
}

int spike_guard(struct rank *r, int64_t step, float loss, float norm, int *drop)
{
	const struct stork_config *c = r->cfg;
	struct spike_params p = { .window = c->train.spike_window,
				  .min_steps = c->train.spike_min_steps,
				  .zscore = c->train.spike_zscore,
				  .max_in_row = c->train.spike_max_in_row };
	enum stork_spike act = c->train.on_spike;
	struct spike_verdict v;

	*drop = 0;
	if (act == STORK_SPIKE_OFF || !spike_observe(&r->spike, &p, loss, norm, &v))
		return 0;
	if (act == STORK_SPIKE_ROLLBACK && r->rollbacks >= c->train.max_rollbacks)
		return spike_stop(r, step, loss, norm, &v);
	spike_event(r, step, loss, norm, &v, act,
		    act == STORK_SPIKE_WARN ? "the update is applied" :
		    act == STORK_SPIKE_SKIP ? "the update is dropped" :
					      "rolling back to the latest checkpoint");
	if (v.restarted) {
		rank_logf(&r->log, "step %" PRId64 ": %d loss spikes in a row (train.spike_max_in_row): "
			  "the loss has moved, not spiked; the window starts again from here",
			  step + 1, p.max_in_row);
		if (r->rank == 0)
			printf("step %" PRId64 ": %d loss spikes in a row: a new level; the spike window "
			       "starts again\n", step + 1, p.max_in_row);
	}
	*drop = act != STORK_SPIKE_WARN;
	if (act == STORK_SPIKE_ROLLBACK)
		r->rollback_pending = ROLLBACK_SPIKE;
	return 0;
}

/*
 * Fault injection (test builds): a loss spike. At the steps
 * STORK_FAULT_SPIKE_STEP lists, every rank of data-parallel replica
 * STORK_FAULT_SPIKE_REPLICA (default 0) computes its loss as
 * STORK_FAULT_SPIKE_SCALE (default 100) times the batch's cross-entropy:
 * the backward pass starts from that scale, so the gradients are that
 * many times larger, as a batch the model finds that much harder would
 * make them. Once per step, as a bad batch would cause it (a rollback
 * trains the step again on another batch). Not under pipeline
 * parallelism, whose schedule runs the backward passes itself.
 */
float spike_fault(struct rank *r, int64_t step)
{
	const char *d = getenv("STORK_FAULT_SPIKE_REPLICA"), *k = getenv("STORK_FAULT_SPIKE_SCALE");
	float scale = k ? strtof(k, NULL) : 100.0f;

	if (!fault_at_step("STORK_FAULT_SPIKE_STEP", step + 1) ||
	    r->lay.dp_rank != (d ? atoi(d) : 0) || step <= r->spike_injected_step)
		return 1.0f;
	r->spike_injected_step = step;
	if (r->lay.pp > 1) {
		rank_logf(&r->log, "fault injection: no spike under pipeline parallelism");
		return 1.0f;
	}
	rank_logf(&r->log, "fault injection: step %" PRId64 "'s loss times %g", step + 1,
		  (double)scale);
	return scale > 0 ? scale : 1.0f;
}
