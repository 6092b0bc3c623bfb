/*
 * daemon/engine/train/train_device.c - where a rank computes: its cores (the launcher's
 * binding plan), its GPU or the CPU (run.device, what the node has), the
 * collectives on that device, and its model moved there (see
 * train_rank.h).
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"

#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/bind/bind.h"
#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#define HAVE_CUDA_BUILD 1
#else
#define HAVE_CUDA_BUILD 0
#endif

/*
 * A job given GPUs (SLURM_STEP_GPUS or SLURM_JOB_GPUS) that trains on the
 * CPU pays for GPUs it does not use: said loudly, once per node, with why
 * no GPU was usable.
 */
static void warn_gpus_unused(struct rank *r)
{
	const char *step = getenv("SLURM_STEP_GPUS"), *job = getenv("SLURM_JOB_GPUS");
	const char *given = step && *step ? step : job && *job ? job : NULL;
	char why[256];

	if (!given || r->local != 0)
		return;
	kernels_cuda_why_none(-1, why, sizeof why);
	stork_warn("WARNING: %s was given GPUs (%s=%s) but trains on its CPUs: %s. The job is "
		   "billed for GPUs it does not use; set run.device: cuda to stop instead, or ask "
		   "for no GPUs", r->node->host, step && *step ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS",
		   given, why);
	rank_logf(&r->log, "WARNING: given GPUs (%s) but training on the CPU: %s", given, why);
}

/* Say that this rank computes on the CPU, and why: its log always, stdout once (rank 0). */
static void say_cpu(struct rank *r, const char *why)
{
	rank_logf(&r->log, "device: cpu (%s)", why);
	if (r->rank == 0) {
		printf("device: cpu (%s)\n", why);
		fflush(stdout);
	}
}

/*
 * train.precision on the CPU: fp32 and tf32 compute fp32 (a CPU has no
 * TF32 arithmetic; stork.yaml(5) says so, and so does the run), bf16 is
 * emulated exactly, and said, since it is slower than fp32.
 */
static void cpu_precision(struct rank *r)
{
	static const char bf16[] = "bf16 matrix products emulated on the CPU (inputs rounded "
				   "to bf16, fp32 sums; slower than fp32)";
	static const char tf32[] = "tf32 computes in fp32 on the CPU (a CPU has no TF32 "
				   "arithmetic): the losses are fp32's";
	const char *what = r->cfg->train.precision == STORK_PRECISION_BF16 ? bf16 :
			   r->cfg->train.precision == STORK_PRECISION_TF32 ? tf32 : NULL;

	r->precision = layout_precision(r->cfg);
	r->ops->set_precision(r->precision);
	if (!what)
		return;
	rank_logf(&r->log, "precision: %s", what);
	if (r->rank == 0) {
		printf("precision: %s\n", what);
		fflush(stdout);
	}
}

/* What the device line adds when train.precision: auto chose. */
static const char *auto_note(const struct rank *r)
{
	return r->cfg->train.precision == STORK_PRECISION_AUTO ? " (train.precision: auto)" : "";
}

/*
 * run.device: the rank's GPU (the binding's STORK_GPU, else its local rank
 * modulo the GPUs it sees) or the CPU. cuda without a usable GPU is a
 * configuration error naming the rank, the host and CUDA's message; so is
 * bf16 on a GPU without bf16 tensor cores (before compute capability 8.0).
 */
static int choose_device(struct rank *r)
{
	const struct bind_plan *plan = &r->node->plans[r->local];
	enum stork_device want = r->cfg->run.device;
	int count = want == STORK_DEVICE_CPU ? 0 : kernels_cuda_device_count(), dev;
	char desc[160], err[256];

	r->ops = &ops_cpu;
	if (want == STORK_DEVICE_CPU) {
		say_cpu(r, "run.device: cpu");
		cpu_precision(r);
		return 0;
	}
	if (count == 0 && want == STORK_DEVICE_AUTO) {
		say_cpu(r, HAVE_CUDA_BUILD ? "run.device: auto, and no CUDA device is visible" :
					     "run.device: auto, and this build has no CUDA backend");
		warn_gpus_unused(r);
		cpu_precision(r);
		return 0;
	}
	dev = count > 0 ? (plan->gpu >= 0 ? plan->gpu : r->local) % count : 0;
	r->gpu = dev;
	if (kernels_cuda_use_device(dev, desc, sizeof desc, err, sizeof err) < 0) {
		snprintf(r->err, sizeof r->err, "run.device: cuda: rank %d on %s has no usable GPU: %s",
			 r->rank, r->node->host, err);
		return rank_fail(r, STORK_EXIT_CONFIG, r->err);
	}
	r->precision = layout_gpu_precision(r->cfg);
	if (kernels_cuda_check_precision(r->precision, err, sizeof err) < 0) {
		snprintf(r->err, sizeof r->err,
			 "train.precision: %s: rank %d's GPU on %s (%s); set train.precision: fp32",
			 err, r->rank, r->node->host, desc);
		return rank_fail(r, STORK_EXIT_CONFIG, r->err);
	}
#ifdef HAVE_CUDA
	r->ops = &ops_cuda;
#endif
	r->ops->set_precision(r->precision);
	msg_format(r->device_id, sizeof r->device_id, "%s/%s", r->node->host, desc);
	/* desc is "NAME, BUS": the bus id names the GPU to NVML */
	snprintf(r->gpu_bus, sizeof r->gpu_bus, "%s", strrchr(desc, ' ') ? strrchr(desc, ' ') + 1 : "");
	rank_logf(&r->log, "bound: gpu %d (%s), %s matrix products%s", dev, desc,
		  ops_precision_name(r->precision), auto_note(r));
	if (r->rank == 0) {
		printf("device: gpu %d (%s) on rank 0, %s matrix products%s\n", dev, desc,
		       ops_precision_name(r->precision), auto_note(r));
		fflush(stdout);
	}
	return 0;
}

