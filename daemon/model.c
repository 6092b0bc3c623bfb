/*
 * daemon/model.c - GPT-2: parameters, llm.c model files, forward and
 * backward passes (see model.h for the model and the file format).
 *
 * The passes follow llm.c's train_gpt2.c layer by layer, calling the
 * kernels of a backend (struct ops, CPU here). Two differences, both for
 * memory: the outputs of the attention and MLP projections are written
 * straight into the residual stream (they are not needed by the backward
 * pass), and the backward pass keeps one set of activation-gradient buffers
 * that every layer reuses, instead of one per layer. The gradient of the
 * residual stream lives in one buffer (dres) that the two LayerNorm
 * backwards of a block add into: the residual connections pass it through
 * unchanged. The logits buffer holds logits, then probabilities, then their
 * gradient.
 */
#include "config.h"
#include "daemon/model.h"
#include "lib/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const tensor_names[GPT2_NUM_TENSORS] = {
	"wte",  "wpe", "ln1w",	"ln1b",	 "qkvw",    "qkvb",    "attprojw", "attprojb",
	"ln2w", "ln2b", "fcw",	"fcb",	 "fcprojw", "fcprojb", "lnfw",	   "lnfb",
};

const char *gpt2_tensor_name(enum gpt2_tensor t)
{
	return t >= 0 && t < GPT2_NUM_TENSORS ? tensor_names[t] : "?";
}

int gpt2_tensor_decays(enum gpt2_tensor t)
{
	return t == GPT2_WTE || t == GPT2_WPE || t == GPT2_QKVW || t == GPT2_ATTPROJW ||
	       t == GPT2_FCW || t == GPT2_FCPROJW;
}

int gpt2_config_check(const struct gpt2_config *c, char *err, size_t errlen)
{
	const struct {
		const char *name;
		int value;
	} f[] = {
		{ "max_seq_len", c->max_seq_len }, { "vocab_size", c->vocab_size },
		{ "padded_vocab_size", c->padded_vocab_size }, { "layers", c->num_layers },
		{ "heads", c->num_heads }, { "channels", c->channels },
	};

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].value <= 0) {
			snprintf(err, errlen, "model %s is %d: it must be positive", f[i].name,
				 f[i].value);
			return -1;
		}
	}
	if (c->channels % c->num_heads) {
		snprintf(err, errlen, "model channels (%d) must be a multiple of heads (%d)",
			 c->channels, c->num_heads);
		return -1;
	}
	if (c->padded_vocab_size < c->vocab_size) {
		snprintf(err, errlen, "model padded_vocab_size (%d) is below vocab_size (%d)",
			 c->padded_vocab_size, c->vocab_size);
		return -1;
	}
	return 0;
}

static void fill_sizes(size_t sizes[GPT2_NUM_TENSORS], const struct gpt2_config *c)
{
	size_t C = c->channels, L = c->num_layers;

	sizes[GPT2_WTE] = (size_t)c->padded_vocab_size * C;
	sizes[GPT2_WPE] = (size_t)c->max_seq_len * C;
	sizes[GPT2_LN1W] = L * C;
	sizes[GPT2_LN1B] = L * C;
	sizes[GPT2_QKVW] = L * 3 * C * C;
	sizes[GPT2_QKVB] = L * 3 * C;
	sizes[GPT2_ATTPROJW] = L * C * C;
	sizes[GPT2_ATTPROJB] = L * C;
	sizes[GPT2_LN2W] = L * C;
	sizes[GPT2_LN2B] = L * C;
	sizes[GPT2_FCW] = L * 4 * C * C;
	sizes[GPT2_FCB] = L * 4 * C;
	sizes[GPT2_FCPROJW] = L * C * 4 * C;
	sizes[GPT2_FCPROJB] = L * C;
	sizes[GPT2_LNFW] = C;
	sizes[GPT2_LNFB] = C;
}

/*
 * n floats aligned to a cache line, zeroed if asked, or NULL. malloc's large
 * blocks start 16 bytes into a page: every AVX-512 load of such an array
 * straddles two cache lines, which costs the LM head's sgemm calls about a
 * third of their speed. Tensor sizes are multiples of C, so tensors inside
 * an aligned buffer stay aligned when C is a multiple of 16.
 */
static float *alloc_floats(size_t n, int zero)
{
	void *p;

	if (posix_memalign(&p, 64, n * sizeof(float)))
		return NULL;
	if (zero)
		memset(p, 0, n * sizeof(float));
	return p;
}

