/*
 * lib/config/stork_config.c - see stork_config.h.
 *
 * Every key is one row of the table `keys` below: its path, its type, where
 * it lives in struct stork_config, its accepted range and its default (as
 * YAML text). Loading, overrides, defaults, the resolved YAML output,
 * equality and hashing all walk that one table, so a key added there is
 * parsed, checked, written and hashed everywhere at once.
 *
 * A file is read with libyaml's document API: the tree keeps the start mark
 * of every node, which gives the line:column of each message. An override's
 * value is parsed as a YAML document of its own, so "train.lr=1e-3" and
 * "lr: 1e-3" go through the same checks.
 */
#include "config.h"
#include "lib/config/stork_config.h"
#include "lib/url.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ------------------------------------------------------------------ table */

enum key_type {
	K_STR,          /* any string; flag EMPTY_OK allows "" and null */
	K_NAME,         /* non-empty, no '/', not "." or ".." */
	K_INT,          /* int in [lo, hi] */
	K_AUTO_INT,     /* "auto" (stored as 0) or int in [lo, hi] */
	K_U64,          /* any non-negative 64-bit integer */
	K_DOUBLE,       /* finite double in lo..hi, ends open per flags */
	K_BOOL,
	K_ENUM,         /* one of names[], stored as int */
	K_GLOBS,        /* a string or a sequence of strings; MIN1 needs one */
};

#define EMPTY_OK 1u
#define LO_OPEN 2u
#define HI_OPEN 4u
#define MIN1 8u
#define REDACT 16u      /* URLs written without their secret: K_STR without path and
                         * query (a web hook), K_GLOBS without user and query (data) */

struct enum_name {
	const char *name;
	int value;
};

/* One key of stork.yaml; fields a type does not use stay zero. */
struct key {
	const char *path;       /* "section.name" */
	size_t off;             /* its field in struct stork_config */
	enum key_type type;
	double lo, hi;          /* K_INT, K_AUTO_INT, K_DOUBLE: the range */
	unsigned flags;         /* EMPTY_OK, LO_OPEN, HI_OPEN, MIN1 */
	const struct enum_name *names; /* K_ENUM: the accepted names */
	const char *dflt;       /* default, as YAML text */
	const char *help;       /* comment in the resolved YAML */
};

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
#define BIG 2147483647.0

static const struct key keys[] = {
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
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "200", .help = "steps; 0 = only on preemption and at the end" },
	{ .path = "checkpoint.keep", .off = OFF(checkpoint.keep),
	  .type = K_INT, .lo = 0, .hi = BIG,
	  .dflt = "3", .help = "newest kept; 0 = keep all" },
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
	  .type = K_INT, .lo = 0, .hi = 1,
	  .dflt = "0", .help = "0 = all-reduce, 1 = ZeRO-1" },
	{ .path = "parallel.overlap", .off = OFF(parallel.overlap),
	  .type = K_BOOL,
	  .dflt = "false",
	  .help = "all-reduce each layer's gradients over the replicas during the backward pass" },
	{ .path = "program.command", .off = OFF(program.command),
	  .type = K_GLOBS,
	  .dflt = "[]", .help = "the program each rank runs, and its arguments (stork run -- PROGRAM ARGS); empty: the training engine" },
	{ .path = "program.tee", .off = OFF(program.tee),
	  .type = K_ENUM, .names = tees,
	  .dflt = "0", .help = "0 | all | none: whose output the launcher repeats" },
	{ .path = "program.signal", .off = OFF(program.signal),
	  .type = K_ENUM, .names = program_signals,
	  .dflt = "USR1", .help = "sent to every rank to ask for a checkpoint: USR1 | USR2 | TERM | INT | HUP" },
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
};

#define NKEYS (sizeof keys / sizeof keys[0])

static const char *const sections[] = {
	"run", "model", "data", "train", "checkpoint", "preempt", "preflight", "restart", "parallel",
	"notify", "program", NULL,
};

/* ---------------------------------------------------------------- helpers */

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static void *field(const struct stork_config *c, const struct key *k)
{
	return (char *)c + k->off;
}

static int key_index(const char *path, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strlen(keys[i].path) == len && memcmp(keys[i].path, path, len) == 0)
			return (int)i;
	return -1;
}

static int section_known(const char *s, size_t len)
{
	for (int i = 0; sections[i]; i++)
		if (strlen(sections[i]) == len && memcmp(sections[i], s, len) == 0)
			return 1;
	return 0;
}

/* "batch_size, seq_len, ..." : the keys of one section. */
static void section_keys(const char *section, char *buf, size_t len)
{
	size_t sl = strlen(section), used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NKEYS; i++) {
		if (strncmp(keys[i].path, section, sl) || keys[i].path[sl] != '.')
			continue;
		used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
				 used ? ", " : "", keys[i].path + sl + 1);
	}
}

static void section_list(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; sections[i]; i++)
		used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
				 i ? ", " : "", sections[i]);
}