/*
 * train.precision: auto across the job: bf16 only where every rank's GPU
 * has bf16 tensor cores, so that all ranks compute alike; fp32 on all of
 * them else. Collective: every GPU rank calls it.
 */
static int agree_on_auto_precision(struct rank *r)
{
	int32_t bf16 = r->precision == OPS_BF16;

	if (r->cfg->train.precision != STORK_PRECISION_AUTO)
		return 0;
	if (r->node->world_size > 1 &&
	    comm_allreduce(r->comm, &bf16, 1, COMM_INT32, COMM_MIN) < 0)
		return -1;
	if (bf16 || r->precision != OPS_BF16)
		return 0;
	r->precision = OPS_FP32;
	r->ops->set_precision(OPS_FP32);
	rank_logf(&r->log, "train.precision: auto: fp32 matrix products, as a GPU of the job has "
			   "no bf16 tensor cores");
	if (r->rank == 0) {
		printf("train.precision: auto: fp32 matrix products, as a GPU of the job has no bf16 "
		       "tensor cores\n");
		fflush(stdout);
	}
	return 0;
}

/*
 * A GPU rank's communicator takes device buffers too: NCCL when every rank
 * has a GPU of its own, else staged through pinned host memory
 * (lib/comm/device.c). Made before the layout's groups, which are split
 * from it. Every rank of the world must compute on the same kind of device.
 */
int rank_device_comm(struct rank *r)
{
	struct comm_device_memory mem = {
		.is_device = kernels_cuda_is_device_ptr,
		.to_host = r->ops->download,
		.to_device = r->ops->upload,
		.host_alloc = r->ops->host_alloc,
		.host_free = r->ops->host_free,
		.device_id = r->device_id,
	};
	const char *env = getenv("STORK_DEVICE_COMM");
	enum comm_device_path want = COMM_DEVICE_AUTO;
	struct comm *w;
	int32_t gpus = r->ops != &ops_cpu, all = gpus;
	int rc;

	if (r->node->world_size > 1 &&
	    (comm_allreduce(r->comm, &all, 1, COMM_INT32, COMM_MIN) < 0 ||
	     comm_allreduce(r->comm, &gpus, 1, COMM_INT32, COMM_MAX) < 0))
		return rank_fail_collective(r);
	if (gpus != all) {
		snprintf(r->err, sizeof r->err,
			 "some ranks found a GPU and some did not (rank %d on %s: %s); give every "
			 "rank a GPU (--gpus-per-task=1) or set run.device: cpu",
			 r->rank, r->node->host, r->ops == &ops_cpu ? "cpu" : "gpu");
		return rank_fail(r, STORK_EXIT_CONFIG, r->err);
	}
	if (!gpus)
		return 0;
	if (agree_on_auto_precision(r) < 0)
		return rank_fail_collective(r);
	if (env && !strcmp(env, "staged"))
		want = COMM_DEVICE_STAGED;
	else if (env && !strcmp(env, "nccl"))
		want = COMM_DEVICE_NCCL;
	if ((rc = comm_device_wrap(r->comm, &mem, want, &w, r->err, sizeof r->err)))
		return rc == COMM_EABORTED ? rank_fail_collective(r) : rank_fail(r, STORK_EXIT_CONFIG, r->err);
	r->comm = w;
	comm_describe(w, "world", 0, r->node->world_size, 0);
	rank_logf(&r->log, "collectives on GPU buffers: %s", comm_device_describe(w));
	if (r->rank == 0) {
		printf("collectives on GPU buffers: %s\n", comm_device_describe(w));
		fflush(stdout);
	}
	return 0;
}

/*
 * Move the model and the optimizer state into the GPU's memory: they were
 * built or read on the host (initialisation and checkpoints are the same
 * code for every device); from now on they stay on the device, and only
 * checkpoints copy them back.
 */
int rank_move_to_device(struct rank *r)
{
	size_t free_b = 0, total_b = 0;
	int rc;

	if (r->ops == &ops_cpu)
		return 0;
	if ((rc = gpt2_set_backend(&r->model, r->ops)))
		return rank_fail(r, rc == -2 ? STORK_EXIT_OUT_OF_MEMORY : STORK_EXIT_CONFIG, r->model.err);
	if (adamw_move(&r->opt, r->ops) < 0) {
		gpt2_oom_message(r->ops, "the optimizer state", 2 * r->opt.n * sizeof(float), r->err,
				 sizeof r->err);
		return rank_fail(r, STORK_EXIT_OUT_OF_MEMORY, r->err);
	}
	r->ops->mem_info(&free_b, &total_b);
	rank_logf(&r->log, "gpu memory: parameters and moments in place, %zu of %zu MiB free",
		  free_b >> 20, total_b >> 20);
	return 0;
}

/* Pin this thread as storkd planned (the plan is the launcher's own code in lib/bind). */
int rank_bind(struct rank *r)
{
	const struct bind_plan *plan = &r->node->plans[r->local];
	char desc[256], err[512];

	if (bind_apply(plan, err, sizeof err) < 0)
		rank_logf(&r->log, "warning: %s", err);
	bind_plan_describe(plan, desc, sizeof desc);
	rank_logf(&r->log, "bound: %s, %d thread(s)", desc, plan->omp_threads);
	r->threads = plan->omp_threads;
	ops_cpu_set_threads(plan->omp_threads);
	return choose_device(r);
}
