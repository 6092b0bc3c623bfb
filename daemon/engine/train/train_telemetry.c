/*
 * daemon/engine/train/train_telemetry.c - what a step cost besides its
 * time: the model FLOP utilisation (MFU, the formula of `stork bench
 * train`), the time the step waited for its batch, the memory the rank
 * holds and the daemon's resident memory.
 *
 * MFU = model FLOPs per token x tokens per second / the run's peak: the
 * FLOPs are bench_flops_per_token's (6 per parameter in a matrix product,
 * 12 L C T for attention), the peak every rank's, as `stork bench train`
 * takes one rank's: its GPU's dense peak at train.precision, or its cores
 * x their measured clock x the FLOPs per cycle of their vector unit.
 * Ranks are taken alike (one measure on rank 0): a cluster of mixed nodes
 * is off by their difference.
 *
 * A GPU rank's device figures come from NVML (daemon/node/nvml.h), loaded
 * once per daemon: utilisation, memory, power, SM clock, temperature and
 * the reasons its clocks are held down. Without the library each daemon
 * says so once and logs none.
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"

#include "daemon/engine/bench/bench_train.h"
#include "daemon/node/nvml.h"
#include "kernels/device.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/*
 * The run's peak FLOP/s (every rank's), described in how. One rank's peak
 * is taken once (a CPU's is measured, about 0.1 s); a regroup or a rejoin
 * changes only how many ranks there are.
 */
static double run_peak(struct rank *r, char *how, size_t len)
{
	int W = r->node->world_size;

	if (r->ops != &ops_cpu) {
		if (!r->one_peak_flops)
			r->one_peak_flops = kernels_cuda_peak_flops(ops_precision_name(r->precision));
		snprintf(how, len, "%d rank(s) x the GPU's dense %s peak %.1f TFLOP/s", W,
			 ops_precision_name(r->precision), r->one_peak_flops / 1e12);
		return W * r->one_peak_flops;
	}
	if (!r->one_peak_flops)
		r->one_peak_flops = bench_fp32_peak(r->threads > 0 ? r->threads : 1, r->one_peak_how,
						    sizeof r->one_peak_how);
	snprintf(how, len, "%d rank(s) x %.1f GFLOP/s (%s)", W, r->one_peak_flops / 1e9,
		 r->one_peak_how);
	return W * r->one_peak_flops;
}

void rank_telemetry_start(struct rank *r)
{
	struct gpt2_shard whole;
	size_t sizes[GPT2_NUM_TENSORS];
	char how[512];

	r->sample_at = 0;
	data_take_wait(r->train); /* what opening the data cost is not a step's wait */
	if (r->rank != 0)
		return;
	gpt2_shard_whole(&r->shape, &whole);
	r->flops_per_token = bench_flops_per_token(&r->shape, gpt2_shard_sizes(&r->shape, &whole,
									 sizes),
						   r->cfg->train.seq_len);
	r->peak_flops = run_peak(r, how, sizeof how);
	rank_logf(&r->log, "MFU: %.4g model FLOPs per token against a peak of %.4g GFLOP/s = %s",
		  r->flops_per_token, r->peak_flops / 1e9, how);
}

/* The floats this rank holds: parameters, gradients, moments (and their copy), activations;
 * under ZeRO-2 and 3 what it keeps of them. */
static double rank_bytes(const struct rank *r)
{
	const struct gpt2 *m = &r->model;
	size_t n = m->num_params + 2 * r->opt.n + m->act_cap, params, grads;

	if (r->lay.zero >= 2 && r->grp.dp) { /* what the rank keeps of them (zero_paged.h) */
		zero_paged_floats(&r->zero, m->sizes, m->shard.last_layer - m->shard.first_layer,
				  r->lay.zero, r->cfg->train.grad_accum, r->paged.q != NULL, &params,
				  &grads);
		n += params + grads - m->num_params;
	} else if (m->grads) {
		n += m->num_params + m->grad_pad + 1;
		if (r->zero.recv) /* ZeRO-1's reduce-scatter receives a part at a time */
			n += r->zero.recv_n;
	}
	if (r->mirror.on)
		n += 2 * r->mirror.opt.n;
	return (double)n * sizeof(float);
}

