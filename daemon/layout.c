/*
 * daemon/layout.c - see layout.h.
 */
#include "config.h"
#include "daemon/layout.h"

#include "lib/comm/comm.h"
#include "daemon/hf_model.h"
#include "lib/stork_config.h"

#include <stdio.h>
#include <string.h>

/*
 * model.init_from gives the model's shape: a shape key set to another
 * value than the file's would be ignored, so it is refused, naming both.
 */
static int check_shape_keys(const struct stork_config *cfg, const struct gpt2_config *mc,
			    char *err, size_t errlen)
{
	const struct {
		const char *key;
		long long set, file;
	} k[] = {
		{ "model.arch", cfg->model.arch, mc->arch },
		{ "model.layers", cfg->model.layers, mc->num_layers },
		{ "model.heads", cfg->model.heads, mc->num_heads },
		{ "model.channels", cfg->model.channels, mc->channels },
		{ "model.max_seq_len", cfg->model.max_seq_len, mc->max_seq_len },
		{ "model.vocab_size", cfg->model.vocab_size, mc->vocab_size },
		{ "model.kv_heads", cfg->model.kv_heads, model_kv_heads(mc) },
		{ "model.intermediate_size", cfg->model.intermediate_size, model_mlp_width(mc) },
		{ "model.tie_embeddings", cfg->model.tie_embeddings, model_tied(mc) },
	};

	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
		if (k[i].set != k[i].file && config_differs_from_default(cfg, k[i].key)) {
			snprintf(err, errlen,
				 "%s: %s is %lld, but model.init_from %s has %lld: the model's shape "
				 "is the file's; remove %s or make it agree", config_origin(cfg, k[i].key),
				 k[i].key, k[i].set, cfg->model.init_from, k[i].file, k[i].key);
			return -2;
		}
	return 0;
}

int layout_model_shape(const struct stork_config *cfg, struct gpt2_config *mc, char *err,
		       size_t errlen)
{
	const typeof(cfg->model) *m = &cfg->model;

	*mc = (struct gpt2_config){
		.max_seq_len = m->max_seq_len, .vocab_size = m->vocab_size,
		.padded_vocab_size = m->padded_vocab_size, .num_layers = m->layers,
		.num_heads = m->heads, .channels = m->channels,
	};
	if (m->arch == STORK_ARCH_LLAMA) {
		mc->arch = MODEL_LLAMA;
		mc->kv_heads = m->kv_heads;
		mc->intermediate = m->intermediate_size;
		mc->untied = !m->tie_embeddings;
		mc->norm_eps = (float)m->rms_norm_eps;
		mc->rope_theta = (float)m->rope_theta;
		mc->rope_factor = (float)m->rope_scaling_factor;
		mc->rope_low_freq_factor = (float)m->rope_low_freq_factor;
		mc->rope_high_freq_factor = (float)m->rope_high_freq_factor;
		mc->rope_original_max_positions = m->rope_original_max_positions;
	}
	if (!m->init_from[0])
		return 0;
	if (hf_is_model_dir(m->init_from) ? hf_model_config(m->init_from, mc, err, errlen) :
					    gpt2_read_config(m->init_from, mc, err, errlen))
		return -1;
	return check_shape_keys(cfg, mc, err, errlen);
}

/* Parameters of tensor t in the whole model. */
static double tensor_params(const struct gpt2_config *c, int t)
{
	return (double)gpt2_chunk_floats(c, t) * (gpt2_tensor_per_layer(t) ? c->num_layers : 1);
}

/* Parameters of one block. */
static double block_params(const struct gpt2_config *c)
{
	double n = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		if (gpt2_tensor_per_layer(t))
			n += (double)gpt2_chunk_floats(c, t);
	return n;
}

void layout_stage_layers(const struct gpt2_config *c, int P, int s, int *first, int *last)
{
	double lp = block_params(c);
	double norm = tensor_params(c, GPT2_LNFW) + tensor_params(c, GPT2_LNFB);
	double head = norm + (model_tied(c) ? tensor_params(c, GPT2_WTE) :
					      tensor_params(c, GPT2_LMHEAD)); /* last stage */
	double embed = tensor_params(c, GPT2_WTE) + tensor_params(c, GPT2_WPE); /* first */
	double total = c->num_layers * lp + embed + (P > 1 ? head : norm);
	int L = c->num_layers, prev = 0, b = 0;

	/* boundary k: where the running parameter count reaches k/P of the total */
	for (int k = 1; k <= s + 1; k++) {
		prev = b;
		if (k == P) {
			b = L;
			break;
		}
		b = (int)((k * total / P - embed) / lp + 0.5);
		if (b < prev + 1)
			b = prev + 1;
		if (b > L - (P - k))
			b = L - (P - k);
	}
	*first = prev;
	*last = b;
}

