/*
 * daemon/engine/parallel/layout.c - see layout.h.
 */
#include "config.h"
#include "daemon/engine/parallel/layout.h"

#include "lib/comm/comm.h"
#include "daemon/engine/model/hf_model.h"
#include "lib/config/stork_config.h"
#include "kernels/device.h"

#include <stdio.h>
#include <stdlib.h>
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

/* The layers [*first, *last) of stage s of P, balanced by parameter count. */
static void split_by_params(const struct gpt2_config *c, int P, int s, int *first, int *last)
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

/*
 * Forward FLOPs per token of one block and of the last stage's head, for
 * stages balanced by compute: a block's matrix products (2 per parameter)
 * and its causal attention (scores and the weighted sum, 2 T C); the head's
 * classifier (2 C V) and softmax. The backward pass is about twice the
 * forward for both, so the ratio holds for the whole step.
 */
static void compute_costs(const struct gpt2_config *c, int T, double *block, double *head)
{
	double C = c->channels, V = c->padded_vocab_size;

	*block = 2.0 * block_params(c) + 2.0 * T * C;
	*head = 2.0 * C * V + 5.0 * V;
}

/*
 * Stage s's layers when the most expensive stage is as cheap as it can be
 * (contiguous layers, every stage at least one; the last stage carries the
 * head): the smallest such maximum by dynamic programming over the
 * boundaries, then the boundaries themselves, leftmost first.
 */
static void split_by_compute(const struct gpt2_config *c, int P, int T, int s, int *first,
			     int *last)
{
	int L = c->num_layers;
	double block, head, best[65][257];
	int from[65][257];

	compute_costs(c, T, &block, &head);
	/* best[k][n]: the cheapest maximum over k stages holding the first n layers */
	for (int k = 0; k <= P; k++)
		for (int n = 0; n <= L; n++)
			best[k][n] = k == 0 && n == 0 ? 0 : 1e300;
	for (int k = 1; k <= P; k++)
		for (int n = k; n <= L - (P - k); n++)
			for (int m = k - 1; m < n; m++) {
				double cost = (n - m) * block + (k == P ? head : 0);
				double worst = best[k - 1][m] > cost ? best[k - 1][m] : cost;

				if (worst < best[k][n]) {
					best[k][n] = worst;
					from[k][n] = m;
				}
			}
	{
		int b[65];

		b[P] = L;
		for (int k = P; k > 0; k--)
			b[k - 1] = from[k][b[k]];
		*first = b[s];
		*last = b[s + 1];
	}
}

/* "5,7": layers per stage. The count of numbers read, or -1 when malformed. */
static int parse_split_list(const char *text, int *n, int max)
{
	int k = 0;

	while (*text) {
		char *end;
		long v = strtol(text, &end, 10);

		if (end == text || v < 1 || v > 100000 || k == max)
			return -1;
		n[k++] = (int)v;
		text = end;
		while (*text == ' ')
			text++;
		if (*text == ',')
			text++;
		else if (*text)
			return -1;
		while (*text == ' ')
			text++;
	}
	return k;
}

int layout_check_split(const struct gpt2_config *c, int P, const char *split, char *err,
		       size_t errlen)
{
	int n[65], k, sum = 0;

	if (!split || !strcmp(split, "params") || !strcmp(split, "compute")) {
		if (split && !strcmp(split, "compute") && (P > 64 || c->num_layers > 256)) {
			snprintf(err, errlen, "parallel.stage_split: compute balances at most 64 stages "
				 "of 256 layers; give the layers per stage as a list");
			return -1;
		}
		return 0;
	}
	k = parse_split_list(split, n, 65);
	for (int i = 0; i < k; i++)
		sum += n[i];
	if (k != P || sum != c->num_layers) {
		snprintf(err, errlen, "parallel.stage_split: '%s' %s; give params, compute or %d "
			 "layer counts, one per stage, that add up to model.layers (%d)", split,
			 k < 0 ? "is not a list of layer counts" :
			 k != P ? "does not give one count per stage of parallel.pipeline" :
				  "does not add up to model.layers", P, c->num_layers);
		return -1;
	}
	return 0;
}

void layout_stage_layers(const struct gpt2_config *c, int P, const char *split, int seq_len,
			 int s, int *first, int *last)
{
	int n[65];

	if (split && !strcmp(split, "compute")) {
		split_by_compute(c, P, seq_len, s, first, last);
	} else if (split && strcmp(split, "params") && parse_split_list(split, n, 65) == P) {
		*first = 0;
		for (int i = 0; i < s; i++)
			*first += n[i];
		*last = *first + n[s];
	} else {
		split_by_params(c, P, s, first, last);
	}
}

int layout_make(struct par_layout *l, const struct gpt2_config *c, int world, int tensor,
		int pipeline, int zero, const char *split, int seq_len, int rank, char *err,
		size_t errlen)
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
	if (layout_check_split(c, pipeline, split, err, errlen) < 0)
		return -1;
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
	layout_stage_layers(c, pipeline, split, seq_len, l->stage, &l->first_layer, &l->last_layer);
	return 0;
}

void layout_describe(const struct par_layout *l, char *buf, size_t len)
{
	char zero[16] = "";

	if (l->zero)
		snprintf(zero, sizeof zero, " (ZeRO-%d)", l->zero);
	snprintf(buf, len, "dp %d x tp %d x pp %d%s; rank %d = dp %d, tp %d, stage %d (layers %d-%d)",
		 l->dp, l->tp, l->pp, zero, l->rank, l->dp_rank, l->tp_rank, l->stage,
		 l->first_layer, l->last_layer - 1);
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
	case STORK_PRECISION_AUTO: /* fp32 on CPUs; layout_gpu_precision on GPUs */
		break;
	}
	return OPS_FP32;
}

enum ops_precision layout_gpu_precision(const struct stork_config *cfg)
{
	char err[256];

	if (cfg->train.precision != STORK_PRECISION_AUTO)
		return layout_precision(cfg);
	return kernels_cuda_check_precision(OPS_BF16, err, sizeof err) < 0 ? OPS_FP32 : OPS_BF16;
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
