/*
 * lib/config/config_validate.c - a loaded configuration checked as a
 * whole: what one key alone cannot say (sizes that divide, an
 * architecture's keys, data URLs, stage lists), and which keys differ from
 * their defaults.
 */
#include "config.h"
#include "lib/config/stork_config.h"
#include "lib/config/config_keys.h"
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

/* ------------------------------------------------------------ validation */

/* Where key got its value; an override's origin quotes the value, a password with it. */
static const char *where(const struct stork_config *c, const char *key)
{
	return strncmp(config_origin(c, key), "override", 8) ? config_origin(c, key) :
							       "an override (--set)";
}

/*
 * A data URL must name a host (a shard staged from "https://?x" would have
 * no name), and credentials never come from the YAML: a URL with
 * user:password@ is refused.
 */
static int check_data_urls(const struct stork_config *c, const char *key,
			   const struct stork_globs *g, char *err, size_t errlen)
{
	for (size_t i = 0; i < g->n; i++) {
		const char *end, *host = url_host(g->v[i], &end);
		char shown[512];

		if (host && host == end) {
			url_public(g->v[i], shown, sizeof shown);
			return config_fail(err, errlen, "%s: %s: %s has no host", where(c, key), key, shown);
		}
		if (!url_has_userinfo(g->v[i]))
			continue;
		url_public(g->v[i], shown, sizeof shown);
		return config_fail(err, errlen, "%s: %s: %s carries a user and password; credentials do not "
			    "belong in the configuration: use data.netrc or data.token_env",
			    where(c, key), key, shown);
	}
	return 0;
}


