/*
 * lib/config/config_keys.c - every key of stork.yaml, one row of the table
 * config_keys: its path, its type, where it lives in struct stork_config,
 * its accepted range and its default (as YAML text), and the names of the
 * enumerations. Loading, overrides, defaults, the resolved YAML output,
 * equality and hashing all walk this one table (stork_config.c,
 * config_validate.c, config_write.c), so a key added here is parsed,
 * checked, written and hashed everywhere at once.
 */
#include "config.h"
#include "lib/config/config_keys.h"

#include <float.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const struct enum_name lr_schedules[] = {
	{ "constant", STORK_LR_CONSTANT }, { "cosine", STORK_LR_COSINE }, { NULL, 0 },
};
static const struct enum_name devices[] = {
	{ "auto", STORK_DEVICE_AUTO }, { "cpu", STORK_DEVICE_CPU }, { "cuda", STORK_DEVICE_CUDA },
	{ NULL, 0 },
};
static const struct enum_name precisions[] = {
	{ "fp32", STORK_PRECISION_FP32 }, { "tf32", STORK_PRECISION_TF32 },
	{ "bf16", STORK_PRECISION_BF16 }, { "auto", STORK_PRECISION_AUTO }, { NULL, 0 },
};
static const struct enum_name archs[] = {
	{ "gpt2", STORK_ARCH_GPT2 }, { "llama", STORK_ARCH_LLAMA }, { NULL, 0 },
};
static const struct enum_name recomputes[] = {
	{ "none", STORK_RECOMPUTE_NONE }, { "gelu", STORK_RECOMPUTE_GELU },
	{ "block", STORK_RECOMPUTE_BLOCK }, { NULL, 0 },
};
static const struct enum_name nonfinite_actions[] = {
	{ "stop", STORK_NONFINITE_STOP }, { "skip", STORK_NONFINITE_SKIP },
	{ "rollback", STORK_NONFINITE_ROLLBACK }, { NULL, 0 },
};
static const struct enum_name spike_actions[] = {
	{ "off", STORK_SPIKE_OFF }, { "warn", STORK_SPIKE_WARN }, { "skip", STORK_SPIKE_SKIP },
	{ "rollback", STORK_SPIKE_ROLLBACK }, { NULL, 0 },
};
static const struct enum_name notify_events[] = {
	{ "started", 0 }, { "preempted", 1 }, { "restarted", 2 }, { "failed", 3 }, { "completed", 4 },
	{ "cancelled", 5 }, { NULL, 0 },
};
static const struct enum_name preflight_modes[] = {
	{ "auto", STORK_PREFLIGHT_AUTO }, { "true", STORK_PREFLIGHT_ON }, { "false", STORK_PREFLIGHT_OFF },
	{ "only", STORK_PREFLIGHT_ONLY }, { NULL, 0 },
};
static const struct enum_name signals[] = {
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { NULL, 0 },
};
static const struct enum_name program_signals[] = {
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "INT", SIGINT },
	{ "HUP", SIGHUP }, { NULL, 0 },
};
static const struct enum_name tees[] = {
	{ "0", STORK_TEE_RANK0 }, { "all", STORK_TEE_ALL }, { "none", STORK_TEE_NONE }, { NULL, 0 },
};

#define OFF(field) offsetof(struct stork_config, field)