/* Point tensors[] into buf following sizes. */
static void point_tensors(float *tensors[GPT2_NUM_TENSORS], float *buf,
			  const size_t sizes[GPT2_NUM_TENSORS])
{
	for (int i = 0; i < GPT2_NUM_TENSORS; i++) {
		tensors[i] = buf;
		buf += sizes[i];
	}
}

/* Sizes and an uninitialised parameter buffer for config c. */
static int gpt2_alloc(struct gpt2 *m, const struct gpt2_config *c)
{
	memset(m, 0, sizeof *m);
	m->config = *c;
	m->ops = &ops_cpu;
	m->loss = -1.0f;
	fill_sizes(m->sizes, c);
	for (int i = 0; i < GPT2_NUM_TENSORS; i++)
		m->num_params += m->sizes[i];
	m->params = alloc_floats(m->num_params, 0);
	if (!m->params) {
		snprintf(m->err, sizeof m->err, "out of memory for %zu parameters", m->num_params);
		return -2;
	}
	point_tensors(m->tensors, m->params, m->sizes);
	return 0;
}

/* Append ", what" (or "what" first) to the string in buf of size bytes, truncating. */
static void append_name(char *buf, size_t size, const char *what)
{
	size_t len = strlen(buf);

	snprintf(buf + len, size - len, "%s%s", len ? ", " : "", what);
}

int gpt2_set_backend(struct gpt2 *m, const struct ops *o)
{
	char missing[200] = "";
	int n = 0;

#define NEED(entry)                                                   \
	do {                                                          \
		if (!o->entry) {                                      \
			append_name(missing, sizeof missing, #entry); \
			n++;                                          \
		}                                                     \
	} while (0)
	NEED(encoder_forward);
	NEED(encoder_backward);
	NEED(layernorm_forward);
	NEED(layernorm_backward);
	NEED(matmul_forward);
	NEED(matmul_backward);
	NEED(attention_forward);
	NEED(attention_backward);
	NEED(gelu_forward);
	NEED(gelu_backward);
	NEED(residual_forward);
	NEED(residual_backward);
	NEED(softmax_xent_forward);
	NEED(softmax_xent_backward);
	NEED(zero);
#undef NEED
	if (n) {
		snprintf(m->err, sizeof m->err,
			 "backend %s lacks %d kernel(s) the model needs: %s; use another backend "
			 "(e.g. cpu)",
			 o->name ? o->name : "(unnamed)", n, missing);
		return -1;
	}
	m->ops = o;
	return 0;
}

/* Whether tensor t is stacked per layer. */
static int per_layer(int t)
{
	return t >= GPT2_LN1W && t <= GPT2_FCPROJB;
}

int gpt2_build(struct gpt2 *m, const struct gpt2_config *c, uint64_t seed)
{
	char err[200];
	int L = c->num_layers, rc;

	if (gpt2_config_check(c, err, sizeof err)) {
		memset(m, 0, sizeof *m);
		snprintf(m->err, sizeof m->err, "%s", err);
		return -1;
	}
	rc = gpt2_alloc(m, c);
	if (rc)
		return rc;
	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		int layers = per_layer(t) ? L : 1;
		size_t n = m->sizes[t] / layers;
		int is_bias = t == GPT2_QKVB || t == GPT2_ATTPROJB || t == GPT2_FCB ||
			      t == GPT2_FCPROJB || t == GPT2_LN1B || t == GPT2_LN2B ||
			      t == GPT2_LNFB;
		int is_lnw = t == GPT2_LN1W || t == GPT2_LN2W || t == GPT2_LNFW;
		float std = 0.02f;

		if (t == GPT2_ATTPROJW || t == GPT2_FCPROJW)
			std = 0.02f / sqrtf(2.0f * L);
		if (t == GPT2_WTE) /* padding rows stay 0 */
			n = (size_t)c->vocab_size * c->channels;
		for (int l = 0; l < layers; l++) {
			float *p = m->tensors[t] + (size_t)l * (m->sizes[t] / layers);
			uint64_t st = rng_seed(seed, (uint64_t)t * 65536 + (uint64_t)l);

			for (size_t i = 0; i < m->sizes[t] / layers; i++)
				p[i] = is_lnw ? 1.0f :
				       (is_bias || i >= n) ? 0.0f :
							     rng_normal(&st, 0.0f, std);
		}
	}
	return 0;
}

