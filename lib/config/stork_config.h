/*
 * lib/config/stork_config.h - stork.yaml: the one configuration of a run.
 *
 * (Not named config.h: that name belongs to the header configure makes.)
 *
 * A run is described by one YAML file (documented key by key in
 * stork.yaml(5)) plus command-line overrides such as "train.steps=50". This
 * module turns them into a plain struct in which every key has a value:
 *
 *     struct stork_config c;
 *     if (config_load(&c, "train.yaml", err, sizeof err) < 0 ||
 *         config_set(&c, "train.steps=50", err, sizeof err) < 0 ||
 *         config_validate(&c, err, sizeof err) < 0)
 *             fail with err and exit code STORK_EXIT_CONFIG;
 *     ...
 *     config_free(&c);
 *
 * Parsing is strict: unknown keys, duplicate keys, values of the wrong type
 * (a quoted "4" is a string, not an integer), out-of-range values and
 * malformed YAML are errors whose message starts with "FILE:LINE:COLUMN:"
 * (1-based) or "override 'KEY=VALUE':", then names the key path
 * (e.g. "train.batch_size") and the accepted values.
 *
 * config_validate() does the checks that involve several keys (heads divide
 * channels, seq_len <= max_seq_len, ...) and fills in the derived defaults
 * (model.padded_vocab_size). After it, config_write_yaml() prints the
 * resolved configuration; loading that output gives an equal struct, URLs
 * aside: they are written without their secrets (a web hook's path, a
 * data URL's query: stork.yaml(5)), and the text they leave reads back to
 * itself.
 */
#ifndef STORK_STORK_CONFIG_H
#define STORK_STORK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum stork_lr_schedule {
	STORK_LR_CONSTANT = 0,
	STORK_LR_COSINE = 1,
};

/* train.precision: the arithmetic of the linear layers' matrix products. */
enum stork_precision {
	STORK_PRECISION_FP32 = 0,
	STORK_PRECISION_TF32 = 1, /* fp32 storage, TF32 tensor-core products (10-bit mantissa inputs) */
	STORK_PRECISION_BF16 = 2, /* fp32 storage, products of bf16-rounded inputs summed in fp32 */
	STORK_PRECISION_AUTO = 3, /* bf16 where every rank's GPU has bf16 tensor cores, else fp32 */
};

/* train.recompute: what the backward pass makes again instead of keeping from the forward pass. */
enum stork_arch {
	STORK_ARCH_GPT2 = 0,
	STORK_ARCH_LLAMA = 1,
};

enum stork_recompute {
	STORK_RECOMPUTE_NONE = 0,  /* keep every activation */
	STORK_RECOMPUTE_GELU = 1,  /* recompute the MLP's GELU */
	STORK_RECOMPUTE_BLOCK = 2, /* keep each layer's input, recompute the layer */
};

/* train.on_nonfinite: what a non-finite loss or gradient norm does. */
enum stork_nonfinite {
	STORK_NONFINITE_STOP = 0, /* end the run, reason diverged (exit 14), nothing checkpointed */
	STORK_NONFINITE_SKIP = 1, /* drop that step's update and go on */
	STORK_NONFINITE_ROLLBACK = 2, /* reload the latest checkpoint, skip that step's batch */
};

/* preflight.enabled: whether the probes run before the first step. */
enum stork_preflight {
	STORK_PREFLIGHT_AUTO = 0, /* in jobs of 2 or more nodes */
	STORK_PREFLIGHT_ON = 1,
	STORK_PREFLIGHT_OFF = 2,
	STORK_PREFLIGHT_ONLY = 3, /* on any node count, then stop: stork check --all */
};

/* train.on_spike: what a loss spike (daemon/engine/train/spike.h) does. */
#define STORK_SPIKE_WINDOW_MAX 1000 /* train.spike_window's largest value */
enum stork_spike {
	STORK_SPIKE_OFF = 0,      /* not looked for */
	STORK_SPIKE_WARN = 1,     /* said in the log, the metrics and the report; nothing changes */
	STORK_SPIKE_SKIP = 2,     /* drop that step's update (its batch is consumed) */
	STORK_SPIKE_ROLLBACK = 3, /* reload the latest checkpoint, skip that step's batch */
};

/* program.tee: whose output the launcher's own output repeats. */
enum stork_tee {
	STORK_TEE_RANK0 = 0, /* rank 0's lines */
	STORK_TEE_ALL = 1,   /* every rank's, prefixed with the rank */
	STORK_TEE_NONE = 2,  /* none: the rank logs only */
};

/* run.device: where a rank computes. */
enum stork_device {
	STORK_DEVICE_AUTO = 0, /* its GPU when it has one (and the build has CUDA), else the CPU */
	STORK_DEVICE_CPU = 1,
	STORK_DEVICE_CUDA = 2, /* its GPU, or a config error */
};

/* A list of glob patterns (data.train, data.val). */
struct stork_globs {
	char **v;
	size_t n;
};