/* What a key accepts, in words, for messages. */
static void expected(const struct key *k, char *buf, size_t len)
{
	size_t used;

	switch (k->type) {
	case K_STR:
		snprintf(buf, len, "%s", k->flags & EMPTY_OK ? "a string (may be empty)" : "a non-empty string");
		break;
	case K_NAME:
		snprintf(buf, len, "a non-empty name without '/'");
		break;
	case K_INT:
	case K_AUTO_INT:
		if (k->hi < BIG)
			snprintf(buf, len, "%san integer from %.0f to %.0f",
				 k->type == K_AUTO_INT ? "auto or " : "", k->lo, k->hi);
		else
			snprintf(buf, len, "%san integer >= %.0f",
				 k->type == K_AUTO_INT ? "auto or " : "", k->lo);
		break;
	case K_U64:
		snprintf(buf, len, "an integer from 0 to %" PRIu64, UINT64_MAX);
		break;
	case K_DOUBLE:
		if (k->hi < DBL_MAX)
			snprintf(buf, len, "a number in %c%g, %g%c", k->flags & LO_OPEN ? '(' : '[',
				 k->lo, k->hi, k->flags & HI_OPEN ? ')' : ']');
		else
			snprintf(buf, len, "a number %s %g", k->flags & LO_OPEN ? ">" : ">=", k->lo);
		break;
	case K_BOOL:
		snprintf(buf, len, "true or false");
		break;
	case K_ENUM:
		used = snprintf(buf, len, "one of ");
		for (int i = 0; k->names[i].name; i++)
			used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
					 i ? ", " : "", k->names[i].name);
		break;
	case K_GLOBS:
		if (k->names) {
			used = snprintf(buf, len, "a list of ");
			for (int i = 0; k->names[i].name; i++)
				used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
						 i ? ", " : "", k->names[i].name);
			break;
		}
		snprintf(buf, len, "a glob or a list of globs%s", k->flags & MIN1 ? " (at least one)" : "");
		break;
	}
}

/* ------------------------------------------------------- scalar checking */

/* A value to apply: either a libyaml node of doc, or a raw override string. */
struct value {
	yaml_document_t *doc;
	yaml_node_t *node;      /* NULL: null (empty) */
	const char *where;      /* "f.yaml:3:5" or "override 'k=v'" */
	const char *file;       /* file name for the marks of list items, or NULL */
};

static const char *scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

static int is_quoted(const yaml_node_t *n)
{
	return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
	       n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* YAML's null: an absent value, or a plain "~" / "null". */
static int is_null(const yaml_node_t *n)
{
	const char *s;

	if (!n)
		return 1;
	if (n->type != YAML_SCALAR_NODE || is_quoted(n))
		return 0;
	s = scalar(n);
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	if (is_null(n))
		return "nothing";
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	return "a string";
}

/* The error for a value that a key does not accept. */
static int bad_value(const struct key *k, const yaml_node_t *n, const char *where,
		     char *err, size_t errlen)
{
	char exp[256];

	expected(k, exp, sizeof exp);
	if (n && n->type == YAML_SCALAR_NODE && !is_null(n))
		return fail(err, errlen, "%s: %s: expected %s, got %s%s%s%s", where, k->path, exp,
			    is_quoted(n) ? "the quoted string \"" : "'", scalar(n),
			    is_quoted(n) ? "\"" : "'",
			    is_quoted(n) && k->type != K_STR && k->type != K_NAME ?
				    " (remove the quotes)" : "");
	return fail(err, errlen, "%s: %s: expected %s, got %s", where, k->path, exp, node_kind(n));
}

static int parse_int(const char *s, long long *out)
{
	char *end;
	const char *p = s + (*s == '-' || *s == '+');

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || *end ? -1 : 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	const char *p = s + (*s == '+');

	if (!*p)
		return -1;
	for (const char *q = p; *q; q++)
		if (*q < '0' || *q > '9')
			return -1;
	errno = 0;
	*out = strtoull(p, &end, 10);
	return errno || *end ? -1 : 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	int digits = 0;

	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits = 1;
		else if (!strchr("+-.eE", *p))
			return -1;
	}
	if (!digits)
		return -1;
	errno = 0;
	*out = strtod(s, &end);
	return *end || errno == ERANGE || !isfinite(*out) ? -1 : 0;
}

static int in_range(const struct key *k, double v)
{
	if (k->flags & LO_OPEN ? v <= k->lo : v < k->lo)
		return 0;
	if (k->flags & HI_OPEN ? v >= k->hi : v > k->hi)
		return 0;
	return 1;
}

static int set_string(char **dst, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -1;
	free(*dst);
	*dst = copy;
	return 0;
}

static void globs_free(struct stork_globs *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	free(g->v);
	g->v = NULL;
	g->n = 0;
}

static int globs_push(struct stork_globs *g, const char *s)
{
	char **v = realloc(g->v, (g->n + 1) * sizeof *v);

	if (!v)
		return -1;
	g->v = v;
	if (!(v[g->n] = strdup(s)))
		return -1;
	g->n++;
	return 0;
}

static int apply_globs(const struct key *k, struct stork_globs *dst, const struct value *val,
		       char *err, size_t errlen)
{
	struct stork_globs g = { NULL, 0 };
	yaml_node_t *n = val->node;

	if (is_null(n) && !(k->flags & MIN1))
		goto done;
	if (n && n->type == YAML_SCALAR_NODE && !is_null(n)) {
		if (!*scalar(n))
			return bad_value(k, n, val->where, err, errlen);
		if (globs_push(&g, scalar(n)) < 0)
			goto oom;
		goto done;
	}
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return bad_value(k, n, val->where, err, errlen);
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = yaml_document_get_node(val->doc, *it);

		if (item->type != YAML_SCALAR_NODE || is_null(item) || !*scalar(item)) {
			char w[600];

			if (val->file)
				snprintf(w, sizeof w, "%s:%zu:%zu", val->file, item->start_mark.line + 1,
					 item->start_mark.column + 1);
			else
				snprintf(w, sizeof w, "%s", val->where);
			globs_free(&g);
			return fail(err, errlen, "%s: %s: expected a glob (a non-empty string) in the list, got %s",
				    w, k->path, item->type == YAML_SCALAR_NODE && !is_null(item) ?
				    "an empty string" : node_kind(item));
		}
		if (globs_push(&g, scalar(item)) < 0)
			goto oom;
	}
	if (g.n == 0 && (k->flags & MIN1))
		return fail(err, errlen, "%s: %s: expected at least one glob, got an empty list",
			    val->where, k->path);