void gpt2_header(const struct gpt2 *m, int32_t hdr[GPT2_HEADER_INTS])
{
	memset(hdr, 0, GPT2_HEADER_INTS * sizeof(int32_t));
	hdr[0] = GPT2_MAGIC;
	hdr[1] = GPT2_VERSION_FP32;
	hdr[2] = m->config.max_seq_len;
	hdr[3] = m->config.vocab_size;
	hdr[4] = m->config.num_layers;
	hdr[5] = m->config.num_heads;
	hdr[6] = m->config.channels;
	hdr[7] = m->config.padded_vocab_size;
}

/* Check a header read from path; fill c. Returns 0 or -1 with err set. */
static int check_header(const int32_t *h, const char *path, struct gpt2_config *c, char *err,
			size_t errlen)
{
	char why[200];

	if (h[0] != GPT2_MAGIC) {
		snprintf(err, errlen,
			 "%s: not an llm.c model file (magic %d, expected %d); is it a token "
			 "shard or another format?",
			 path, h[0], GPT2_MAGIC);
		return -1;
	}
	if (h[1] != GPT2_VERSION_FP32) {
		snprintf(err, errlen,
			 "%s: model file version %d is not supported (expected %d = fp32%s)", path,
			 h[1], GPT2_VERSION_FP32,
			 h[1] == 5 ? "; version 5 is bf16: export fp32 weights" : "");
		return -1;
	}
	*c = (struct gpt2_config){ .max_seq_len = h[2], .vocab_size = h[3], .num_layers = h[4],
				   .num_heads = h[5], .channels = h[6], .padded_vocab_size = h[7] };
	if (gpt2_config_check(c, why, sizeof why)) {
		snprintf(err, errlen, "%s: bad header: %s", path, why);
		return -1;
	}
	return 0;
}

int gpt2_load(struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	struct gpt2_config c;
	struct stat st;
	long long body;
	FILE *f = fopen(path, "rb");
	int rc = -1;

	memset(m, 0, sizeof *m);
	if (!f) {
		snprintf(err, errlen, "cannot open model file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) == 0 && (size_t)st.st_size < sizeof hdr) {
		snprintf(err, errlen, "%s: truncated: %lld bytes, shorter than the %zu-byte header",
			 path, (long long)st.st_size, sizeof hdr);
		goto fail;
	}
	if (fread(hdr, sizeof hdr, 1, f) != 1) {
		snprintf(err, errlen, "%s: cannot read the header: %s", path,
			 ferror(f) ? strerror(errno) : "file too short");
		goto fail;
	}
	if (check_header(hdr, path, &c, err, errlen))
		goto fail;
	rc = gpt2_alloc(m, &c);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path, m->err);
		goto fail;
	}
	rc = -1;
	body = (long long)st.st_size - (long long)sizeof hdr;
	if (body < (long long)(m->num_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: truncated: the header announces %zu parameters (%zu bytes), the file "
			 "has %lld bytes after the header",
			 path, m->num_params, m->num_params * sizeof(float), body);
		goto fail;
	}
	if (body > (long long)(m->num_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: %lld bytes after the %zu parameters the header announces: the file "
			 "does not match its header",
			 path, body - (long long)(m->num_params * sizeof(float)), m->num_params);
		goto fail;
	}
	if (fread(m->params, sizeof(float), m->num_params, f) != m->num_params) {
		snprintf(err, errlen, "%s: truncated while reading the parameters", path);
		goto fail;
	}
	fclose(f);
	return 0;
fail:
	fclose(f);
	gpt2_free(m);
	return rc;
}