/* Key path's value as the resolved YAML writes it, or NULL (memory). */
static char *value_text(const struct stork_config *c, const char *path)
{
	int i = config_key_index(path, strlen(path));
	char *text = NULL;
	size_t len = 0;
	FILE *f = i >= 0 ? open_memstream(&text, &len) : NULL;

	if (!f)
		return NULL;
	config_put_value(f, c, &config_keys[i]);
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
				return config_fail(err, errlen, "%s: %s is a setting of model.arch: llama; "
					    "model.arch is gpt2 (%s)", config_origin(c, llama_keys[i]),
					    llama_keys[i], config_origin(c, "model.arch"));
		return 0;
	}
	if (c->model.kv_heads == 0)
		c->model.kv_heads = c->model.heads;
	if (c->model.heads % c->model.kv_heads)
		return config_fail(err, errlen, "%s: model.kv_heads: %d does not divide model.heads = %d (%s); "
			    "each key-value head serves a whole group of query heads",
			    config_origin(c, "model.kv_heads"), c->model.kv_heads, c->model.heads,
			    config_origin(c, "model.heads"));
	if (c->model.intermediate_size == 0) /* Meta's: 2/3 of 4C, up to a multiple of 256 */
		c->model.intermediate_size = (int)((8LL * c->model.channels / 3 + 255) / 256 * 256);
	if ((c->model.channels / c->model.heads) % 2)
		return config_fail(err, errlen, "%s: model.heads: %d heads of model.channels = %d are heads of "
			    "%d, an odd size: rotary positions turn pairs of dimensions",
			    config_origin(c, "model.heads"), c->model.heads, c->model.channels,
			    c->model.channels / c->model.heads);
	if (c->model.rope_scaling_factor > 0 &&
	    c->model.rope_high_freq_factor <= c->model.rope_low_freq_factor)
		return config_fail(err, errlen, "%s: model.rope_high_freq_factor: %g is not above "
			    "model.rope_low_freq_factor = %g", config_origin(c, "model.rope_high_freq_factor"),
			    c->model.rope_high_freq_factor, c->model.rope_low_freq_factor);
	if (c->model.kv_heads % c->parallel.tensor)
		return config_fail(err, errlen, "%s: parallel.tensor: %d does not divide model.kv_heads = %d (%s); "
			    "each tensor-parallel rank takes whole groups (%d query heads per key-value head)",
			    config_origin(c, "parallel.tensor"), c->parallel.tensor, c->model.kv_heads,
			    config_origin(c, "model.kv_heads"), c->model.heads / c->model.kv_heads);
	if (c->model.intermediate_size % c->parallel.tensor)
		return config_fail(err, errlen, "%s: parallel.tensor: %d does not divide model.intermediate_size = %d",
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
		return config_fail(err, errlen, "%s: model.heads: %d does not divide model.channels = %d (%s); "
			    "choose heads that divide channels", config_origin(c, "model.heads"),
			    c->model.heads, c->model.channels, config_origin(c, "model.channels"));
	if (c->model.padded_vocab_size == 0)
		c->model.padded_vocab_size = (int)(((long long)c->model.vocab_size + 127) / 128 * 128);
	if (c->model.padded_vocab_size < c->model.vocab_size)
		return config_fail(err, errlen, "%s: model.padded_vocab_size: %d is less than model.vocab_size = %d (%s); "
			    "use auto or a value >= vocab_size", config_origin(c, "model.padded_vocab_size"),
			    c->model.padded_vocab_size, c->model.vocab_size, config_origin(c, "model.vocab_size"));
	if (c->train.seq_len > c->model.max_seq_len)
		return config_fail(err, errlen, "%s: train.seq_len: %d exceeds model.max_seq_len = %d (%s)",
			    config_origin(c, "train.seq_len"), c->train.seq_len, c->model.max_seq_len,
			    config_origin(c, "model.max_seq_len"));
	/* the engine counts a batch's tokens (and indexes its activations per
	 * token) in int: a batch of more than 2^31-1 tokens is refused here
	 * rather than wrapped around there */
	if ((long long)c->train.batch_size * c->train.seq_len > INT_MAX)
		return config_fail(err, errlen, "%s: train.batch_size: %d sequences of train.seq_len %d (%s) "
			    "are %lld tokens per micro-step, more than %d; use a smaller batch and "
			    "train.grad_accum", config_origin(c, "train.batch_size"), c->train.batch_size,
			    c->train.seq_len, config_origin(c, "train.seq_len"),
			    (long long)c->train.batch_size * c->train.seq_len, INT_MAX);
	if (strcmp(c->parallel.stage_split, "params") && strcmp(c->parallel.stage_split, "compute") &&
	    !stage_list_ok(c->parallel.stage_split, c->parallel.pipeline))
		return config_fail(err, errlen, "%s: parallel.stage_split: '%s' is neither params, compute nor "
			    "a list of %d layer counts, one per stage of parallel.pipeline (\"5,7\")",
			    config_origin(c, "parallel.stage_split"), c->parallel.stage_split,
			    c->parallel.pipeline);
	if (c->checkpoint.local_dir[0] && c->checkpoint.local_dir[0] != '/' &&
	    strcmp(c->checkpoint.local_dir, "auto"))
		return config_fail(err, errlen, "%s: checkpoint.local_dir: '%s' is neither auto nor an absolute "
			    "path (a node-local directory, the same path on every node)",
			    config_origin(c, "checkpoint.local_dir"), c->checkpoint.local_dir);
	if (c->checkpoint.every == CHECKPOINT_EVERY_AUTO && c->checkpoint.every_minutes > 0)
		return config_fail(err, errlen, "%s: checkpoint.every_minutes: %g, and checkpoint.every is "
			    "auto (%s), which chooses the wall time between checkpoints itself: set one "
			    "of them", config_origin(c, "checkpoint.every_minutes"),
			    c->checkpoint.every_minutes, config_origin(c, "checkpoint.every"));
	if (c->checkpoint.every != CHECKPOINT_EVERY_AUTO &&
	    config_differs_from_default(c, "checkpoint.mtbf_hours"))
		return config_fail(err, errlen, "%s: checkpoint.mtbf_hours is read only with "
			    "checkpoint.every: auto (it is %d, %s)", config_origin(c, "checkpoint.mtbf_hours"),
			    c->checkpoint.every, config_origin(c, "checkpoint.every"));
	if (c->restart.in_place && c->program.command.n)
		return config_fail(err, errlen, "%s: restart.in_place: a run of a program (program.command) "
			    "cannot go on without a lost node: only the engine keeps its replicas' state "
			    "itself; use restart.max_restarts", config_origin(c, "restart.in_place"));
	if (c->metrics.prometheus_dir && c->metrics.prometheus_dir[0] && c->program.command.n)
		return config_fail(err, errlen, "%s: metrics.prometheus_dir: a run of a program "
			    "(program.command) has no figures of the engine's to export; the program "
			    "can write its own .prom file", config_origin(c, "metrics.prometheus_dir"));
	if (c->parallel.zero >= 2 && c->restart.in_place)
		return config_fail(err, errlen, "%s: parallel.zero %d with restart.in_place (%s): a "
			    "replica lost in place takes parts no survivor keeps whole; use "
			    "parallel.zero: 1 (which keeps a copy of each part) or restart.max_restarts",
			    config_origin(c, "parallel.zero"), c->parallel.zero,
			    config_origin(c, "restart.in_place"));
	if (c->restart.spares && !c->restart.in_place)
		return config_fail(err, errlen, "%s: restart.spares: %d nodes would wait for a loss that "
			    "restart.in_place (%s) does not mend; set restart.in_place: true",
			    config_origin(c, "restart.spares"), c->restart.spares,
			    config_origin(c, "restart.in_place"));
	if (!c->restart.in_place && config_differs_from_default(c, "restart.rejoin"))
		return config_fail(err, errlen, "%s: restart.rejoin is read only with restart.in_place: "
			    "true (%s): a lost node rejoins a run that went on without it",
			    config_origin(c, "restart.rejoin"), config_origin(c, "restart.in_place"));
	if (c->train.spike_min_steps > c->train.spike_window)
		return config_fail(err, errlen, "%s: train.spike_min_steps: %d exceeds train.spike_window = %d "
			    "(%s): the window could never hold enough steps to judge one",
			    config_origin(c, "train.spike_min_steps"), c->train.spike_min_steps,
			    c->train.spike_window, config_origin(c, "train.spike_window"));
	if (c->train.min_lr > c->train.lr)
		return config_fail(err, errlen, "%s: train.min_lr: %g exceeds train.lr = %g (%s)",
			    config_origin(c, "train.min_lr"), c->train.min_lr, c->train.lr, config_origin(c, "train.lr"));
	if (c->model.heads % c->parallel.tensor)
		return config_fail(err, errlen, "%s: parallel.tensor: %d does not divide model.heads = %d (%s); "
			    "each tensor-parallel rank takes whole heads", config_origin(c, "parallel.tensor"),
			    c->parallel.tensor, c->model.heads, config_origin(c, "model.heads"));
	if (c->model.padded_vocab_size % c->parallel.tensor)
		return config_fail(err, errlen, "%s: parallel.tensor: %d does not divide model.padded_vocab_size = %d; "
			    "each tensor-parallel rank takes an equal slice of the vocabulary",
			    config_origin(c, "parallel.tensor"), c->parallel.tensor, c->model.padded_vocab_size);
	if (!c->model.init_from[0] && validate_arch(c, err, errlen) < 0)
		return -1;
	if (c->parallel.pipeline > c->model.layers)
		return config_fail(err, errlen, "%s: parallel.pipeline: %d stages for model.layers = %d (%s); "
			    "every stage needs at least one layer", config_origin(c, "parallel.pipeline"),
			    c->parallel.pipeline, c->model.layers, config_origin(c, "model.layers"));
	if (c->train.grad_accum < c->parallel.pipeline)
		return config_fail(err, errlen, "%s: train.grad_accum: %d micro-batches for parallel.pipeline = %d stages (%s); "
			    "every stage needs a micro-batch in flight: use train.grad_accum >= %d "
			    "(the idle share of a step is (P-1)/(m+P-1), so 4 x %d keeps it under 20%%)",
			    config_origin(c, "train.grad_accum"), c->train.grad_accum, c->parallel.pipeline,
			    config_origin(c, "parallel.pipeline"), c->parallel.pipeline, c->parallel.pipeline);
	return 0;
}