done:
	/* a list of names (notify.events): each one known */
	for (size_t i = 0; k->names && i < g.n; i++) {
		int known = 0;
		char what[256];

		for (int j = 0; k->names[j].name; j++)
			known |= !strcmp(g.v[i], k->names[j].name);
		if (!known) {
			expected(k, what, sizeof what);
			fail(err, errlen, "%s: %s: unknown name '%s': expected %s", val->where, k->path,
			     g.v[i], what);
			globs_free(&g);
			return -1;
		}
	}
	globs_free(dst);
	*dst = g;
	return 0;
oom:
	globs_free(&g);
	return fail(err, errlen, "%s: %s: out of memory", val->where, k->path);
}

/* Check one value against key k and store it in c. */
static int apply_value(struct stork_config *c, const struct key *k, const struct value *val,
		       char *err, size_t errlen)
{
	yaml_node_t *n = val->node;
	void *p = field(c, k);
	const char *s;
	long long ll;
	double d;

	if (k->type == K_GLOBS)
		return apply_globs(k, p, val, err, errlen);
	if (k->type == K_STR && (k->flags & EMPTY_OK) && is_null(n))
		return set_string(p, "") < 0 ? fail(err, errlen, "out of memory") : 0;
	if (!n || n->type != YAML_SCALAR_NODE || is_null(n))
		return bad_value(k, n, val->where, err, errlen);
	s = scalar(n);
	switch (k->type) {
	case K_NAME:
		if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
			return bad_value(k, n, val->where, err, errlen);
		/* fall through */
	case K_STR:
		if (!*s && !(k->flags & EMPTY_OK))
			return bad_value(k, n, val->where, err, errlen);
		return set_string(p, s) < 0 ? fail(err, errlen, "out of memory") : 0;
	case K_AUTO_INT:
		if (!is_quoted(n) && !strcmp(s, "auto")) {
			*(int *)p = 0;
			return 0;
		}
		/* fall through */
	case K_INT:
		if (is_quoted(n) || parse_int(s, &ll) < 0 || ll < k->lo || ll > k->hi)
			return bad_value(k, n, val->where, err, errlen);
		*(int *)p = (int)ll;
		return 0;
	case K_U64:
		if (is_quoted(n) || parse_u64(s, p) < 0)
			return bad_value(k, n, val->where, err, errlen);
		return 0;
	case K_DOUBLE:
		if (is_quoted(n) || parse_double(s, &d) < 0 || !in_range(k, d))
			return bad_value(k, n, val->where, err, errlen);
		*(double *)p = d;
		return 0;
	case K_BOOL:
		if (!is_quoted(n) && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")))
			*(bool *)p = true;
		else if (!is_quoted(n) && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")))
			*(bool *)p = false;
		else
			return bad_value(k, n, val->where, err, errlen);
		return 0;
	case K_ENUM:
		for (int i = 0; k->names[i].name; i++)
			if (!strcmp(s, k->names[i].name)) {
				*(int *)p = k->names[i].value;
				return 0;
			}
		return bad_value(k, n, val->where, err, errlen);
	case K_GLOBS:
		break;
	}
	return bad_value(k, n, val->where, err, errlen);
}

static void set_origin(struct stork_config *c, size_t idx, const char *where)
{
	if (!c->origin && !(c->origin = calloc(NKEYS, sizeof *c->origin)))
		return;
	free(c->origin[idx]);
	c->origin[idx] = where ? strdup(where) : NULL;
}

size_t config_key_count(void)
{
	return NKEYS;
}

const char *config_key_path(size_t i)
{
	return i < NKEYS ? keys[i].path : NULL;
}

const char *config_origin(const struct stork_config *c, const char *path)
{
	int i = key_index(path, strlen(path));

	return c->origin && i >= 0 && c->origin[i] ? c->origin[i] : "default";
}

int config_engine_keys_set(const struct stork_config *c, char *buf, size_t len)
{
	static const char *const engine[] = { "model.", "data.", "train.", "checkpoint.",
					      "parallel.tensor", "parallel.pipeline",
					      "parallel.zero", "parallel.overlap", NULL };
	size_t used = 0;
	int n = 0;

	buf[0] = '\0';
	for (size_t i = 0; c->origin && i < NKEYS; i++) {
		int is_engine = 0;

		for (int e = 0; engine[e]; e++)
			is_engine |= !strncmp(keys[i].path, engine[e], strlen(engine[e]));
		if (!is_engine || !c->origin[i])
			continue;
		n++;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s (%s)", used ? ", " : "",
						 keys[i].path, c->origin[i]);
	}
	return n;
}

/* ------------------------------------------------------ parsing a value */

static int yaml_error(const yaml_parser_t *y, const char *name, char *err, size_t errlen)
{
	const char *problem = y->problem ? y->problem : "unknown error";

	if (y->context)
		return fail(err, errlen, "%s:%zu:%zu: malformed YAML: %s (%s at line %zu, column %zu)",
			    name, y->problem_mark.line + 1, y->problem_mark.column + 1, problem,
			    y->context, y->context_mark.line + 1, y->context_mark.column + 1);
	return fail(err, errlen, "%s:%zu:%zu: malformed YAML: %s", name,
		    y->problem_mark.line + 1, y->problem_mark.column + 1, problem);
}

/*
 * Apply one override value. Strings and globs that do not start like a YAML
 * flow value ([, ", ') are taken literally, so "data.train=*.bin" works;
 * everything else is parsed as a one-line YAML document.
 */
static int apply_text(struct stork_config *c, size_t idx, const char *text, const char *where,
		      char *err, size_t errlen)
{
	const struct key *k = &keys[idx];
	yaml_parser_t y;
	yaml_document_t doc;
	struct value val = { &doc, NULL, where, NULL };
	int literal = (k->type == K_STR || k->type == K_NAME || k->type == K_GLOBS) &&
		      *text && !strchr("[\"'", *text);
	int rc;

	if (!yaml_parser_initialize(&y))
		return fail(err, errlen, "%s: out of memory", where);
	if (literal) {
		yaml_char_t *s = (yaml_char_t *)text;

		memset(&doc, 0, sizeof doc);
		if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1))
			goto oom;
		rc = yaml_document_add_scalar(&doc, NULL, s, (int)strlen(text),
					      YAML_DOUBLE_QUOTED_SCALAR_STYLE);
		if (!rc)
			goto oom_doc;
		val.node = yaml_document_get_node(&doc, rc);
	} else {
		yaml_parser_set_input_string(&y, (const unsigned char *)text, strlen(text));
		if (!yaml_parser_load(&y, &doc)) {
			char msg[512];

			yaml_error(&y, "value", msg, sizeof msg);
			yaml_parser_delete(&y);
			return fail(err, errlen, "%s: %s: %s", where, k->path, msg);
		}
		val.node = yaml_document_get_root_node(&doc);
	}
	rc = apply_value(c, k, &val, err, errlen);
	yaml_document_delete(&doc);
	yaml_parser_delete(&y);
	return rc;