int gpt2_save(const struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	FILE *f = fopen(path, "wb");

	if (!f) {
		snprintf(err, errlen, "cannot create model file %s: %s", path, strerror(errno));
		return -1;
	}
	gpt2_header(m, hdr);
	if (fwrite(hdr, sizeof hdr, 1, f) != 1 ||
	    fwrite(m->params, sizeof(float), m->num_params, f) != m->num_params) {
		snprintf(err, errlen, "cannot write model file %s: %s", path, strerror(errno));
		fclose(f);
		return -1;
	}
	if (fclose(f)) {
		snprintf(err, errlen, "cannot write model file %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ activations */

/*
 * Point the fields of a at mem (NULL: only count) for (B, T) and the stage
 * of layers [first, last): per-layer arrays for those layers only, the head
 * (final LayerNorm, logits, losses) only when the stage ends the model.
 * Arrays of no size are NULL. Returns the floats needed.
 */
static size_t layout_acts(struct gpt2_acts *a, float *mem, const struct gpt2_config *c, int B,
			  int T, int first, int last)
{
	size_t L = (size_t)(last - first), C = c->channels, NH = c->num_heads, BT = (size_t)B * T;
	size_t H = last == c->num_layers; /* 1 if the stage has the head */
	struct {
		float **field;
		size_t n;
	} f[] = {
		{ &a->encoded, BT * C },
		{ &a->ln1, L * BT * C },	   { &a->ln1_mean, L * BT },
		{ &a->ln1_rstd, L * BT },	   { &a->qkv, L * BT * 3 * C },
		{ &a->atty, L * BT * C },	   { &a->att, L * B * NH * T * T },
		{ &a->res2, L * BT * C },	   { &a->ln2, L * BT * C },
		{ &a->ln2_mean, L * BT },	   { &a->ln2_rstd, L * BT },
		{ &a->fch, L * BT * 4 * C },	   { &a->fch_gelu, L * BT * 4 * C },
		{ &a->res3, L * BT * C },	   { &a->lnf, H * BT * C },
		{ &a->lnf_mean, H * BT },	   { &a->lnf_rstd, H * BT },
		{ &a->logits, H * BT * c->padded_vocab_size }, { &a->losses, H * BT },
		{ &a->dres, BT * C },		   { &a->dln, BT * C },
		{ &a->datty, BT * C },		   { &a->dqkv, BT * 3 * C },
		{ &a->dfch, BT * 4 * C },	   { &a->dfch_gelu, BT * 4 * C },
		{ &a->dlnf, BT * C },
	};
	size_t total = 0;

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (mem)
			*f[i].field = f[i].n ? mem + total : NULL;
		total += f[i].n;
	}
	return total;
}

/*
 * Make the activations fit (B, T) and layers [first, last); reuses the
 * buffer when it is large enough.
 */
static int ensure_acts(struct gpt2 *m, int B, int T, int first, int last)
{
	size_t need;

	if (m->act_mem && m->B == B && m->T == T && m->act_first == first && m->act_last == last)
		return 0;
	need = layout_acts(&m->acts, NULL, &m->config, B, T, first, last);
	if (need > m->act_cap) {
		float *mem = alloc_floats(need, 0);

		if (!mem)
			goto nomem;
		free(m->act_mem);
		m->act_mem = mem;
		m->act_cap = need;
	}
	if (2 * (size_t)B * T > m->tok_cap) {
		int *tok = malloc(2 * (size_t)B * T * sizeof(int));

		if (!tok)
			goto nomem;
		free(m->inputs);
		m->inputs = tok;
		m->tok_cap = 2 * (size_t)B * T;
	}
	m->targets = m->inputs + (size_t)B * T;
	layout_acts(&m->acts, m->act_mem, &m->config, B, T, first, last);
	m->B = B;
	m->T = T;
	m->act_first = first;
	m->act_last = last;
	return 0;
nomem:
	snprintf(m->err, sizeof m->err, "out of memory for the activations of B=%d, T=%d (%zu MiB)",
		 B, T, need * sizeof(float) >> 20);
	return -2;
}

/* ------------------------------------------------------------ blocks */

/* Widths of one block: the one place a tensor-parallel shard would narrow. */
struct block_dims {
	int C;      /* model width (LayerNorm, residual stream) */
	int NH, HS; /* heads of this shard and their size */
	int qkv_oc; /* 3 * NH * HS: qkv output channels (column-parallel) */
	int att_c;  /* NH * HS: attention projection input channels (row-parallel) */
	int fc_oc;  /* 4C: fc output channels (column-parallel), fcproj input (row-parallel) */
};

static struct block_dims block_dims(const struct gpt2_config *c)
{
	int HS = c->channels / c->num_heads;

	return (struct block_dims){ .C = c->channels, .NH = c->num_heads, .HS = HS,
				    .qkv_oc = 3 * c->num_heads * HS, .att_c = c->num_heads * HS,
				    .fc_oc = 4 * c->channels };
}

/* The weights (or gradients) of layer l inside a tensor table. */
struct block_w {
	float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
	float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

static struct block_w block_weights(float *const t[GPT2_NUM_TENSORS], const struct block_dims *d,
				    int l)
{
	size_t C = d->C;

	return (struct block_w){
		.ln1w = t[GPT2_LN1W] + l * C,
		.ln1b = t[GPT2_LN1B] + l * C,
		.qkvw = t[GPT2_QKVW] + l * (size_t)d->qkv_oc * C,
		.qkvb = t[GPT2_QKVB] + l * (size_t)d->qkv_oc,
		.attprojw = t[GPT2_ATTPROJW] + l * C * d->att_c,
		.attprojb = t[GPT2_ATTPROJB] + l * C,
		.ln2w = t[GPT2_LN2W] + l * C,
		.ln2b = t[GPT2_LN2B] + l * C,
		.fcw = t[GPT2_FCW] + l * (size_t)d->fc_oc * C,
		.fcb = t[GPT2_FCB] + l * (size_t)d->fc_oc,
		.fcprojw = t[GPT2_FCPROJW] + l * C * d->fc_oc,
		.fcprojb = t[GPT2_FCPROJB] + l * C,
	};
}

/* Activations of layer l. */
struct block_a {
	float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *res2;
	float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
};

static struct block_a block_acts(const struct gpt2 *m, const struct block_dims *d, int layer)
{
	const struct gpt2_acts *a = &m->acts;
	size_t BT = (size_t)m->B * m->T, C = d->C, l = (size_t)(layer - m->act_first);

	return (struct block_a){
		.ln1 = a->ln1 + l * BT * C,
		.ln1_mean = a->ln1_mean + l * BT,
		.ln1_rstd = a->ln1_rstd + l * BT,
		.qkv = a->qkv + l * BT * d->qkv_oc,
		.atty = a->atty + l * BT * d->att_c,
		.att = a->att + l * (size_t)m->B * d->NH * m->T * m->T,
		.res2 = a->res2 + l * BT * C,
		.ln2 = a->ln2 + l * BT * C,
		.ln2_mean = a->ln2_mean + l * BT,
		.ln2_rstd = a->ln2_rstd + l * BT,
		.fch = a->fch + l * BT * d->fc_oc,
		.fch_gelu = a->fch_gelu + l * BT * d->fc_oc,
		.res3 = a->res3 + l * BT * C,
	};
}

/* The residual stream entering layer l (B, T, C) of the stage's layers or their end. */
static float *layer_input(struct gpt2 *m, int l)
{
	return l == m->act_first ?
		       m->acts.encoded :
		       m->acts.res3 + (size_t)(l - 1 - m->act_first) * m->B * m->T *
					      m->config.channels;
}

/*
 * One block: x -> res2 = x + attproj(attention(qkv(ln1(x))))
 *              -> res3 = res2 + fcproj(gelu(fc(ln2(res2)))).
 */
static void block_forward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct block_dims d = block_dims(&m->config);
	struct block_w w = block_weights(m->tensors, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int B = m->B, T = m->T, N = B * T, C = d.C;
	const float *x = layer_input(m, l);

	o->layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, N, C);
	o->matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, d.qkv_oc);
	o->attention_forward(a.atty, a.att, a.qkv, B, T, d.NH, d.HS);
	o->matmul_forward(a.res2, a.atty, w.attprojw, w.attprojb, N, d.att_c, C);
	o->residual_forward(a.res2, x, a.res2, (size_t)N * C);
	o->layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2w, w.ln2b, N, C);
	o->matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, N, C, d.fc_oc);
	o->gelu_forward(a.fch_gelu, a.fch, (size_t)N * d.fc_oc);
	o->matmul_forward(a.res3, a.fch_gelu, w.fcprojw, w.fcprojb, N, d.fc_oc, C);
	o->residual_forward(a.res3, a.res2, a.res3, (size_t)N * C);
}