struct stork_config {
	struct {
		char *name;                 /* run directory name prefix */
		char *dir;                  /* runs root, relative to the submit directory */
		double rendezvous_timeout;  /* seconds */
		char *resume_from;          /* checkpoint or run directory to start from; "" = none */
		enum stork_device device;   /* auto | cpu | cuda */
		double max_gpu_hours;       /* budget of the allocation to its limit; 0 = none */
		bool shared;                /* checkpoints and configuration readable by the group */
	} run;
	struct {
		char *init_from;            /* llm.c model file or Hugging Face directory; "" = build from the sizes */
		enum stork_arch arch;       /* gpt2 | llama */
		int layers;
		int heads;
		int channels;
		int max_seq_len;
		int vocab_size;
		int padded_vocab_size;      /* 0 = auto until config_validate() */
		uint64_t seed;
		/* llama only */
		int kv_heads;               /* 0 = auto (heads) until config_validate() */
		int intermediate_size;      /* 0 = auto until config_validate() */
		bool tie_embeddings;
		double rms_norm_eps;
		double rope_theta;
		double rope_scaling_factor; /* 0 = no rope scaling */
		double rope_low_freq_factor, rope_high_freq_factor;
		int rope_original_max_positions;
	} model;
	struct {
		struct stork_globs train;
		struct stork_globs val;
		bool shuffle;
		bool prefetch;
		char *stage_dir;            /* "" = $SLURM_TMPDIR or /tmp/stork-USER/JOB */
		char *sha256;               /* manifest of the staged shards; "" = none */
		char *ca_file;              /* "" = the system's CA store */
		char *netrc;                /* "" = ~/.netrc if any */
		char *token_env;            /* variable holding a bearer token; "" = none */
		int downloads;              /* parallel transfers per node */
		uint64_t max_stage_bytes;   /* the most a staged shard may have; 0 = its header's promise */
	} data;
	struct {
		int batch_size;             /* sequences per rank per micro-step */
		int seq_len;
		int grad_accum;
		int steps;
		double lr;
		enum stork_lr_schedule lr_schedule;
		enum stork_precision precision;
		enum stork_recompute recompute;
		bool fused;                 /* fused kernels (classifier; residual + LayerNorm) */
		enum stork_nonfinite on_nonfinite;
		int max_rollbacks;          /* shared by on_nonfinite and on_spike */
		enum stork_spike on_spike;
		int spike_window;           /* accepted steps the z-score looks back over */
		double spike_zscore;        /* standard deviations above the window's mean */
		int spike_min_steps;        /* window values before a step is judged */
		int spike_max_in_row;       /* spikes in a row after which the window starts again */
		int warmup_steps;
		double min_lr;
		double weight_decay;
		double beta1;
		double beta2;
		double eps;
		double grad_clip;           /* 0 = off */
		int val_every;              /* 0 = off */
		int val_batches;
		int log_every;
	} train;
	struct {
		int every;                  /* steps; 0 = only on preemption and at the end;
					     * CHECKPOINT_EVERY_AUTO: Young's interval */
		double every_minutes;       /* wall time between periodic ones; 0 = off */
		double mtbf_hours;          /* every auto: the mean time between failures */
		int keep;                   /* 0 = keep all */
		int keep_every;             /* steps of milestones kept beside keep; 0 = none */
		int max_failures;           /* periodic ones failing in a row before the run stops */
		bool async;                 /* periodic ones written in the background */
		char *local_dir;            /* node-local tier; "" = none, "auto" */
		int persist_every;          /* with local_dir: every Nth also to the run directory */
	} checkpoint;
	struct {
		int signal;                 /* SIGUSR1, SIGUSR2 or SIGTERM */
		double hang_timeout;        /* seconds; 0 = off */
		bool deadline_guard;        /* stop before the job's end without any signal */
		double deadline_lead;       /* seconds kept free before the end by the guard */
	} preempt;
	struct {
		int enabled;                /* enum stork_preflight */
		double tolerance;           /* fraction below the others' median that leaves a node out */
	} preflight;
	struct {
		int max_restarts;           /* storkd restarts inside the job after a failure */
		bool in_place;              /* survivors go on without a lost node (engine, dp >= 2) */
		double in_place_wait;       /* seconds the survivors wait for each other */
		int spares;                 /* the step's last launchers that wait to replace a lost node */
		bool rejoin;                /* in_place: a lost node's host gets a launcher again */
	} restart;
	struct {
		char *url;                  /* where run events are POSTed; "" = nowhere */
		struct stork_globs events;  /* started, preempted, restarted, failed, completed, cancelled */
		double timeout;             /* seconds per delivery attempt */
	} notify;
	struct {
		double sample_s;            /* seconds between telemetry samples */
		char *prometheus_dir;       /* a .prom file per node for node_exporter; "" = none */
		int tensorboard;            /* event files under RUN_DIR/tensorboard/ */
	} metrics;
	struct {
		int local_ranks;            /* 0 = auto */
		bool merge_tasks;           /* a host's tasks run as one launcher */
		int tensor;
		int pipeline;
		char *stage_split;          /* params, compute or "5,7" */
		int zero;                   /* 0 or 1 */
		bool overlap;               /* all-reduce gradients during the backward pass */
	} parallel;
	struct {
		struct stork_globs command; /* PROGRAM ARGS... (`stork run -- ...`); empty: the engine */
		enum stork_tee tee;
		int signal;                 /* sent to every rank to ask for a checkpoint and exit */
		double kill_grace;          /* seconds between TERM and KILL */
		double checkpoint_grace;    /* seconds the ranks get to save and exit; 0 = auto */
		bool pmix;                  /* serve PMIx to the ranks (MPI programs) */
	} program;