oom_doc:
	yaml_document_delete(&doc);
oom:
	yaml_parser_delete(&y);
	return fail(err, errlen, "%s: out of memory", where);
}

/* ------------------------------------------------------- parsing a file */

struct file_ctx {
	struct stork_config *c;
	yaml_document_t *doc;
	const char *name;
	char *err;
	size_t errlen;
};

static void mark_str(const struct file_ctx *f, yaml_mark_t m, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%zu:%zu", f->name, m.line + 1, m.column + 1);
}

/*
 * The keys of a mapping must be plain scalars, each at most once. On error,
 * describe it with section (NULL at top level) for the path.
 */
static int check_keys(const struct file_ctx *f, yaml_node_t *map, const char *section)
{
	char w[600];

	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);

		mark_str(f, k->start_mark, w, sizeof w);
		if (k->type != YAML_SCALAR_NODE)
			return fail(f->err, f->errlen, "%s: %s%sexpected a key name, got %s", w,
				    section ? section : "", section ? ": " : "", node_kind(k));
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(f->doc, q->key);
			char first[600];

			if (prev->type != YAML_SCALAR_NODE || strcmp(scalar(prev), scalar(k)))
				continue;
			mark_str(f, prev->start_mark, first, sizeof first);
			return fail(f->err, f->errlen, "%s: %s%s%s: duplicate key, first set at %s; keep one",
				    w, section ? section : "", section ? "." : "", scalar(k), first);
		}
	}
	return 0;
}

static int load_section(const struct file_ctx *f, const char *section, yaml_node_t *map)
{
	char w[600], path[256], known[512];

	if (is_null(map))
		return 0;
	if (map->type != YAML_MAPPING_NODE) {
		mark_str(f, map->start_mark, w, sizeof w);
		section_keys(section, known, sizeof known);
		return fail(f->err, f->errlen, "%s: %s: expected a mapping of keys (%s), got %s",
			    w, section, known, node_kind(map));
	}
	if (check_keys(f, map, section) < 0)
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(f->doc, p->value);
		struct value val = { f->doc, v, w, f->name };
		int idx;

		snprintf(path, sizeof path, "%s.%s", section, scalar(k));
		idx = key_index(path, strlen(path));
		if (idx < 0) {
			mark_str(f, k->start_mark, w, sizeof w);
			section_keys(section, known, sizeof known);
			return fail(f->err, f->errlen, "%s: %s: unknown key; the keys of %s are: %s",
				    w, path, section, known);
		}
		/* An empty value has no useful mark of its own: point at the key. */
		mark_str(f, is_null(v) && !*scalar(v) ? k->start_mark : v->start_mark, w, sizeof w);
		if (apply_value(f->c, &keys[idx], &val, f->err, f->errlen) < 0)
			return -1;
		set_origin(f->c, (size_t)idx, w);
	}
	return 0;
}

static int load_root(const struct file_ctx *f, yaml_node_t *root)
{
	char w[600], list[256];

	section_list(list, sizeof list);
	if (is_null(root))
		return 0;
	if (root->type != YAML_MAPPING_NODE) {
		mark_str(f, root->start_mark, w, sizeof w);
		return fail(f->err, f->errlen, "%s: expected a mapping of sections (%s), got %s",
			    w, list, node_kind(root));
	}
	if (check_keys(f, root, NULL) < 0)
		return -1;
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);

		if (!section_known(scalar(k), strlen(scalar(k)))) {
			mark_str(f, k->start_mark, w, sizeof w);
			return fail(f->err, f->errlen, "%s: %s: unknown section; the sections are: %s",
				    w, scalar(k), list);
		}
		if (load_section(f, scalar(k), yaml_document_get_node(f->doc, p->value)) < 0)
			return -1;
	}
	return 0;
}