/*
 * Backward of one block. On entry acts.dres is the gradient of the block's
 * output res3; on exit it is the gradient of its input x. Both LayerNorm
 * backwards add into dres: the residual connections pass gradients through.
 */
static void block_backward(struct gpt2 *m, int l)
{
	const struct ops *o = m->ops;
	struct gpt2_acts *g = &m->acts;
	struct block_dims d = block_dims(&m->config);
	struct block_w w = block_weights(m->tensors, &d, l);
	struct block_w dw = block_weights(m->grad_tensors, &d, l);
	struct block_a a = block_acts(m, &d, l);
	int B = m->B, T = m->T, N = B * T, C = d.C;
	const float *x = layer_input(m, l);

	o->zero(g->dfch_gelu, (size_t)N * d.fc_oc);
	o->zero(g->dfch, (size_t)N * d.fc_oc);
	o->zero(g->dln, (size_t)N * C);
	o->zero(g->datty, (size_t)N * d.att_c);
	o->zero(g->dqkv, (size_t)N * d.qkv_oc);

	o->matmul_backward(g->dfch_gelu, dw.fcprojw, dw.fcprojb, g->dres, a.fch_gelu, w.fcprojw, N,
			   d.fc_oc, C);
	o->gelu_backward(g->dfch, a.fch, g->dfch_gelu, (size_t)N * d.fc_oc);
	o->matmul_backward(g->dln, dw.fcw, dw.fcb, g->dfch, a.ln2, w.fcw, N, C, d.fc_oc);
	o->layernorm_backward(g->dres, dw.ln2w, dw.ln2b, g->dln, a.res2, w.ln2w, a.ln2_mean,
			      a.ln2_rstd, N, C);
	o->zero(g->dln, (size_t)N * C);
	o->matmul_backward(g->datty, dw.attprojw, dw.attprojb, g->dres, a.atty, w.attprojw, N,
			   d.att_c, C);
	o->attention_backward(g->dqkv, g->datty, a.qkv, a.att, B, T, d.NH, d.HS);
	o->matmul_backward(g->dln, dw.qkvw, dw.qkvb, g->dqkv, a.ln1, w.qkvw, N, C, d.qkv_oc);
	o->layernorm_backward(g->dres, dw.ln1w, dw.ln1b, g->dln, x, w.ln1w, a.ln1_mean,
			      a.ln1_rstd, N, C);
}