int layout_make(struct par_layout *l, const struct gpt2_config *c, int world, int tensor,
		int pipeline, int zero, int rank, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	if (world % (tensor * pipeline)) {
		snprintf(err, errlen,
			 "parallel.tensor (%d) x parallel.pipeline (%d) = %d does not divide the %d "
			 "ranks of the run; use a world size that is a multiple of %d, or other values",
			 tensor, pipeline, tensor * pipeline, world, tensor * pipeline);
		return -1;
	}
	if (c->num_heads % tensor || c->padded_vocab_size % tensor) {
		snprintf(err, errlen,
			 "parallel.tensor (%d) must divide model.heads (%d) and model.padded_vocab_size (%d)",
			 tensor, c->num_heads, c->padded_vocab_size);
		return -1;
	}
	{
		struct gpt2_shard s = { .tp_rank = 0, .tp_size = tensor, .first_layer = 0,
					.last_layer = c->num_layers };
		char why[200];

		if (gpt2_shard_check(c, &s, why, sizeof why)) {
			snprintf(err, errlen, "parallel.tensor (%d): %s", tensor, why);
			return -1;
		}
	}
	if (pipeline > c->num_layers) {
		snprintf(err, errlen, "parallel.pipeline (%d) exceeds model.layers (%d): every stage needs a layer",
			 pipeline, c->num_layers);
		return -1;
	}
	l->world = world;
	l->tp = tensor;
	l->pp = pipeline;
	l->dp = world / (tensor * pipeline);
	l->zero = zero;
	l->tied = model_tied(c);
	l->rank = rank;
	l->tp_rank = rank % tensor;
	l->dp_rank = rank / tensor % l->dp;
	l->stage = rank / (tensor * l->dp);
	layout_stage_layers(c, pipeline, l->stage, &l->first_layer, &l->last_layer);
	return 0;
}

void layout_describe(const struct par_layout *l, char *buf, size_t len)
{
	snprintf(buf, len, "dp %d x tp %d x pp %d%s; rank %d = dp %d, tp %d, stage %d (layers %d-%d)",
		 l->dp, l->tp, l->pp, l->zero ? " (ZeRO-1)" : "", l->rank, l->dp_rank, l->tp_rank,
		 l->stage, l->first_layer, l->last_layer - 1);
}

void layout_shard(const struct par_layout *l, struct gpt2_shard *s)
{
	*s = (struct gpt2_shard){ .tp_rank = l->tp_rank, .tp_size = l->tp,
				  .first_layer = l->first_layer, .last_layer = l->last_layer };
}

/*
 * Split world into groups of `color` ordered by key; a group of one becomes
 * NULL, a group of every rank (`whole`: keys in rank order) the world itself.
 */
static int split(struct comm *world, int whole, int color, int key, struct comm **out)
{
	int rc;

	if (whole) {
		*out = comm_size(world) > 1 ? world : NULL;
		return 0;
	}
	rc = comm_split(world, color, key, out);

	if (rc == 0 && *out && comm_size(*out) == 1) {
		comm_free(*out);
		*out = NULL;
	}
	return rc;
}

enum gpt2_recompute layout_recompute(const struct stork_config *cfg)
{
	switch (cfg->train.recompute) {
	case STORK_RECOMPUTE_GELU:
		return GPT2_RECOMPUTE_GELU;
	case STORK_RECOMPUTE_BLOCK:
		return GPT2_RECOMPUTE_BLOCK;
	case STORK_RECOMPUTE_NONE:
		break;
	}
	return GPT2_RECOMPUTE_NONE;
}

enum ops_precision layout_precision(const struct stork_config *cfg)
{
	switch (cfg->train.precision) {
	case STORK_PRECISION_TF32:
		return OPS_TF32;
	case STORK_PRECISION_BF16:
		return OPS_BF16;
	case STORK_PRECISION_FP32:
		break;
	}
	return OPS_FP32;
}

int layout_groups(const struct par_layout *l, struct comm *world, struct par_groups *g)
{
	int D = l->dp, T = l->tp, P = l->pp, end = l->stage == 0 || l->stage == P - 1;
	int rc;

	memset(g, 0, sizeof *g);
	g->world = world;
	if ((rc = split(world, T == l->world, l->stage * D + l->dp_rank, l->tp_rank, &g->tp)) ||
	    (rc = split(world, D == l->world, l->stage * T + l->tp_rank, l->dp_rank, &g->dp)) ||
	    (rc = split(world, P == l->world, l->dp_rank * T + l->tp_rank, l->stage, &g->pp)) ||
	    (rc = split(world, D == 1, l->dp_rank, l->rank, &g->mp)) ||
	    (rc = split(world, 0,
			P > 1 && end && l->tied ? l->dp_rank * T + l->tp_rank : COMM_UNDEFINED,
			l->stage, &g->emb))) {
		layout_groups_free(g);
		return rc;
	}
	/* members as global ranks, rank = (stage * D + dp) * T + tp, for a hang's report */
	if (g->tp != world)
		comm_describe(g->tp, "tp", (l->stage * D + l->dp_rank) * T, T, 0);
	if (g->dp != world)
		comm_describe(g->dp, "dp", l->stage * D * T + l->tp_rank, 1, T);
	if (g->pp != world)
		comm_describe(g->pp, "pp", l->dp_rank * T + l->tp_rank, 1, D * T);
	if (g->mp != world)
		comm_describe(g->mp, "replica", l->dp_rank * T, T, D * T);
	comm_describe(g->emb, "tied-embedding", l->dp_rank * T + l->tp_rank, 1, (P - 1) * D * T);
	return 0;
}

void layout_groups_free(struct par_groups *g)
{
	struct comm *own[] = { g->tp, g->dp, g->pp, g->mp, g->emb };

	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
		if (own[i] != g->world)
			comm_free(own[i]);
	memset(g, 0, sizeof *g);
}