int config_load_string(struct stork_config *c, const char *text, const char *name,
		       char *err, size_t errlen)
{
	yaml_parser_t y;
	yaml_document_t doc, extra;
	struct file_ctx f = { c, &doc, name, err, errlen };
	yaml_node_t *more;
	int rc = -1;

	config_init(c);
	if (!yaml_parser_initialize(&y))
		return fail(err, errlen, "%s: out of memory", name);
	yaml_parser_set_input_string(&y, (const unsigned char *)text, strlen(text));
	if (!yaml_parser_load(&y, &doc)) {
		yaml_error(&y, name, err, errlen);
		goto out_parser;
	}
	if (load_root(&f, yaml_document_get_root_node(&doc)) < 0)
		goto out_doc;
	if (!yaml_parser_load(&y, &extra)) {
		yaml_error(&y, name, err, errlen);
		goto out_doc;
	}
	more = yaml_document_get_root_node(&extra);
	if (more)
		fail(err, errlen, "%s:%zu:%zu: a second YAML document; a configuration is one document",
		     name, more->start_mark.line + 1, more->start_mark.column + 1);
	else
		rc = 0;
	yaml_document_delete(&extra);
out_doc:
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&y);
	return rc;
}

int config_load(struct stork_config *c, const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int rc;

	if (!fp) {
		int e = errno;

		config_init(c);
		return fail(err, errlen, "%s: cannot open the configuration: %s", path, strerror(e));
	}
	do {
		if (cap - len < 4096) {
			char *t = realloc(text, cap = cap * 2 + 8192);

			if (!t) {
				free(text);
				fclose(fp);
				config_init(c);
				return fail(err, errlen, "%s: out of memory", path);
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len - 1, fp);
		len += n;
	} while (n > 0);
	if (ferror(fp)) {
		int e = errno;

		free(text);
		fclose(fp);
		config_init(c);
		return fail(err, errlen, "%s: cannot read the configuration: %s", path, strerror(e));
	}
	fclose(fp);
	text[len] = '\0';
	if (strlen(text) != len) {
		free(text);
		config_init(c);
		return fail(err, errlen, "%s: a NUL byte in the file; is it a YAML text file?", path);
	}
	rc = config_load_string(c, text, path, err, errlen);
	free(text);
	return rc;
}

/* ------------------------------------------------------------- overrides */

int config_set(struct stork_config *c, const char *assignment, char *err, size_t errlen)
{
	const char *eq = strchr(assignment, '=');
	char where[600], known[512];
	int idx;

	snprintf(where, sizeof where, "override '%s'", assignment);
	if (!eq || eq == assignment)
		return fail(err, errlen, "%s: expected SECTION.KEY=VALUE, e.g. train.steps=50", where);
	idx = key_index(assignment, (size_t)(eq - assignment));
	if (idx < 0) {
		const char *dot = memchr(assignment, '.', (size_t)(eq - assignment));
		char section[64];

		if (dot && section_known(assignment, (size_t)(dot - assignment))) {
			snprintf(section, sizeof section, "%.*s", (int)(dot - assignment), assignment);
			section_keys(section, known, sizeof known);
			return fail(err, errlen, "%s: %.*s: unknown key; the keys of %s are: %s", where,
				    (int)(eq - assignment), assignment, section, known);
		}
		section_list(known, sizeof known);
		return fail(err, errlen, "%s: %.*s: unknown key; keys are SECTION.KEY with SECTION one of: %s",
			    where, (int)(eq - assignment), assignment, known);
	}
	if (apply_text(c, (size_t)idx, eq + 1, where, err, errlen) < 0)
		return -1;
	set_origin(c, (size_t)idx, where);
	return 0;
}

/* ------------------------------------------------------------ defaults */

static void clear(struct stork_config *c)
{
	for (size_t i = 0; i < NKEYS; i++) {
		void *p = field(c, &keys[i]);

		if (keys[i].type == K_STR || keys[i].type == K_NAME) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (keys[i].type == K_GLOBS) {
			globs_free(p);
		}
	}
	if (c->origin)
		for (size_t i = 0; i < NKEYS; i++)
			free(c->origin[i]);
	free(c->origin);
	c->origin = NULL;
}

void config_init(struct stork_config *c)
{
	char err[512];

	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < NKEYS; i++) {
		if (apply_text(c, i, keys[i].dflt, "default", err, sizeof err) < 0) {
			fprintf(stderr, "stork: bad built-in default: %s\n", err);
			abort();
		}
	}
}

void config_free(struct stork_config *c)
{
	clear(c);
}

/* ------------------------------------------------------------ validation */

/* Credentials never come from the YAML: a URL with user:password@ is refused. */
static int check_data_urls(const struct stork_config *c, const char *key,
			   const struct stork_globs *g, char *err, size_t errlen)
{
	for (size_t i = 0; i < g->n; i++) {
		char shown[512];

		if (!url_has_userinfo(g->v[i]))
			continue;
		url_public(g->v[i], shown, sizeof shown);
		/* an override's origin quotes its value, the password with it */
		return fail(err, errlen, "%s: %s: %s carries a user and password; credentials do not "
			    "belong in the configuration: use data.netrc or data.token_env",
			    strncmp(config_origin(c, key), "override", 8) ? config_origin(c, key) :
									    "an override (--set)",
			    key, shown);
	}
	return 0;
}

static void put_value(FILE *f, const struct stork_config *c, const struct key *k);