/* ------------------------------------------------------------ passes */

static int check_stage(struct gpt2 *m, int B, int T, int first, int last)
{
	const struct gpt2_config *c = &m->config;

	if (B <= 0 || T <= 0 || T > c->max_seq_len) {
		snprintf(m->err, sizeof m->err,
			 "batch B=%d, T=%d does not fit the model (1 <= T <= max_seq_len %d)", B, T,
			 c->max_seq_len);
		return -1;
	}
	if (first < 0 || last > c->num_layers || first >= last) {
		snprintf(m->err, sizeof m->err, "layer range [%d, %d) is not within [0, %d)", first,
			 last, c->num_layers);
		return -1;
	}
	return 0;
}

/* Copy n tokens into dst, checking each is a vocabulary id. */
static int copy_tokens(struct gpt2 *m, int *dst, const int *src, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (src[i] < 0 || src[i] >= m->config.vocab_size) {
			snprintf(m->err, sizeof m->err,
				 "%s token %d at position %zu is outside the vocabulary [0, %d)", what,
				 src[i], i, m->config.vocab_size);
			return -1;
		}
		dst[i] = src[i];
	}
	return 0;
}

/* Final LayerNorm, LM head on the tied embedding, softmax and loss. */
static float head_forward(struct gpt2 *m, int have_targets)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	int N = m->B * m->T, C = c->channels;
	double sum = 0.0;

	o->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, layer_input(m, c->num_layers),
			     m->tensors[GPT2_LNFW], m->tensors[GPT2_LNFB], N, C);
	o->matmul_forward(a->logits, a->lnf, m->tensors[GPT2_WTE], NULL, N, C,
			  c->padded_vocab_size);
	o->softmax_xent_forward(a->losses, a->logits, have_targets ? m->targets : NULL, N,
				c->vocab_size, c->padded_vocab_size);
	if (!have_targets)
		return 0.0f;
	for (int i = 0; i < N; i++)
		sum += a->losses[i];
	return (float)(sum / N);
}

