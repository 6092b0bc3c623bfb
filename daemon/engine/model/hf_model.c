/*
 * daemon/engine/model/hf_model.c - see hf_model.h.
 *
 * One table ties the two layouts together: parts_of() says which Hugging
 * Face weights make up one layer's chunk of each model tensor, in the
 * model's row order ([out, in] rows; a vector's elements). Reading walks
 * it to fill a shard, writing walks it backwards to fill each weight.
 */
#include "config.h"
#include "daemon/engine/model/hf_model.h"

#include "daemon/engine/model/arch/arch.h"
#include "lib/formats/hf_config.h"
#include "lib/formats/hf_names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Rows [off, off + rows) of a Hugging Face weight, in the model's orientation. */
struct part {
	enum hf_kind kind;
	int64_t off, rows;
};

int hf_is_model_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The config.json of dir read into h, its path in path. */
static int read_hf(const char *dir, struct hf_config *h, char *path, size_t len, char *err,
		   size_t errlen)
{
	if ((size_t)snprintf(path, len, "%s/config.json", dir) >= len) {
		snprintf(err, errlen, "%.200s...: path too long", dir);
		return -1;
	}
	return hf_config_read(path, h, err, errlen);
}

/*
 * config.json's sizes against the model's limits (model.h), each under the
 * key the file gives it, before any size is computed from them: the
 * engine's own check (gpt2_config_check) would say the same in its words.
 */
static int hf_limits(const struct hf_config *h, const char *path, char *err, size_t errlen)
{
	bool gpt2 = h->arch != HF_LLAMA;
	const struct {
		const char *key;
		int value, max;
	} sizes[] = {
		{ gpt2 ? "n_embd" : "hidden_size", h->hidden_size, GPT2_MAX_CHANNELS },
		{ gpt2 ? "n_layer" : "num_hidden_layers", h->num_layers, GPT2_MAX_LAYERS },
		{ gpt2 ? "n_head" : "num_attention_heads", h->num_heads, GPT2_MAX_HEADS },
		{ gpt2 ? "n_head" : "num_key_value_heads", h->num_kv_heads, GPT2_MAX_HEADS },
		{ gpt2 ? "n_positions" : "max_position_embeddings", h->max_position_embeddings,
		  GPT2_MAX_SEQ_LEN },
		{ "vocab_size", h->vocab_size, GPT2_MAX_VOCAB },
		{ gpt2 ? "n_inner" : "intermediate_size", h->intermediate_size, GPT2_MAX_INTERMEDIATE },
	};

	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		if (sizes[i].value > sizes[i].max) {
			snprintf(err, errlen, "%s: %s is %d: more than the %d any model may have", path,
				 sizes[i].key, sizes[i].value, sizes[i].max);
			return -1;
		}
	return 0;
}

/* The model's configuration of h (from path); refuses what the engine would compute otherwise. */
static int to_model(const struct hf_config *h, const char *path, struct gpt2_config *c, char *err,
		    size_t errlen)
{
	char why[200];

	if (hf_limits(h, path, err, errlen) < 0)
		return -1;
	if (h->head_dim * h->num_heads != h->hidden_size) {
		snprintf(err, errlen,
			 "%s: head_dim: %d heads of %d are not hidden_size = %d; the engine's heads "
			 "are hidden_size / num_attention_heads wide", path, h->num_heads, h->head_dim,
			 h->hidden_size);
		return -1;
	}
	*c = (struct gpt2_config){ .max_seq_len = h->max_position_embeddings,
				   .vocab_size = h->vocab_size,
				   .padded_vocab_size = (int)(((int64_t)h->vocab_size + 127) / 128 * 128),
				   .num_layers = h->num_layers, .num_heads = h->num_heads,
				   .channels = h->hidden_size };
	if (h->arch == HF_LLAMA) {
		c->arch = MODEL_LLAMA;
		c->kv_heads = h->num_kv_heads;
		c->intermediate = h->intermediate_size;
		c->untied = !h->tie_word_embeddings;
		c->norm_eps = (float)h->norm_eps;
		c->rope_theta = (float)h->rope_theta;
		if (h->rope_scaling) {
			c->rope_factor = (float)h->rope_factor;
			c->rope_low_freq_factor = (float)h->rope_low_freq_factor;
			c->rope_high_freq_factor = (float)h->rope_high_freq_factor;
			c->rope_original_max_positions = h->rope_original_max_position_embeddings;
		}
	} else if (h->intermediate_size != 4 * h->hidden_size || !h->tie_word_embeddings ||
		   h->norm_eps < 0.99e-5 || h->norm_eps > 1.01e-5) {
		snprintf(err, errlen,
			 "%s: a GPT-2 with n_inner %d, layer_norm_epsilon %g and tie_word_embeddings "
			 "%s: the engine's GPT-2 has n_inner 4 * n_embd = %d, epsilon 1e-5 and a tied "
			 "head", path, h->intermediate_size, h->norm_eps,
			 h->tie_word_embeddings ? "true" : "false", 4 * h->hidden_size);
		return -1;
	}
	if (gpt2_config_check(c, why, sizeof why)) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	return 0;
}