/* Key path's value as the resolved YAML writes it, or NULL (memory). */
static char *value_text(const struct stork_config *c, const char *path)
{
	int i = key_index(path, strlen(path));
	char *text = NULL;
	size_t len = 0;
	FILE *f = i >= 0 ? open_memstream(&text, &len) : NULL;

	if (!f)
		return NULL;
	put_value(f, c, &keys[i]);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}

int config_differs_from_default(const struct stork_config *c, const char *path)
{
	struct stork_config d;
	char *a, *b;
	int differs;

	config_init(&d);
	a = value_text(c, path);
	b = value_text(&d, path);
	differs = !a || !b || strcmp(a, b);
	free(a);
	free(b);
	config_free(&d);
	return differs;
}

/* Keys only Llama reads: set under model.arch gpt2 they would be ignored, so they are refused. */
static const char *const llama_keys[] = {
	"model.kv_heads", "model.intermediate_size", "model.tie_embeddings", "model.rms_norm_eps",
	"model.rope_theta", "model.rope_scaling_factor", "model.rope_low_freq_factor",
	"model.rope_high_freq_factor", "model.rope_original_max_positions", NULL,
};

static int validate_arch(struct stork_config *c, char *err, size_t errlen)
{
	if (c->model.arch != STORK_ARCH_LLAMA) {
		for (int i = 0; llama_keys[i]; i++)
			if (config_differs_from_default(c, llama_keys[i]))
				return fail(err, errlen, "%s: %s is a setting of model.arch: llama; "
					    "model.arch is gpt2 (%s)", config_origin(c, llama_keys[i]),
					    llama_keys[i], config_origin(c, "model.arch"));
		return 0;
	}
	if (c->model.kv_heads == 0)
		c->model.kv_heads = c->model.heads;
	if (c->model.heads % c->model.kv_heads)
		return fail(err, errlen, "%s: model.kv_heads: %d does not divide model.heads = %d (%s); "
			    "each key-value head serves a whole group of query heads",
			    config_origin(c, "model.kv_heads"), c->model.kv_heads, c->model.heads,
			    config_origin(c, "model.heads"));
	if (c->model.intermediate_size == 0) /* Meta's: 2/3 of 4C, up to a multiple of 256 */
		c->model.intermediate_size = (int)((8LL * c->model.channels / 3 + 255) / 256 * 256);
	if ((c->model.channels / c->model.heads) % 2)
		return fail(err, errlen, "%s: model.heads: %d heads of model.channels = %d are heads of "
			    "%d, an odd size: rotary positions turn pairs of dimensions",
			    config_origin(c, "model.heads"), c->model.heads, c->model.channels,
			    c->model.channels / c->model.heads);
	if (c->model.rope_scaling_factor > 0 &&
	    c->model.rope_high_freq_factor <= c->model.rope_low_freq_factor)
		return fail(err, errlen, "%s: model.rope_high_freq_factor: %g is not above "
			    "model.rope_low_freq_factor = %g", config_origin(c, "model.rope_high_freq_factor"),
			    c->model.rope_high_freq_factor, c->model.rope_low_freq_factor);
	if (c->model.kv_heads % c->parallel.tensor)
		return fail(err, errlen, "%s: parallel.tensor: %d does not divide model.kv_heads = %d (%s); "
			    "each tensor-parallel rank takes whole groups (%d query heads per key-value head)",
			    config_origin(c, "parallel.tensor"), c->parallel.tensor, c->model.kv_heads,
			    config_origin(c, "model.kv_heads"), c->model.heads / c->model.kv_heads);
	if (c->model.intermediate_size % c->parallel.tensor)
		return fail(err, errlen, "%s: parallel.tensor: %d does not divide model.intermediate_size = %d",
			    config_origin(c, "parallel.tensor"), c->parallel.tensor,
			    c->model.intermediate_size);
	return 0;
}

/* "5,7": count positive integers separated by commas. */
static int stage_list_ok(const char *s, int count)
{
	int k = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 1)
			return 0;
		k++;
		s = end + strspn(end, " ");
		if (*s == ',')
			s += 1 + strspn(s + 1, " ");
		else if (*s)
			return 0;
	}
	return k == count;
}