int gpt2_stage_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T,
		       int first, int last, const float *x_in, float *x_out, float *loss)
{
	size_t BTC = (size_t)B * T * m->config.channels;
	int rc;

	m->have_targets = 0;
	m->loss = -1.0f;
	if (check_stage(m, B, T, first, last))
		return -1;
	rc = ensure_acts(m, B, T, first, last);
	if (rc)
		return rc;
	if (targets && copy_tokens(m, m->targets, targets, (size_t)B * T, "target"))
		return -1;
	if (first == 0) {
		if (copy_tokens(m, m->inputs, inputs, (size_t)B * T, "input"))
			return -1;
		m->ops->encoder_forward(m->acts.encoded, m->inputs, m->tensors[GPT2_WTE],
					m->tensors[GPT2_WPE], B, T, m->config.channels);
	} else {
		memcpy(layer_input(m, first), x_in, BTC * sizeof(float));
	}
	for (int l = first; l < last; l++)
		block_forward(m, l);
	if (last < m->config.num_layers) {
		memcpy(x_out, layer_input(m, last), BTC * sizeof(float));
		return 0;
	}
	m->have_targets = targets != NULL;
	m->loss = head_forward(m, m->have_targets);
	if (loss)
		*loss = m->loss;
	return 0;
}

float gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T)
{
	float loss = 0.0f;

	if (gpt2_stage_forward(m, inputs, targets, B, T, 0, m->config.num_layers, NULL, NULL,
			       &loss))
		return NAN;
	return loss;
}

int gpt2_zero_grad(struct gpt2 *m)
{
	if (!m->grads) {
		m->grads = alloc_floats(m->num_params, 1);
		if (!m->grads) {
			snprintf(m->err, sizeof m->err, "out of memory for %zu gradients",
				 m->num_params);
			return -2;
		}
		point_tensors(m->grad_tensors, m->grads, m->sizes);
		return 0;
	}
	m->ops->zero(m->grads, m->num_params);
	return 0;
}

/* Gradient from the loss back to dres (the gradient of the last layer's output). */
static void head_backward(struct gpt2 *m, float loss_scale)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	int N = m->B * m->T, C = c->channels;

	o->softmax_xent_backward(a->logits, m->targets, loss_scale / N, N, c->vocab_size,
				 c->padded_vocab_size);
	o->zero(a->dlnf, (size_t)N * C);
	o->matmul_backward(a->dlnf, m->grad_tensors[GPT2_WTE], NULL, a->logits, a->lnf,
			   m->tensors[GPT2_WTE], N, C, c->padded_vocab_size);
	o->zero(a->dres, (size_t)N * C);
	o->layernorm_backward(a->dres, m->grad_tensors[GPT2_LNFW], m->grad_tensors[GPT2_LNFB],
			      a->dlnf, layer_input(m, c->num_layers), m->tensors[GPT2_LNFW],
			      a->lnf_mean, a->lnf_rstd, N, C);
}

int gpt2_stage_backward(struct gpt2 *m, int first, int last, float loss_scale,
			const float *dx_out, float *dx_in)
{
	size_t BTC = (size_t)m->B * m->T * m->config.channels;

	if (!m->grads || !m->act_mem) {
		snprintf(m->err, sizeof m->err,
			 "backward pass without %s", !m->grads ? "gradients (call gpt2_zero_grad)" :
								"a forward pass");
		return -1;
	}
	if (check_stage(m, m->B, m->T, first, last))
		return -1;
	if (first != m->act_first || last != m->act_last) {
		snprintf(m->err, sizeof m->err,
			 "backward pass over layers [%d, %d) after a forward pass over [%d, %d)",
			 first, last, m->act_first, m->act_last);
		return -1;
	}
	if (last == m->config.num_layers) {
		if (!m->have_targets) {
			snprintf(m->err, sizeof m->err,
				 "backward pass without a forward pass with targets");
			return -1;
		}
		head_backward(m, loss_scale);
		m->have_targets = 0; /* the logits now hold their gradient */
	} else {
		memcpy(m->acts.dres, dx_out, BTC * sizeof(float));
	}
	for (int l = last - 1; l >= first; l--)
		block_backward(m, l);
	if (first == 0)
		m->ops->encoder_backward(m->grad_tensors[GPT2_WTE], m->grad_tensors[GPT2_WPE],
					 m->acts.dres, m->inputs, m->B, m->T, m->config.channels);
	else
		memcpy(dx_in, m->acts.dres, BTC * sizeof(float));
	return 0;
}

int gpt2_backward(struct gpt2 *m, float loss_scale)
{
	return gpt2_stage_backward(m, 0, m->config.num_layers, loss_scale, NULL, NULL);
}

void gpt2_free(struct gpt2 *m)
{
	free(m->params);
	free(m->grads);
	free(m->act_mem);
	free(m->inputs);
	memset(m, 0, sizeof *m);
}