	/* Where each key got its value ("f.yaml:3:12", "override 'k=v'",
	 * NULL = default); used in messages. Private to lib/config/. */
	char **origin;
};

/* checkpoint.every auto: sqrt(2 x commit time x checkpoint.mtbf_hours) of wall time. */
#define CHECKPOINT_EVERY_AUTO (-1)

/* Fill c with the defaults of every key (nothing to free before). */
void config_init(struct stork_config *c);

/* Initialise c with the defaults, then read the YAML file at path over them.
 * Returns 0, or -1 with a message in err (which names the path when the file
 * cannot be read). Call config_free(c) afterwards in both cases. */
int config_load(struct stork_config *c, const char *path, char *err, size_t errlen);

/* Same as config_load, from a string; name is used in messages. */
int config_load_string(struct stork_config *c, const char *text, const char *name,
		       char *err, size_t errlen);

/* Apply one command-line override "section.key=value"; value is read as a
 * YAML flow value (e.g. "data.train=[a.bin, b.bin]") with the same checks as
 * in a file. Returns 0, or -1 with a message naming the override. */
int config_set(struct stork_config *c, const char *assignment, char *err, size_t errlen);

/* Cross-key checks and derived defaults; call after the last config_set().
 * Returns 0, or -1 with a message naming the keys and where they were set. */
int config_validate(struct stork_config *c, char *err, size_t errlen);

/* Print the resolved configuration (every key, comments included) as YAML
 * that config_load() reads back into an equal struct (URLs without their
 * secrets, see above). Returns 0 or -1 (write error, errno set). */
int config_write_yaml(const struct stork_config *c, FILE *f);

/* The same text in a malloc'd NUL-terminated string (NULL on ENOMEM). */
char *config_to_yaml(const struct stork_config *c);

/* The keys stork.yaml has ("train.steps", ...), for tests that must cover
 * every one: their number, and the i-th. */
size_t config_key_count(void);
const char *config_key_path(size_t i);

/* True when every key of a and b has the same value. */
bool config_equal(const struct stork_config *a, const struct stork_config *b);

/*
 * The keys whose values differ between was and now, but for those listed
 * in skip (NULL-terminated, may be NULL), as "\n  KEY: WAS -> NOW" lines
 * into buf. Returns how many differ.
 */
int config_differences(const struct stork_config *was, const struct stork_config *now,
		       const char *const *skip, char *buf, size_t len);

/* 64-bit FNV-1a of the resolved YAML text of every key (config_to_yaml
 * without comments): equal configurations, equal hashes, on every host. */
uint64_t config_hash(const struct stork_config *c);

/* 64-bit FNV-1a over the model's shape only: model.layers, heads, channels,
 * max_seq_len, vocab_size, padded_vocab_size. Checkpoints carry it so that a
 * checkpoint of another shape is recognised. Call after config_validate(). */
uint64_t config_model_hash(const struct stork_config *c);

/* Names of a preempt.signal value ("USR1", "USR2", "TERM") and of a
 * train.precision value ("fp32", "tf32"), for messages. */
const char *config_signal_name(int signo);
const char *config_precision_name(enum stork_precision p);

/* Release what c owns; c may then be loaded again. Safe on a zeroed struct. */
void config_free(struct stork_config *c);

/* Where key path got its value: "FILE:LINE:COLUMN", "--set", or "default". */
const char *config_origin(const struct stork_config *c, const char *path);

/*
 * Whether key path holds another value than its default (not where it was
 * set: the run directory's resolved copy of a configuration names every
 * key). 1 also for an unknown key.
 */
int config_differs_from_default(const struct stork_config *c, const char *path);

/*
 * The keys only the training engine reads (model, data, train, checkpoint,
 * parallel.tensor/pipeline/zero/overlap) that c sets itself (a file or an
 * override, not a default): "train.steps (f.yaml:3:3), ..." in buf.
 * Returns their number; a run of the user's own program refuses them.
 */
int config_engine_keys_set(const struct stork_config *c, char *buf, size_t len);

/* Whether key path is one of those only the training engine reads. */
bool config_key_is_engine(const char *path);

#endif