int config_validate(struct stork_config *c, char *err, size_t errlen)
{
	if (check_data_urls(c, "data.train", &c->data.train, err, errlen) < 0 ||
	    check_data_urls(c, "data.val", &c->data.val, err, errlen) < 0)
		return -1;
	if (c->model.channels % c->model.heads)
		return fail(err, errlen, "%s: model.heads: %d does not divide model.channels = %d (%s); "
			    "choose heads that divide channels", config_origin(c, "model.heads"),
			    c->model.heads, c->model.channels, config_origin(c, "model.channels"));
	if (c->model.padded_vocab_size == 0)
		c->model.padded_vocab_size = (int)(((long long)c->model.vocab_size + 127) / 128 * 128);
	if (c->model.padded_vocab_size < c->model.vocab_size)
		return fail(err, errlen, "%s: model.padded_vocab_size: %d is less than model.vocab_size = %d (%s); "
			    "use auto or a value >= vocab_size", config_origin(c, "model.padded_vocab_size"),
			    c->model.padded_vocab_size, c->model.vocab_size, config_origin(c, "model.vocab_size"));
	if (c->train.seq_len > c->model.max_seq_len)
		return fail(err, errlen, "%s: train.seq_len: %d exceeds model.max_seq_len = %d (%s)",
			    config_origin(c, "train.seq_len"), c->train.seq_len, c->model.max_seq_len,
			    config_origin(c, "model.max_seq_len"));
	/* the engine counts a batch's tokens (and indexes its activations per
	 * token) in int: a batch of more than 2^31-1 tokens is refused here
	 * rather than wrapped around there */
	if ((long long)c->train.batch_size * c->train.seq_len > INT_MAX)
		return fail(err, errlen, "%s: train.batch_size: %d sequences of train.seq_len %d (%s) "
			    "are %lld tokens per micro-step, more than %d; use a smaller batch and "
			    "train.grad_accum", config_origin(c, "train.batch_size"), c->train.batch_size,
			    c->train.seq_len, config_origin(c, "train.seq_len"),
			    (long long)c->train.batch_size * c->train.seq_len, INT_MAX);
	if (strcmp(c->parallel.stage_split, "params") && strcmp(c->parallel.stage_split, "compute") &&
	    !stage_list_ok(c->parallel.stage_split, c->parallel.pipeline))
		return fail(err, errlen, "%s: parallel.stage_split: '%s' is neither params, compute nor "
			    "a list of %d layer counts, one per stage of parallel.pipeline (\"5,7\")",
			    config_origin(c, "parallel.stage_split"), c->parallel.stage_split,
			    c->parallel.pipeline);
	if (c->checkpoint.local_dir[0] && c->checkpoint.local_dir[0] != '/' &&
	    strcmp(c->checkpoint.local_dir, "auto"))
		return fail(err, errlen, "%s: checkpoint.local_dir: '%s' is neither auto nor an absolute "
			    "path (a node-local directory, the same path on every node)",
			    config_origin(c, "checkpoint.local_dir"), c->checkpoint.local_dir);
	if (c->train.spike_min_steps > c->train.spike_window)
		return fail(err, errlen, "%s: train.spike_min_steps: %d exceeds train.spike_window = %d "
			    "(%s): the window could never hold enough steps to judge one",
			    config_origin(c, "train.spike_min_steps"), c->train.spike_min_steps,
			    c->train.spike_window, config_origin(c, "train.spike_window"));
	if (c->train.min_lr > c->train.lr)
		return fail(err, errlen, "%s: train.min_lr: %g exceeds train.lr = %g (%s)",
			    config_origin(c, "train.min_lr"), c->train.min_lr, c->train.lr, config_origin(c, "train.lr"));
	if (c->model.heads % c->parallel.tensor)
		return fail(err, errlen, "%s: parallel.tensor: %d does not divide model.heads = %d (%s); "
			    "each tensor-parallel rank takes whole heads", config_origin(c, "parallel.tensor"),
			    c->parallel.tensor, c->model.heads, config_origin(c, "model.heads"));
	if (c->model.padded_vocab_size % c->parallel.tensor)
		return fail(err, errlen, "%s: parallel.tensor: %d does not divide model.padded_vocab_size = %d; "
			    "each tensor-parallel rank takes an equal slice of the vocabulary",
			    config_origin(c, "parallel.tensor"), c->parallel.tensor, c->model.padded_vocab_size);
	if (!c->model.init_from[0] && validate_arch(c, err, errlen) < 0)
		return -1;
	if (c->parallel.pipeline > c->model.layers)
		return fail(err, errlen, "%s: parallel.pipeline: %d stages for model.layers = %d (%s); "
			    "every stage needs at least one layer", config_origin(c, "parallel.pipeline"),
			    c->parallel.pipeline, c->model.layers, config_origin(c, "model.layers"));
	if (c->train.grad_accum < c->parallel.pipeline)
		return fail(err, errlen, "%s: train.grad_accum: %d micro-batches for parallel.pipeline = %d stages (%s); "
			    "every stage needs a micro-batch in flight: use train.grad_accum >= %d "
			    "(the idle share of a step is (P-1)/(m+P-1), so 4 x %d keeps it under 20%%)",
			    config_origin(c, "train.grad_accum"), c->train.grad_accum, c->parallel.pipeline,
			    config_origin(c, "parallel.pipeline"), c->parallel.pipeline, c->parallel.pipeline);
	return 0;
}

/* --------------------------------------------------------------- output */

/*
 * The fewest significant digits that read back to the same double, in plain
 * notation for moderate exponents ("300.0", "0.0006") and scientific
 * otherwise ("1.0e-08"); always with a '.', so that YAML 1.1 readers see a
 * float too.
 */
static void format_double(double v, char *buf, size_t len)
{
	char sci[40], tmp[48], *e;
	int prec, exp10;

	for (prec = 1; prec < 17; prec++) {
		snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
		if (strtod(sci, NULL) == v)
			break;
	}
	snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
	e = strchr(sci, 'e');
	exp10 = atoi(e + 1);
	if (exp10 >= -5 && exp10 < 16) {
		snprintf(tmp, sizeof tmp, "%.*f", prec - 1 - exp10 > 0 ? prec - 1 - exp10 : 0, v);
		snprintf(buf, len, "%s%s", tmp, strchr(tmp, '.') ? "" : ".0");
	} else if (strchr(sci, '.')) {
		snprintf(buf, len, "%s", sci);
	} else {
		snprintf(buf, len, "%.*s.0%s", (int)(e - sci), sci, e);
	}
}