int hf_model_config(const char *dir, struct gpt2_config *c, char *err, size_t errlen)
{
	struct hf_config h;
	char path[4096];

	if (read_hf(dir, &h, path, sizeof path, err, errlen))
		return -1;
	return to_model(&h, path, c, err, errlen);
}

/*
 * The weights of one layer's chunk of tensor t, in the model's row order,
 * and *in, the columns of a row (0: the tensor is a vector).
 */
static int parts_of(const struct gpt2_config *c, int t, struct part p[3], int64_t *in)
{
	int64_t C = c->channels, V = c->padded_vocab_size, HS = C / c->num_heads;
	int64_t KV = model_kv_heads(c) * HS, I = model_mlp_width(c);
	int llama = c->arch == MODEL_LLAMA;

	*in = C;
	switch (t) {
	case GPT2_WTE: p[0] = (struct part){ HF_TOKEN_EMBED, 0, V }; return 1;
	case GPT2_WPE: p[0] = (struct part){ HF_POS_EMBED, 0, c->max_seq_len }; return 1;
	case GPT2_LMHEAD: p[0] = (struct part){ HF_LM_HEAD, 0, V }; return 1;
	case GPT2_ATTPROJW: p[0] = (struct part){ HF_ATTN_OUT, 0, C }; return 1;
	case GPT2_FCPROJW:
		*in = I;
		p[0] = (struct part){ HF_MLP_DOWN, 0, C };
		return 1;
	case GPT2_QKVW:
		if (llama) {
			p[0] = (struct part){ HF_Q, 0, C };
			p[1] = (struct part){ HF_K, 0, KV };
			p[2] = (struct part){ HF_V, 0, KV };
		} else {
			for (int k = 0; k < 3; k++)
				p[k] = (struct part){ HF_QKV, k * C, C };
		}
		return 3;
	case GPT2_FCW:
		if (!llama) {
			p[0] = (struct part){ HF_MLP_UP, 0, I };
			return 1;
		}
		p[0] = (struct part){ HF_MLP_GATE, 0, I };
		p[1] = (struct part){ HF_MLP_UP, 0, I };
		return 2;
	}
	*in = 0; /* vectors */
	switch (t) {
	case GPT2_QKVB:
		for (int k = 0; k < 3; k++)
			p[k] = (struct part){ HF_QKV_BIAS, k * C, C };
		return 3;
	case GPT2_FCB: p[0] = (struct part){ HF_MLP_UP_BIAS, 0, I }; return 1;
	case GPT2_LN1W: p[0] = (struct part){ HF_ATTN_NORM, 0, C }; return 1;
	case GPT2_LN1B: p[0] = (struct part){ HF_ATTN_NORM_BIAS, 0, C }; return 1;
	case GPT2_ATTPROJB: p[0] = (struct part){ HF_ATTN_OUT_BIAS, 0, C }; return 1;
	case GPT2_LN2W: p[0] = (struct part){ HF_MLP_NORM, 0, C }; return 1;
	case GPT2_LN2B: p[0] = (struct part){ HF_MLP_NORM_BIAS, 0, C }; return 1;
	case GPT2_FCPROJB: p[0] = (struct part){ HF_MLP_DOWN_BIAS, 0, C }; return 1;
	case GPT2_LNFW: p[0] = (struct part){ HF_FINAL_NORM, 0, C }; return 1;
	case GPT2_LNFB: p[0] = (struct part){ HF_FINAL_NORM_BIAS, 0, C }; return 1;
	}
	return 0;
}

/* Rows of a weight the file holds: the vocabulary's padding rows are the model's alone. */
static int64_t file_rows(const struct gpt2_config *c, enum hf_kind kind, int64_t rows)
{
	if (kind == HF_TOKEN_EMBED || kind == HF_LM_HEAD)
		return rows < c->vocab_size ? rows : c->vocab_size;
	return rows;
}

/* ----------------------------------------------------------------- reading */

struct reader {
	const struct safetensors *st;
	const struct hf_config *h;
	const struct gpt2_config *c;
	const char *config_path;
	bool prefixed;
	char *err;
	size_t errlen;
};

/*
 * Rows [row0, row0 + nrows) and columns [col0, col0 + ncols) of w in the
 * model's orientation into out (nrows x ncols; a vector: ncols 1). Rows
 * past the file's (vocabulary padding) are zeros.
 */
