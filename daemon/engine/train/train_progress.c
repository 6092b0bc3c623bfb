/*
 * daemon/engine/train/train_progress.c - what a rank says of its progress:
 * rank 0's line and each rank's log line and metrics every
 * train.log_every steps, the time left to the last step and to the job's
 * end, and the run's projected cost.
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

/* Seconds as "1h12m", "5m03s" or "42s", for the progress line. */
static void duration(double s, char *buf, size_t len)
{
	long t = s > 0 ? (long)(s + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

/*
 * Rank 0, after a few steps: what the whole run costs at this pace, in
 * GPU-hours (one GPU per rank) or core-hours (every rank's threads,
 * counted as this rank's), said once and kept in the metrics.
 */
static void project_cost(struct rank *r, int64_t step)
{
	int gpu = r->ops != &ops_cpu;
	double units = (double)r->node->world_size * (gpu ? 1 : (r->threads > 0 ? r->threads : 1));
	double hours = (double)r->cfg->train.steps * r->step_ms_avg / 3.6e6 * units;

	rank_metric(&r->log, step + 1, "projected_device_hours", hours, gpu ? "GPU-h" : "core-h");
	printf("projected: %d steps x %.1f ms x %.0f %s = %.3g %s-hours for the whole run\n",
	       r->cfg->train.steps, r->step_ms_avg, units, gpu ? "GPUs" : "cores", hours,
	       gpu ? "GPU" : "core");
	/* The budget was checked at start against the allocation; a run that
	 * needs more than it (requeues) is said, loudly, once. */
	if (r->cfg->run.max_gpu_hours > 0 && hours > r->cfg->run.max_gpu_hours)
		fprintf(stderr, "storkd: warning: the whole run's projected %.3g %s-hours exceed "
			"run.max_gpu_hours %g: it will need requeues beyond this budget\n", hours,
			gpu ? "GPU" : "core", r->cfg->run.max_gpu_hours);
}

/*
 * Rank 0's progress line ends with the time to the last step (from a
 * moving average of the step time, the first step left out: it pays for
 * warming up) and, when the job has a limit, the time to the job's end;
 * both go to the metrics as eta_s and job_left_s.
 */
static void progress_tail(struct rank *r, int64_t step, double ms, char *buf, size_t len)
{
	const struct stork_config *c = r->cfg;
	char eta[32], left[32];
	double eta_s, left_s = -1;

	r->step_ms_avg = r->step_ms_avg > 0 ? 0.9 * r->step_ms_avg + 0.1 * ms : ms;
	eta_s = (double)(c->train.steps - (step + 1)) * r->step_ms_avg / 1e3;
	duration(eta_s, eta, sizeof eta);
	rank_metric(&r->log, step + 1, "eta_s", eta_s, "s");
	if (step == r->first_step + 5) /* once the pace is known */
		project_cost(r, step);
	if (r->node->job_end_time) {
		left_s = (double)(r->node->job_end_time - time(NULL));
		duration(left_s, left, sizeof left);
		rank_metric(&r->log, step + 1, "job_left_s", left_s, "s");
	}
	if (left_s >= 0)
		snprintf(buf, len, " | eta %s, job ends in %s", eta, left);
	else
		snprintf(buf, len, " | eta %s", eta);
}

void rank_report_step(struct rank *r, int64_t step, float loss, float lr, float norm, double ms,
		      uint64_t sent)
{
	const struct stork_config *c = r->cfg;
	double tokens = (double)c->train.batch_size * c->train.seq_len * c->train.grad_accum *
			r->lay.dp;
	double tps = tokens / (ms / 1e3), mfu;
	struct rank_progress *p = &r->node->progress[r->local];

	rank_metric(&r->log, step + 1, "train_loss", loss, "nats");
	rank_metric(&r->log, step + 1, "lr", lr, "");
	rank_metric(&r->log, step + 1, "grad_norm", norm, "");
	rank_metric(&r->log, step + 1, "step_time_ms", ms, "ms");
	/* this rank's own forward and backward, before the gradients are
	 * reduced: where a slow rank shows (everyone's step time waits for it) */
	rank_metric(&r->log, step + 1, "compute_ms", r->compute_ms, "ms");
	rank_metric(&r->log, step + 1, "tokens_per_sec", tps, "tokens/s");
	if (r->node->world_size > r->node->local_ranks) /* another node: traffic between nodes */
		rank_metric(&r->log, step + 1, "net_bytes_sent", (double)sent, "bytes");
	if (r->grp.dp) { /* the gradients' collective, and what of it the step waited for */
		rank_metric(&r->log, step + 1, "grad_sync_ms", r->sync_ms, "ms");
		rank_metric(&r->log, step + 1, "grad_sync_wait_ms", r->sync_wait_ms, "ms");
	}
	if (r->lay.pp > 1) /* the pipeline bubble: this stage waiting for its neighbours */
		rank_metric(&r->log, step + 1, "pipeline_wait_ms", 1e3 * r->pipe.wait_seconds, "ms");
	mfu = rank_telemetry_step(r, step, tps);
	atomic_store(&p->loss, loss);
	atomic_store(&p->step_ms, ms);
	atomic_store(&p->tokens_per_s, tps);
	atomic_store(&p->mfu, mfu);
	/* rank 0's eta_s and job_left_s every step (metrics are), the step
	 * lines every train.log_every steps and at the last */
	char tail[96] = "", util[32] = "";

	if (r->rank == 0 && step > r->first_step) /* the first step of an attempt pays for warming up */
		progress_tail(r, step, ms, tail, sizeof tail);
	if ((step + 1) % c->train.log_every && step + 1 != c->train.steps)
		return;
	rank_logf(&r->log, "step %" PRId64 " loss %.6f lr %.3e norm %.4f %.1f ms", step + 1, loss, lr,
		  norm, ms);
	if (r->rank == 0) {
		if (r->peak_flops > 0)
			snprintf(util, sizeof util, " | MFU %.1f%%", 100.0 * mfu);
		printf("step %" PRId64 "/%d | loss %.4f | lr %.2e | norm %.2f | %.1f ms | %.0f tok/s%s%s\n",
		       step + 1, c->train.steps, loss, lr, norm, ms, tps, tail, util);
		fflush(stdout);
	}
}