static void put_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\x%02x", *p);
		} else if (p[0] == 0xc2 && p[1] == 0x85) {
			/* YAML counts U+0085 (NEL), U+2028 and U+2029 as line
			 * breaks even inside quotes, and folds NEL into a space:
			 * escaped, they read back as themselves. */
			fputs("\\N", f);
			p += 1;
		} else if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
			fputs(p[2] == 0xa8 ? "\\L" : "\\P", f);
			p += 2;
		} else {
			fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void put_value(FILE *f, const struct stork_config *c, const struct key *k)
{
	const void *p = field(c, k);
	char num[64];

	switch (k->type) {
	case K_STR:
	case K_NAME:
		if (k->flags & REDACT) {
			char shown[512];

			url_redact(*(char *const *)p ? *(char *const *)p : "", shown, sizeof shown);
			put_quoted(f, shown);
			break;
		}
		put_quoted(f, *(char *const *)p ? *(char *const *)p : "");
		break;
	case K_AUTO_INT:
		if (*(const int *)p == 0) {
			fputs("auto", f);
			break;
		}
		/* fall through */
	case K_INT:
		fprintf(f, "%d", *(const int *)p);
		break;
	case K_U64:
		fprintf(f, "%" PRIu64, *(const uint64_t *)p);
		break;
	case K_DOUBLE:
		format_double(*(const double *)p, num, sizeof num);
		fputs(num, f);
		break;
	case K_BOOL:
		fputs(*(const bool *)p ? "true" : "false", f);
		break;
	case K_ENUM:
		for (int i = 0; k->names[i].name; i++)
			if (k->names[i].value == *(const int *)p)
				fputs(k->names[i].name, f);
		break;
	case K_GLOBS: {
		const struct stork_globs *g = p;

		fputc('[', f);
		for (size_t i = 0; i < g->n; i++) {
			char shown[4096];

			if (i)
				fputs(", ", f);
			if (k->flags & REDACT)
				url_public(g->v[i], shown, sizeof shown);
			put_quoted(f, k->flags & REDACT ? shown : g->v[i]);
		}
		fputc(']', f);
		break;
	}
	}
}

static int write_yaml(const struct stork_config *c, FILE *f, int comments)
{
	const char *section = "";
	size_t sl = 0;

	if (comments)
		fputs("# Resolved Stork configuration: every key, defaults filled in.\n"
		      "# See stork.yaml(5) for the meaning of each key.\n", f);
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		const char *dot = strchr(k->path, '.');

		if ((size_t)(dot - k->path) != sl || strncmp(k->path, section, sl)) {
			section = k->path;
			sl = (size_t)(dot - k->path);
			fprintf(f, "%.*s:\n", (int)sl, section);
		}
		fprintf(f, "  %s: ", dot + 1);
		put_value(f, c, k);
		if (comments)
			fprintf(f, "  # %s", k->help);
		fputc('\n', f);
	}
	return ferror(f) ? -1 : 0;
}

int config_write_yaml(const struct stork_config *c, FILE *f)
{
	if (write_yaml(c, f, 1) < 0)
		return -1;
	return fflush(f) == 0 ? 0 : -1;
}

static char *to_yaml(const struct stork_config *c, int comments)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (write_yaml(c, f, comments) < 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *config_to_yaml(const struct stork_config *c)
{
	return to_yaml(c, 1);
}

/* ------------------------------------------------------- equality, hash */

bool config_equal(const struct stork_config *a, const struct stork_config *b)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		const void *pa = field(a, k), *pb = field(b, k);

		switch (k->type) {
		case K_STR:
		case K_NAME:
			if (strcmp(*(char *const *)pa, *(char *const *)pb))
				return false;
			break;
		case K_INT:
		case K_AUTO_INT:
		case K_ENUM:
			if (*(const int *)pa != *(const int *)pb)
				return false;
			break;
		case K_U64:
			if (*(const uint64_t *)pa != *(const uint64_t *)pb)
				return false;
			break;
		case K_DOUBLE:
			if (memcmp(pa, pb, sizeof(double)))
				return false;
			break;
		case K_BOOL:
			if (*(const bool *)pa != *(const bool *)pb)
				return false;
			break;
		case K_GLOBS: {
			const struct stork_globs *ga = pa, *gb = pb;

			if (ga->n != gb->n)
				return false;
			for (size_t j = 0; j < ga->n; j++)
				if (strcmp(ga->v[j], gb->v[j]))
					return false;
			break;
		}
		}
	}
	return true;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

uint64_t config_hash(const struct stork_config *c)
{
	char *text = to_yaml(c, 0);
	uint64_t h;

	if (!text)
		return 0;
	h = fnv1a(text, FNV_OFFSET);
	free(text);
	return h;
}

uint64_t config_model_hash(const struct stork_config *c)
{
	char text[512];
	int n;

	n = snprintf(text, sizeof text,
		     "layers=%d heads=%d channels=%d max_seq_len=%d vocab_size=%d padded_vocab_size=%d",
		     c->model.layers, c->model.heads, c->model.channels, c->model.max_seq_len,
		     c->model.vocab_size, c->model.padded_vocab_size);
	/* GPT-2's text stays what it was: its runs' hashes do not change */
	if (c->model.arch == STORK_ARCH_LLAMA)
		snprintf(text + n, sizeof text - (size_t)n,
			 " arch=llama kv_heads=%d intermediate_size=%d tie=%d eps=%g theta=%g "
			 "rope=%g,%g,%g,%d", c->model.kv_heads, c->model.intermediate_size,
			 c->model.tie_embeddings, c->model.rms_norm_eps, c->model.rope_theta,
			 c->model.rope_scaling_factor, c->model.rope_low_freq_factor,
			 c->model.rope_high_freq_factor, c->model.rope_original_max_positions);
	return fnv1a(text, FNV_OFFSET);
}

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