static int read_sub(const struct reader *r, const struct st_tensor *w, enum hf_kind kind,
		    int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, int vector, float *out)
{
	int64_t have = file_rows(r->c, kind, row0 + nrows) - row0;
	float *tmp;
	int rc;

	have = have < 0 ? 0 : have;
	memset(out + have * ncols, 0, (size_t)((nrows - have) * ncols) * sizeof(float));
	if (!have)
		return 0;
	if (vector)
		return st_read_range(r->st, w, row0, have, out, r->err, r->errlen);
	if (!hf_transposed(r->h->arch, kind)) {
		if (col0 == 0 && ncols == w->shape[1])
			return st_read_rows(r->st, w, row0, have, out, r->err, r->errlen);
		return st_read_block(r->st, w, row0, have, col0, ncols, out, r->err, r->errlen);
	}
	/* stored [in, out]: the model's columns are the file's rows */
	if (!(tmp = malloc((size_t)(have * ncols) * sizeof(float)))) {
		snprintf(r->err, r->errlen, "%s: out of memory", st_name(r->st));
		return -2;
	}
	rc = st_read_block(r->st, w, col0, ncols, row0, have, tmp, r->err, r->errlen);
	for (int64_t i = 0; !rc && i < have; i++)
		for (int64_t k = 0; k < ncols; k++)
			out[i * ncols + k] = tmp[k * have + i];
	free(tmp);
	return rc;
}

/* Layer l's chunk of tensor t, the shard's slice of it (as copy_chunk cuts it), into dst. */
static int read_chunk(const struct reader *r, const struct gpt2_shard *s, int t, int l, float *dst)
{
	struct part p[3];
	struct tp_split sp;
	int64_t in, tp = s->tp_size, k = s->tp_rank;
	int n = parts_of(r->c, t, p, &in), rc;

	arch_of(r->c)->split(r->c, t, &sp);
	for (int i = 0; i < n; i++) {
		const struct st_tensor *w =
			hf_weight_find(r->st, r->h, r->config_path, p[i].kind,
				       gpt2_tensor_per_layer(t) ? l : 0, r->prefixed, r->err,
				       r->errlen);
		int64_t row0 = p[i].off, nrows = p[i].rows, col0 = 0, ncols = in ? in : 1;

		if (!w)
			return -1;
		if (tp > 1 && sp.nseg && sp.repeat > 1) { /* row-parallel: input columns */
			col0 = k * (in / tp);
			ncols = in / tp;
		} else if (tp > 1 && sp.nseg) { /* column-parallel: output rows */
			nrows /= tp;
			row0 += k * nrows;
		}
		if ((rc = read_sub(r, w, p[i].kind, row0, nrows, col0, ncols, !in, dst)))
			return rc;
		dst += nrows * ncols;
	}
	return 0;
}

int hf_model_load_shard(struct gpt2 *m, const char *dir, const struct gpt2_shard *want,
			char *err, size_t errlen)
{
	struct hf_config h;
	struct gpt2_config c;
	struct gpt2_shard s;
	struct reader r = { .h = &h, .c = &c, .err = err, .errlen = errlen };
	struct safetensors *st = NULL;
	char path[4096];
	int rc;

	memset(m, 0, sizeof *m);
	if (read_hf(dir, &h, path, sizeof path, err, errlen) ||
	    to_model(&h, path, &c, err, errlen))
		return -1;
	gpt2_shard_whole(&c, &s);
	if (want)
		s = *want;
	if (!(st = st_open_dir(dir, err, errlen)))
		return -1;
	r.st = st;
	r.config_path = path;
	if (hf_detect_prefix(st, h.arch, &r.prefixed, err, errlen)) {
		st_close(st);
		return -1;
	}
	if ((rc = gpt2_shard_from_full(m, &c, &s, NULL))) {
		snprintf(err, errlen, "%s: cannot cut this model: %s", dir, m->err);
		st_close(st);
		return rc;
	}
	for (int t = 0; t < GPT2_NUM_TENSORS && !rc; t++) {
		int first = gpt2_tensor_per_layer(t) ? s.first_layer : 0;
		int last = gpt2_tensor_per_layer(t) ? s.last_layer : 1;
		size_t per = m->sizes[t] / (size_t)(last - first);

		for (int l = first; l < last && m->sizes[t] && !rc; l++)
			rc = read_chunk(&r, &s, t, l, m->tensors[t] + (size_t)(l - first) * per);
	}
	st_close(st);
	if (rc)
		gpt2_free(m);
	return rc;
}

/* ----------------------------------------------------------------- writing */