/* This process's resident memory (storkd's: every engine rank of the node lives in it). */
static double resident_bytes(void)
{
	unsigned long long size, resident;
	FILE *f = fopen("/proc/self/statm", "re");
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%llu %llu", &size, &resident) == 2;
	fclose(f);
	return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) : -1;
}

static struct nvml *nvml;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void open_nvml(void)
{
	char err[512];

	if (!(nvml = nvml_open(NULL, err, sizeof err)))
		stork_info("no GPU telemetry: %s", err);
}

/* What the engine itself holds on a GPU rank's device, and its peak (the allocator's own count, NVML or not). */
static void sample_engine_bytes(struct rank *r, int64_t step)
{
	double now, peak;

	kernels_cuda_engine_bytes(r->gpu, &now, &peak);
	rank_metric(&r->log, step + 1, "gpu_engine_bytes", now, "bytes");
	rank_metric(&r->log, step + 1, "gpu_engine_peak_bytes", peak, "bytes");
}

/* A GPU rank's device figures (metrics gpu_*), when NVML has them. */
static void sample_gpu(struct rank *r, int64_t step)
{
	struct nvml_sample s;
	char err[512], names[160];

	if (!r->gpu_bus[0])
		return;
	pthread_once(&nvml_once, open_nvml);
	if (!nvml)
		return;
	if (!r->nvml_dev && nvml_device(nvml, r->gpu_bus, &r->nvml_dev, err, sizeof err) < 0) {
		rank_logf(&r->log, "no GPU telemetry: %s", err);
		r->gpu_bus[0] = '\0'; /* said once */
		return;
	}
	if (nvml_sample(nvml, r->nvml_dev, &s, err, sizeof err) < 0)
		return;
	if (!isnan(s.util_pct))
		rank_metric(&r->log, step + 1, "gpu_util_pct", s.util_pct, "%");
	if (!isnan(s.mem_used))
		rank_metric(&r->log, step + 1, "gpu_mem_used_bytes", s.mem_used, "bytes");
	/* the .prom file's (daemon/node/prometheus.c) */
	atomic_store(&r->node->progress[r->local].gpu_util, s.util_pct);
	atomic_store(&r->node->progress[r->local].gpu_mem, s.mem_used);
	if (!isnan(s.power_w))
		rank_metric(&r->log, step + 1, "gpu_power_w", s.power_w, "W");
	if (!isnan(s.sm_clock_mhz))
		rank_metric(&r->log, step + 1, "gpu_sm_clock_mhz", s.sm_clock_mhz, "MHz");
	if (!isnan(s.temp_c))
		rank_metric(&r->log, step + 1, "gpu_temp_c", s.temp_c, "C");
	nvml_throttle_names(s.throttle, names, sizeof names);
	rank_metric_with(&r->log, step + 1, "gpu_throttle", (double)s.throttle, "bits",
			 json_pack("{s:s}", "reasons", names));
}

double rank_telemetry_step(struct rank *r, int64_t step, double tokens_per_s)
{
	double now = clock_monotonic(), mfu = 0, wait_ms = 1e3 * data_take_wait(r->train);
	struct rank_progress *p = &r->node->progress[r->local];

	rank_metric(&r->log, step + 1, "data_wait_ms", wait_ms, "ms");
	/* on a GPU the loss's copy to the host waits for the pass's kernels */
	if (r->ops != &ops_cpu)
		rank_metric(&r->log, step + 1, "device_wait_ms", 1e3 * r->model.device_wait_s, "ms");
	r->model.device_wait_s = 0;
	atomic_store(&p->data_wait_ms, wait_ms);
	if (r->rank == 0 && r->peak_flops > 0) {
		mfu = r->flops_per_token * tokens_per_s / r->peak_flops;
		rank_metric(&r->log, step + 1, "mfu", mfu, "");
	}
	if (now >= r->sample_at) {
		double rss = r->local == 0 ? resident_bytes() : -1, held = rank_bytes(r);

		r->sample_at = now + r->cfg->metrics.sample_s;
		rank_metric(&r->log, step + 1, "rank_bytes", held, "bytes");
		if (rss >= 0)
			rank_metric(&r->log, step + 1, "host_rss_bytes", rss, "bytes");
		atomic_store(&p->rss, rss);
		atomic_store(&p->rank_bytes, held);
		if (r->ops != &ops_cpu)
			sample_engine_bytes(r, step);
		sample_gpu(r, step);
	}
	return mfu;
}