const struct key config_keys[] = {
	{ .path = "run.name", .off = OFF(run.name),
	  .type = K_NAME,
	  .dflt = "stork", .help = "run directory name prefix" },
	{ .path = "run.dir", .off = OFF(run.dir),
	  .type = K_STR,
	  .dflt = "runs", .help = "runs root, relative to the submit directory" },
	{ .path = "run.rendezvous_timeout", .off = OFF(run.rendezvous_timeout),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "300", .help = "seconds to wait for every node at start" },
	{ .path = "run.resume_from", .off = OFF(run.resume_from),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"",
	  .help = "checkpoint (or run directory) a new run starts from, on any layout" },
	{ .path = "run.max_gpu_hours", .off = OFF(run.max_gpu_hours),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "0", .help = "refuse a job whose allocation to its time limit costs more device-hours (GPU, or core on CPU jobs); 0 = no limit" },
	{ .path = "run.shared", .off = OFF(run.shared),
	  .type = K_BOOL,
	  .dflt = "false",
	  .help = "the run's checkpoints and configuration readable (never writable) by the run directory's group; false: this user's alone" },
	{ .path = "run.device", .off = OFF(run.device),
	  .type = K_ENUM, .names = devices,
	  .dflt = "auto", .help = "auto (the rank's GPU if it has one) | cpu | cuda" },
	{ .path = "model.init_from", .off = OFF(model.init_from),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"",
	  .help = "llm.c model file or Hugging Face directory (config.json + safetensors); empty: build from the settings below" },
	{ .path = "model.arch", .off = OFF(model.arch),
	  .type = K_ENUM, .names = archs,
	  .dflt = "gpt2", .help = "gpt2 | llama (RMSNorm, rotary positions, SwiGLU, grouped-query attention)" },
	{ .path = "model.layers", .off = OFF(model.layers),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "4", .help = "transformer blocks" },
	{ .path = "model.heads", .off = OFF(model.heads),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "4", .help = "attention heads; divides channels" },
	{ .path = "model.channels", .off = OFF(model.channels),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "128", .help = "embedding width" },
	{ .path = "model.max_seq_len", .off = OFF(model.max_seq_len),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1024", .help = "positions" },
	{ .path = "model.vocab_size", .off = OFF(model.vocab_size),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "50257", .help = "tokens (GPT-2: 50257)" },
	{ .path = "model.padded_vocab_size", .off = OFF(model.padded_vocab_size),
	  .type = K_AUTO_INT, .lo = 1, .hi = BIG,
	  .dflt = "auto", .help = "auto: vocab_size rounded up to a multiple of 128" },
	{ .path = "model.seed", .off = OFF(model.seed),
	  .type = K_U64,
	  .dflt = "1337", .help = "initialisation and data order" },
	{ .path = "model.kv_heads", .off = OFF(model.kv_heads),
	  .type = K_AUTO_INT, .lo = 1, .hi = BIG,
	  .dflt = "auto", .help = "llama: key-value heads, dividing heads (grouped-query attention); auto: heads" },
	{ .path = "model.intermediate_size", .off = OFF(model.intermediate_size),
	  .type = K_AUTO_INT, .lo = 1, .hi = BIG,
	  .dflt = "auto", .help = "llama: the SwiGLU MLP's width; auto: 8 channels / 3 rounded up to a multiple of 256" },
	{ .path = "model.tie_embeddings", .off = OFF(model.tie_embeddings),
	  .type = K_BOOL,
	  .dflt = "false", .help = "llama: the LM head is the token embedding (GPT-2's always is)" },
	{ .path = "model.rms_norm_eps", .off = OFF(model.rms_norm_eps),
	  .type = K_DOUBLE, .lo = 0, .hi = 1, .flags = LO_OPEN,
	  .dflt = "1.0e-5", .help = "llama: RMSNorm's epsilon" },
	{ .path = "model.rope_theta", .off = OFF(model.rope_theta),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "500000", .help = "llama: rotary base (Llama 3: 500000)" },
	{ .path = "model.rope_scaling_factor", .off = OFF(model.rope_scaling_factor),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "0", .help = "llama: Llama 3.1's rope scaling factor (e.g. 8 or 32); 0 = no scaling" },
	{ .path = "model.rope_low_freq_factor", .off = OFF(model.rope_low_freq_factor),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "1", .help = "llama: rope scaling's low frequency factor" },
	{ .path = "model.rope_high_freq_factor", .off = OFF(model.rope_high_freq_factor),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "4", .help = "llama: rope scaling's high frequency factor (above the low one)" },
	{ .path = "model.rope_original_max_positions", .off = OFF(model.rope_original_max_positions),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "8192", .help = "llama: the context length rope scaling starts from" },
	{ .path = "data.train", .off = OFF(data.train),
	  .type = K_GLOBS, .flags = MIN1 | REDACT,
	  .dflt = "[\"data/*_train.bin\"]", .help = "llm.c token shards (globs)" },
	{ .path = "data.val", .off = OFF(data.val),
	  .type = K_GLOBS, .flags = REDACT,
	  .dflt = "[\"data/*_val.bin\"]", .help = "validation shards; [] = no validation" },
	{ .path = "data.shuffle", .off = OFF(data.shuffle),
	  .type = K_BOOL,
	  .dflt = "true", .help = "shard and sample order from the seed" },
	{ .path = "data.prefetch", .off = OFF(data.prefetch),
	  .type = K_BOOL,
	  .dflt = "true", .help = "read the next batch while the step computes" },
	{ .path = "data.stage_dir", .off = OFF(data.stage_dir),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "where each node stages URL shards; empty: $SLURM_TMPDIR, else /tmp/stork-USER/JOB" },
	{ .path = "data.sha256", .off = OFF(data.sha256),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "sha256sum-style manifest the staged shards must match; empty: none" },
	{ .path = "data.ca_file", .off = OFF(data.ca_file),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "CA certificates (PEM) for https URLs; empty: the system's" },
	{ .path = "data.netrc", .off = OFF(data.netrc),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "netrc file with the URLs' credentials; empty: ~/.netrc when it exists" },
	{ .path = "data.token_env", .off = OFF(data.token_env),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "environment variable holding a bearer token for the URLs; empty: none" },
	{ .path = "data.downloads", .off = OFF(data.downloads),
	  .type = K_INT, .lo = 1, .hi = 64,
	  .dflt = "4", .help = "parallel downloads per node when staging" },
	{ .path = "data.max_stage_bytes", .off = OFF(data.max_stage_bytes),
	  .type = K_U64,
	  .dflt = "68719476736", .help = "the most bytes a staged shard may have (64 GiB); 0: what its header says" },
	{ .path = "train.batch_size", .off = OFF(train.batch_size),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "4", .help = "sequences per rank per micro-step" },
	{ .path = "train.seq_len", .off = OFF(train.seq_len),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "64", .help = "tokens per sequence" },
	{ .path = "train.grad_accum", .off = OFF(train.grad_accum),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1", .help = "micro-steps per step" },
	{ .path = "train.steps", .off = OFF(train.steps),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1000", .help = "optimizer steps" },
	{ .path = "train.lr", .off = OFF(train.lr),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "6.0e-4", .help = "peak learning rate" },
	{ .path = "train.lr_schedule", .off = OFF(train.lr_schedule),
	  .type = K_ENUM, .names = lr_schedules,
	  .dflt = "cosine", .help = "constant | cosine" },
	{ .path = "train.precision", .off = OFF(train.precision),
	  .type = K_ENUM, .names = precisions,
	  .dflt = "auto",
	  .help = "matrix products: auto (bf16 on GPUs of compute capability 8.0+, else fp32) | "
		  "fp32 | tf32 (GPU; the CPU computes fp32) | bf16 (emulated on CPUs)" },
	{ .path = "train.recompute", .off = OFF(train.recompute),
	  .type = K_ENUM, .names = recomputes,
	  .dflt = "none",
	  .help = "activations the backward pass recomputes to save memory: none | gelu | block" },
	{ .path = "train.fused", .off = OFF(train.fused),
	  .type = K_BOOL,
	  .dflt = "true",
	  .help = "fused kernels (classifier, residual + LayerNorm); false: the separate reference kernels" },
	{ .path = "train.on_nonfinite", .off = OFF(train.on_nonfinite),
	  .type = K_ENUM, .names = nonfinite_actions,
	  .dflt = "stop",
	  .help = "a NaN/Inf loss or gradient norm: stop (reason diverged) | skip (drop the update) | "
		  "rollback (to the latest checkpoint, skipping that batch)" },
	{ .path = "train.max_rollbacks", .off = OFF(train.max_rollbacks),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "3", .help = "rollbacks a run may make (on_nonfinite, on_spike); the next one stops it" },
	{ .path = "train.on_spike", .off = OFF(train.on_spike),
	  .type = K_ENUM, .names = spike_actions,
	  .dflt = "warn",
	  .help = "a loss spike: off | warn (log it) | skip (drop the update) | "
		  "rollback (to the latest checkpoint, skipping that batch)" },
	{ .path = "train.spike_window", .off = OFF(train.spike_window),
	  .type = K_INT, .lo = 2, .hi = STORK_SPIKE_WINDOW_MAX,
	  .dflt = "50", .help = "accepted steps whose loss and gradient norm a spike is measured against" },
	{ .path = "train.spike_zscore", .off = OFF(train.spike_zscore),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "6.0", .help = "standard deviations above the window's mean that make a spike" },
	{ .path = "train.spike_min_steps", .off = OFF(train.spike_min_steps),
	  .type = K_INT, .lo = 2, .hi = STORK_SPIKE_WINDOW_MAX,
	  .dflt = "20", .help = "values the window needs before steps are judged" },
	{ .path = "train.spike_max_in_row", .off = OFF(train.spike_max_in_row),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "10", .help = "spikes in a row that make a new level: the window starts again" },
	{ .path = "train.warmup_steps", .off = OFF(train.warmup_steps),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "100", .help = "linear warmup steps" },
	{ .path = "train.min_lr", .off = OFF(train.min_lr),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "6.0e-5", .help = "end of the cosine" },
	{ .path = "train.weight_decay", .off = OFF(train.weight_decay),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "0.1", .help = "decoupled, 2-D weights only" },
	{ .path = "train.beta1", .off = OFF(train.beta1),
	  .type = K_DOUBLE, .lo = 0, .hi = 1, .flags = HI_OPEN,
	  .dflt = "0.9", .help = "AdamW first moment decay" },
	{ .path = "train.beta2", .off = OFF(train.beta2),
	  .type = K_DOUBLE, .lo = 0, .hi = 1, .flags = HI_OPEN,
	  .dflt = "0.95", .help = "AdamW second moment decay" },
	{ .path = "train.eps", .off = OFF(train.eps),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX, .flags = LO_OPEN,
	  .dflt = "1.0e-8", .help = "AdamW epsilon" },
	{ .path = "train.grad_clip", .off = OFF(train.grad_clip),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "1.0", .help = "global norm; 0 = off" },
	{ .path = "train.val_every", .off = OFF(train.val_every),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "100", .help = "validation before step 0 and every Nth step; 0 = off" },
	{ .path = "train.val_batches", .off = OFF(train.val_batches),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "10", .help = "batches per validation" },
	{ .path = "train.log_every", .off = OFF(train.log_every),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1", .help = "progress line every N steps" },
	{ .path = "checkpoint.every", .off = OFF(checkpoint.every),
	  .type = K_AUTO_INT, .lo = 0, .hi = BIG, .flags = AUTO_NEG,
	  .dflt = "200", .help = "steps; 0 = only on preemption and at the end; auto: Young's interval sqrt(2 x commit time x checkpoint.mtbf_hours)" },
	{ .path = "checkpoint.every_minutes", .off = OFF(checkpoint.every_minutes),
	  .type = K_DOUBLE, .lo = 0, .hi = 1e6,
	  .dflt = "0", .help = "also a checkpoint when this much wall time has passed since the last one; 0 = off" },
	{ .path = "checkpoint.mtbf_hours", .off = OFF(checkpoint.mtbf_hours),
	  .type = K_DOUBLE, .lo = 0, .hi = 1e6, .flags = LO_OPEN,
	  .dflt = "24", .help = "with every: auto, the job's mean time between failures" },
	{ .path = "checkpoint.keep", .off = OFF(checkpoint.keep),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "3", .help = "newest kept; 0 = keep all" },
	{ .path = "checkpoint.keep_every", .off = OFF(checkpoint.keep_every),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "0", .help = "a milestone checkpoint every N steps, kept beside the newest keep; 0 = none" },
	{ .path = "checkpoint.local_dir", .off = OFF(checkpoint.local_dir),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "node-local tier every checkpoint is committed to first; auto: $SLURM_TMPDIR, else /tmp/stork-USER/JOB; empty: none" },
	{ .path = "checkpoint.persist_every", .off = OFF(checkpoint.persist_every),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1", .help = "with local_dir: every Nth periodic checkpoint also goes to the run directory" },
	{ .path = "checkpoint.async", .off = OFF(checkpoint.async),
	  .type = K_BOOL,
	  .dflt = "false",
	  .help = "periodic checkpoints written by a thread of each rank while training goes on" },
	{ .path = "checkpoint.max_failures", .off = OFF(checkpoint.max_failures),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "3", .help = "periodic checkpoints that may fail in a row before the run stops" },
	{ .path = "preempt.signal", .off = OFF(preempt.signal),
	  .type = K_ENUM, .names = signals,
	  .dflt = "USR1", .help = "USR1 | USR2 | TERM" },
	{ .path = "preempt.hang_timeout", .off = OFF(preempt.hang_timeout),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "600", .help = "seconds without a step before reason hang; 0 = off" },
	{ .path = "preempt.deadline_guard", .off = OFF(preempt.deadline_guard),
	  .type = K_BOOL,
	  .dflt = "true",
	  .help = "stop, checkpoint and requeue before the job's end without a signal" },
	{ .path = "preempt.deadline_lead", .off = OFF(preempt.deadline_lead),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "10", .help = "seconds the deadline guard keeps free before the end" },
	{ .path = "preflight.enabled", .off = OFF(preflight.enabled),
	  .type = K_ENUM, .names = preflight_modes,
	  .dflt = "auto", .help = "auto (jobs of 2+ nodes) | true | false | only (then stop: stork check --all): probe every rank's device and the groups' links before the first step" },
	{ .path = "preflight.tolerance", .off = OFF(preflight.tolerance),
	  .type = K_DOUBLE, .lo = 0, .hi = 1, .flags = LO_OPEN,
	  .dflt = "0.8", .help = "a node this far below the median of the others (matrix product or memory bandwidth) is short: left out where a majority of three or more nodes keeps up, else named in a warning" },
	{ .path = "restart.max_restarts", .off = OFF(restart.max_restarts),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "0", .help = "restarts from the latest checkpoint inside the job after a failure" },
	{ .path = "restart.in_place", .off = OFF(restart.in_place),
	  .type = K_BOOL,
	  .dflt = "false", .help = "engine runs with 2+ data-parallel replicas: when a node's daemon dies, the other nodes go on from the step in flight without it, the global batch kept" },
	{ .path = "restart.spares", .off = OFF(restart.spares),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "0", .help = "restart.in_place: the step's last N launchers wait as hot spares; a lost node's place is taken by one of them, its replicas' state sent by a survivor" },
	{ .path = "restart.rejoin", .off = OFF(restart.rejoin),
	  .type = K_BOOL,
	  .dflt = "true", .help = "restart.in_place: a lost node whose host is still in the job gets a new launcher there (a job step of its own), which joins at a step boundary with a live replica's state; the replicas grow back" },
	{ .path = "restart.in_place_wait", .off = OFF(restart.in_place_wait),
	  .type = K_DOUBLE, .lo = 0, .hi = 3600, .flags = LO_OPEN,
	  .dflt = "10", .help = "seconds the surviving daemons wait for each other (and for a node whose daemon died silently) before they go on" },
	{ .path = "parallel.local_ranks", .off = OFF(parallel.local_ranks),
	  .type = K_AUTO_INT, .lo = 1, .hi = BIG,
	  .dflt = "auto", .help = "ranks per launcher; auto: GPUs, or 1 on CPU nodes" },
	{ .path = "parallel.merge_tasks", .off = OFF(parallel.merge_tasks),
	  .type = K_BOOL,
	  .dflt = "true",
	  .help = "a host's several tasks of the step run as one launcher (one node); false: a node each" },
	{ .path = "parallel.tensor", .off = OFF(parallel.tensor),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1", .help = "tensor-parallel ranks" },
	{ .path = "parallel.pipeline", .off = OFF(parallel.pipeline),
	  .type = K_INT, .lo = 1, .hi = BIG,
	  .dflt = "1", .help = "pipeline stages" },
	{ .path = "parallel.stage_split", .off = OFF(parallel.stage_split),
	  .type = K_STR,
	  .dflt = "params", .help = "pipeline stages balanced by params | compute, or layers per stage: \"5,7\"" },
	{ .path = "parallel.zero", .off = OFF(parallel.zero),
	  .type = K_INT, .lo = 0, .hi = 3,
	  .dflt = "0", .help = "0 = all-reduce, 1 = ZeRO-1 (optimizer state sharded over the replicas), 2 = and the gradients, 3 = and the parameters (CPU ranks)" },
	{ .path = "parallel.overlap", .off = OFF(parallel.overlap),
	  .type = K_BOOL,
	  .dflt = "false",
	  .help = "sum each layer's gradients over the replicas during the backward pass (zero 3: and gather the next layer ahead)" },
	{ .path = "program.command", .off = OFF(program.command),
	  .type = K_GLOBS,
	  .dflt = "[]", .help = "the program each rank runs, and its arguments (stork run -- PROGRAM ARGS); empty: the training engine" },
	{ .path = "program.tee", .off = OFF(program.tee),
	  .type = K_ENUM, .names = tees,
	  .dflt = "0", .help = "0 | all | none: whose output the launcher repeats" },
	{ .path = "program.signal", .off = OFF(program.signal),
	  .type = K_ENUM, .names = program_signals,
	  .dflt = "USR1", .help = "sent to every rank to ask for a checkpoint: USR1 | USR2 | TERM | INT | HUP" },
	{ .path = "program.pmix", .off = OFF(program.pmix),
	  .type = K_BOOL,
	  .dflt = "true",
	  .help = "serve PMIx to the ranks, so that MPI programs start as under mpirun; false: the ranks get no PMIx server" },
	{ .path = "program.kill_grace", .off = OFF(program.kill_grace),
	  .type = K_DOUBLE, .lo = 0, .hi = 3600,
	  .dflt = "10", .help = "seconds between TERM and KILL when ranks are ended" },
	{ .path = "program.checkpoint_grace", .off = OFF(program.checkpoint_grace),
	  .type = K_DOUBLE, .lo = 0, .hi = DBL_MAX,
	  .dflt = "0", .help = "seconds the ranks get to save and exit after the signal; 0 = what the time left allows, at most 600" },
	{ .path = "notify.url", .off = OFF(notify.url),
	  .type = K_STR, .flags = EMPTY_OK | REDACT,
	  .dflt = "\"\"", .help = "http(s) URL run events are POSTed to (or STORK_NOTIFY_URL); empty: none" },
	{ .path = "notify.events", .off = OFF(notify.events),
	  .type = K_GLOBS, .names = notify_events,
	  .dflt = "[started, preempted, restarted, failed, completed, cancelled]", .help = "the events that are sent" },
	{ .path = "notify.timeout", .off = OFF(notify.timeout),
	  .type = K_DOUBLE, .lo = 0, .hi = 300, .flags = LO_OPEN,
	  .dflt = "5", .help = "seconds per delivery attempt (three attempts)" },
	{ .path = "metrics.sample_s", .off = OFF(metrics.sample_s),
	  .type = K_DOUBLE, .lo = 0.5, .hi = 3600,
	  .dflt = "10", .help = "seconds between telemetry samples (host memory, the .prom file)" },
	{ .path = "metrics.prometheus_dir", .off = OFF(metrics.prometheus_dir),
	  .type = K_STR, .flags = EMPTY_OK,
	  .dflt = "\"\"", .help = "a directory node_exporter's textfile collector reads: one .prom file per node; empty: none" },
	{ .path = "metrics.tensorboard", .off = OFF(metrics.tensorboard),
	  .type = K_BOOL,
	  .dflt = "true", .help = "TensorBoard event files of every rank's metrics in RUN_DIR/tensorboard/" },
};

const size_t config_nkeys = sizeof config_keys / sizeof config_keys[0];

const char *const config_sections[] = {
	"run", "model", "data", "train", "checkpoint", "preempt", "preflight", "restart", "parallel",
	"notify", "metrics", "program", NULL,
};

const char *config_signal_name(int signo)
{
	for (int i = 0; signals[i].name; i++)
		if (signals[i].value == signo)
			return signals[i].name;
	return "?";
}

const char *config_precision_name(enum stork_precision p)
{
	for (int i = 0; precisions[i].name; i++)
		if (precisions[i].value == (int)p)
			return precisions[i].name;
	return "?";
}

/* ---------------------------------------------------------------- helpers */

int config_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

void *config_field(const struct stork_config *c, const struct key *k)
{
	return (char *)c + k->off;
}

int config_key_index(const char *path, size_t len)
{
	for (size_t i = 0; i < config_nkeys; i++)
		if (strlen(config_keys[i].path) == len && memcmp(config_keys[i].path, path, len) == 0)
			return (int)i;
	return -1;
}