/* The shortest decimal that reads back as f: config.json says 1e-05, not 9.99999974737875e-06. */
static double decimal_of(float f)
{
	char buf[32];

	for (int p = 1; p < 10; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	return strtod(buf, NULL);
}

static void to_hf(const struct gpt2_config *c, enum st_dtype dtype, struct hf_config *h)
{
	int llama = c->arch == MODEL_LLAMA;

	*h = (struct hf_config){
		.arch = llama ? HF_LLAMA : HF_GPT2, .vocab_size = c->vocab_size,
		.hidden_size = c->channels, .num_layers = c->num_layers, .num_heads = c->num_heads,
		.num_kv_heads = model_kv_heads(c), .head_dim = c->channels / c->num_heads,
		.intermediate_size = model_mlp_width(c), .max_position_embeddings = c->max_seq_len,
		.norm_eps = llama ? decimal_of(c->norm_eps) : 1e-5,
		.rope_theta = decimal_of(c->rope_theta), .rope_scaling = llama && c->rope_factor > 0,
		.rope_factor = decimal_of(c->rope_factor),
		.rope_low_freq_factor = decimal_of(c->rope_low_freq_factor),
		.rope_high_freq_factor = decimal_of(c->rope_high_freq_factor),
		.rope_original_max_position_embeddings = c->rope_original_max_positions,
		.tie_word_embeddings = model_tied(c),
	};
	snprintf(h->torch_dtype, sizeof h->torch_dtype, "%s",
		 dtype == ST_BF16 ? "bfloat16" : "float32");
}

/* Where layer l's chunk of tensor t starts in the whole model's parameters. */
static size_t full_offset(const struct gpt2_config *c, int t, int l)
{
	size_t off = 0;

	for (int u = 0; u < t; u++)
		off += gpt2_chunk_floats(c, u) * (gpt2_tensor_per_layer(u) ? c->num_layers : 1);
	return off + (size_t)l * gpt2_chunk_floats(c, t);
}

/* Fill weight kind of layer l (file shape shape, out) from the model's chunks that hold it. */
static void fill_weight(const struct gpt2_config *c, const float *full, enum hf_arch arch,
			enum hf_kind kind, int l, const int64_t *shape, float *out)
{
	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		struct part p[3];
		int64_t in, cum = 0;
		int n = parts_of(c, t, p, &in);
		const float *chunk;

		if (!gpt2_chunk_floats(c, t))
			continue;
		chunk = full + full_offset(c, t, gpt2_tensor_per_layer(t) ? l : 0);
		for (int i = 0; i < n; cum += p[i].rows, i++) {
			int64_t rows = file_rows(c, kind, p[i].rows), w = in ? in : 1;

			if (p[i].kind != kind)
				continue;
			if (!in || !hf_transposed(arch, kind)) {
				memcpy(out + p[i].off * w, chunk + cum * w,
				       (size_t)(rows * w) * sizeof(float));
				continue;
			}
			for (int64_t r = 0; r < rows; r++) /* stored [in, out] */
				for (int64_t k = 0; k < in; k++)
					out[k * shape[1] + p[i].off + r] = chunk[(cum + r) * in + k];
		}
	}
}

int hf_model_export(const struct gpt2_config *c, const float *full, const char *dir,
		    enum st_dtype dtype, int bos_id, int eos_id, char *err, size_t errlen)
{
	struct hf_config h;
	const struct hf_weight *ws;
	struct st_out *outs = NULL;
	size_t nw, count = 0, cap;
	char path[4096];
	int rc = -1;

	to_hf(c, dtype, &h);
	h.has_token_ids = bos_id >= 0 && eos_id >= 0;
	h.bos_token_id = h.has_token_ids ? bos_id : 0;
	h.eos_token_id = h.has_token_ids ? eos_id : 0;
	ws = hf_weights(h.arch, &nw);
	cap = nw * (size_t)c->num_layers;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!(outs = calloc(cap, sizeof *outs))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < nw; i++) {
		int layers = ws[i].per_layer ? c->num_layers : 1;

		for (int l = 0; l < layers; l++) {
			struct st_out *o = &outs[count];
			char name[256];
			float *buf;

			o->ndim = hf_weight_shape(&h, ws[i].kind, o->shape);
			if (!o->ndim)
				continue;
			hf_weight_name(h.arch, ws[i].kind, l, true, name, sizeof name);
			buf = calloc((size_t)(o->shape[0] * (o->ndim > 1 ? o->shape[1] : 1)),
				     sizeof(float));
			o->name = strdup(name);
			o->data = buf;
			count++;
			if (!buf || !o->name) {
				snprintf(err, errlen, "out of memory for %s", name);
				goto out;
			}
			fill_weight(c, full, h.arch, ws[i].kind, l, o->shape, buf);
		}
	}
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	if (st_write(path, outs, count, dtype, NULL, err, errlen))
		goto out;
	snprintf(path, sizeof path, "%s/config.json", dir);
	rc = hf_config_write(path, &h, err, errlen);
out:
	for (size_t i = 0; i < count; i++) {
		free((void *)outs[i].name);
		free((void *)outs[i].data);
	}
	free(outs);
	return rc;
}
