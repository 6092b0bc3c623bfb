/*
 * daemon/engine/model/model.c - the decoder's parameters, shards, activations and
 * passes, the same for every architecture (see model.h); what differs
 * from one architecture to the next (tensor shapes, the blocks, the final
 * norm) comes from daemon/engine/model/arch/, model files from model_file.c.
 *
 * The passes call the kernels of a backend (struct ops, CPU here): the
 * embedding, each block of the shard's layers (the architecture's), the
 * final norm, the LM head and the loss. The logits buffer holds logits,
 * then probabilities, then their gradient.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/arch/arch.h"
#include "daemon/engine/parallel/tensor_parallel.h"
#include "lib/io/big_alloc.h"
#include "lib/io/io.h"
#include "lib/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const tensor_names[GPT2_NUM_TENSORS] = {
	"wte",  "wpe", "ln1w",	"ln1b",	 "qkvw",    "qkvb",    "attprojw", "attprojb",
	"ln2w", "ln2b", "fcw",	"fcb",	 "fcprojw", "fcprojb", "lnfw",	   "lnfb",
	"lmhead",
};

const char *model_arch_name(enum model_arch a)
{
	return a == MODEL_LLAMA ? "llama" : "gpt2";
}

int model_kv_heads(const struct gpt2_config *c)
{
	return c->arch == MODEL_LLAMA && c->kv_heads > 0 ? c->kv_heads : c->num_heads;
}

int model_mlp_width(const struct gpt2_config *c)
{
	return c->arch == MODEL_LLAMA ? c->intermediate : 4 * c->channels;
}

int model_tied(const struct gpt2_config *c)
{
	return c->arch != MODEL_LLAMA || !c->untied;
}

const char *gpt2_tensor_name(enum gpt2_tensor t)
{
	return t >= 0 && t < GPT2_NUM_TENSORS ? tensor_names[t] : "?";
}

int gpt2_tensor_decays(enum gpt2_tensor t)
{
	return t == GPT2_WTE || t == GPT2_WPE || t == GPT2_QKVW || t == GPT2_ATTPROJW ||
	       t == GPT2_FCW || t == GPT2_FCPROJW || t == GPT2_LMHEAD;
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
	return arch_of(c)->check(c, 1, err, errlen);
}

/* Whether tensor t is stacked per layer. */
static int per_layer(int t)
{
	return t >= GPT2_LN1W && t <= GPT2_FCPROJB;
}

/* Floats of one layer's chunk of tensor t in the whole model (the whole tensor if not per layer). */
static size_t full_chunk(const struct gpt2_config *c, int t)
{
	return arch_of(c)->chunk(c, t);
}

size_t gpt2_chunk_floats(const struct gpt2_config *c, enum gpt2_tensor t)
{
	return full_chunk(c, t);
}

int gpt2_tensor_per_layer(enum gpt2_tensor t)
{
	return per_layer(t);
}

static int is_split(const struct gpt2_config *c, int t)
{
	struct tp_split sp;

	arch_of(c)->split(c, t, &sp);
	return sp.nseg != 0;
}

/* Whether the shard holds tensor t's chunk of layer l (l = 0 for tensors without layers). */
static int shard_holds(const struct gpt2_config *c, const struct gpt2_shard *s, int t, int l)
{
	int first = s->first_layer == 0, last = s->last_layer == c->num_layers;

	if (per_layer(t))
		return l >= s->first_layer && l < s->last_layer;
	if (t == GPT2_WTE) /* tied: the LM head too */
		return first || (last && model_tied(c));
	if (t == GPT2_WPE)
		return first;
	return last; /* the final norm, an untied LM head */
}

static size_t local_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, int t)
{
	return is_split(c, t) ? full_chunk(c, t) / (size_t)s->tp_size : full_chunk(c, t);
}

void gpt2_shard_whole(const struct gpt2_config *c, struct gpt2_shard *s)
{
	*s = (struct gpt2_shard){ .tp_rank = 0, .tp_size = 1, .first_layer = 0,
				  .last_layer = c->num_layers, .tp = NULL };
}

int gpt2_shard_check(const struct gpt2_config *c, const struct gpt2_shard *s, char *err,
		     size_t errlen)
{
	if (s->tp_size < 1 || s->tp_rank < 0 || s->tp_rank >= s->tp_size) {
		snprintf(err, errlen, "tensor-parallel rank %d of %d", s->tp_rank, s->tp_size);
		return -1;
	}
	if (c->num_heads % s->tp_size || c->padded_vocab_size % s->tp_size) {
		snprintf(err, errlen,
			 "%d tensor-parallel ranks cannot split %d heads and %d vocabulary rows evenly",
			 s->tp_size, c->num_heads, c->padded_vocab_size);
		return -1;
	}
	if (arch_of(c)->check(c, s->tp_size, err, errlen))
		return -1;
	if (s->first_layer < 0 || s->last_layer > c->num_layers || s->first_layer >= s->last_layer) {
		snprintf(err, errlen, "layer range [%d, %d) is not within [0, %d)", s->first_layer,
			 s->last_layer, c->num_layers);
		return -1;
	}
	return 0;
}

size_t gpt2_shard_sizes(const struct gpt2_config *c, const struct gpt2_shard *s,
			size_t sizes[GPT2_NUM_TENSORS])
{
	size_t total = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t chunks = per_layer(t) ? (size_t)(s->last_layer - s->first_layer) :
					       (size_t)shard_holds(c, s, t, 0);

		sizes[t] = chunks * local_chunk(c, s, t);
		total += sizes[t];
	}
	return total;
}

/* Add a piece, joined to the one before when both continue it. */
static void piece_run_add(struct piece_run *run, size_t full, size_t local, size_t n)
{
	struct shard_piece *p = &run->pending;

	if (!n)
		return;
	if (p->n && p->full + p->n == full && p->local + p->n == local) {
		p->n += n;
		return;
	}
	if (p->n)
		run->fn(run->arg, p);
	*p = (struct shard_piece){ .full = full, .local = local, .n = n };
}

static void piece_run_end(struct piece_run *run)
{
	if (run->pending.n)
		run->fn(run->arg, &run->pending);
	run->pending.n = 0;
}

/*
 * The contiguous pieces of one chunk the shard holds: a split tensor gives
 * its tensor-parallel rank's 1/tp of every segment of every repeat
 * (struct tp_split); any other chunk is one piece. full and local are the
 * chunk's offsets in the whole model and in the shard.
 */
static void chunk_pieces(const struct gpt2_config *c, const struct gpt2_shard *s, int t,
			 size_t full, size_t local, struct piece_run *run)
{
	struct tp_split sp;

	arch_of(c)->split(c, t, &sp);
	if (!sp.nseg || s->tp_size == 1) {
		piece_run_add(run, full, local, full_chunk(c, t));
		return;
	}
	for (size_t r = 0; r < sp.repeat; r++) {
		for (int k = 0; k < sp.nseg; k++) {
			size_t sub = sp.seg[k] / (size_t)s->tp_size;

			piece_run_add(run, full + (size_t)s->tp_rank * sub, local, sub);
			full += sp.seg[k];
			local += sub;
		}
	}
}

struct copy_args {
	float *full, *local;
	int to_local;
};

static void copy_piece(void *arg, const struct shard_piece *p)
{
	struct copy_args *a = arg;

	if (a->to_local)
		memcpy(a->local + p->local, a->full + p->full, p->n * sizeof(float));
	else
		memcpy(a->full + p->full, a->local + p->local, p->n * sizeof(float));
}

/* Copy one chunk between its whole-model form and the shard's slice of it. */
static void copy_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, int t, float *full,
		       float *local, int to_local)
{
	struct copy_args a = { full, local, to_local };
	struct piece_run run = { .fn = copy_piece, .arg = &a };

	chunk_pieces(c, s, t, 0, 0, &run);
	piece_run_end(&run);
}

/*
 * Call fn for every chunk the shard holds, in llm.c's order: (tensor,
 * layer), its offset in the whole model and in the shard.
 */
typedef int chunk_fn(void *arg, int t, int l, size_t full_off, size_t local_off);

static int for_each_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, chunk_fn *fn,
			  void *arg)
{
	size_t full_off = 0, local = 0;
	int rc;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		int layers = per_layer(t) ? c->num_layers : 1;

		for (int l = 0; l < layers; l++) {
			if (shard_holds(c, s, t, l)) {
				if ((rc = fn(arg, t, l, full_off, local)))
					return rc;
				local += local_chunk(c, s, t);
			}
			full_off += full_chunk(c, t);
		}
	}
	return 0;
}

struct pieces_args {
	const struct gpt2_config *c;
	const struct gpt2_shard *s;
	struct piece_run run;
};

static int pieces_of_chunk(void *arg, int t, int l, size_t full_off, size_t local_off)
{
	struct pieces_args *a = arg;

	(void)l;
	chunk_pieces(a->c, a->s, t, full_off, local_off, &a->run);
	return 0;
}

void gpt2_shard_pieces(const struct gpt2_config *c, const struct gpt2_shard *s,
		       shard_piece_fn *fn, void *arg)
{
	struct pieces_args a = { c, s, { .fn = fn, .arg = arg } };

	for_each_chunk(c, s, pieces_of_chunk, &a);
	piece_run_end(&a.run);
}

void gpt2_shard_copy(const struct gpt2_config *c, const struct gpt2_shard *s, float *full,
		     float *local, int to_local)
{
	struct copy_args a = { full, local, to_local };

	gpt2_shard_pieces(c, s, copy_piece, &a);
}

int gpt2_tensor_is_split(const struct gpt2_config *c, enum gpt2_tensor t)
{
	return is_split(c, t);
}

int gpt2_shard_is_replica(const struct gpt2_config *c, const struct gpt2_shard *s,
			  enum gpt2_tensor t)
{
	if (!is_split(c, t) && s->tp_rank > 0)
		return 1;
	return t == GPT2_WTE && model_tied(c) && s->first_layer > 0 &&
	       s->last_layer == c->num_layers;
}

/*
 * n floats aligned to a cache line, zeroed if asked, or NULL. malloc's large
 * blocks start 16 bytes into a page: every AVX-512 load of such an array
 * straddles two cache lines, which costs the LM head's sgemm calls about a
 * third of their speed. Tensor sizes are multiples of C, so tensors inside
 * an aligned buffer stay aligned when C is a multiple of 16. Large buffers
 * go on huge pages (lib/io/big_alloc.h).
 */
static float *alloc_floats(size_t n)
{
	return big_alloc(n * sizeof(float));
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

/* Free the activations and token copies: the next forward pass lays them out again. */
static void forget_acts(struct gpt2 *m)
{
	if (m->act_mem)
		m->ops->free(m->act_mem);
	if (m->tok_mem)
		m->ops->free(m->tok_mem);
	if (m->rope)
		m->ops->free(m->rope);
	m->rope = NULL;
	m->rope_T = 0;
	m->act_mem = NULL;
	m->act_cap = 0;
	m->tok_mem = NULL;
	m->tok_cap = 0;
	m->inputs = m->targets = NULL;
	m->have_targets = 0;
	memset(&m->acts, 0, sizeof m->acts);
	m->B = m->T = 0;
}

/*
 * Free what the passes allocate on demand (gradients, activations, token
 * copies) from the backend's memory; the next pass makes them again.
 */
static void drop_work_memory(struct gpt2 *m)
{
	forget_acts(m);
	if (m->grads)
		m->ops->free(m->grads);
	free(m->host_losses);
	m->grads = NULL;
	m->host_losses = NULL;
	memset(m->grad_tensors, 0, sizeof m->grad_tensors);
}

/* Sizes and an uninitialised parameter buffer for shard s of config c. */
static int gpt2_alloc(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s)
{
	memset(m, 0, sizeof *m);
	m->config = *c;
	m->shard = *s;
	m->ops = &ops_cpu;
	m->loss = -1.0f;
	m->num_params = gpt2_shard_sizes(c, s, m->sizes);
	m->nslots = 1;
	m->slots = calloc(1, sizeof *m->slots);
	m->params = alloc_floats(m->num_params ? m->num_params : 1);
	if (!m->params || !m->slots) {
		snprintf(m->err, sizeof m->err, "out of memory for %zu parameters", m->num_params);
		return -2;
	}
	point_tensors(m->tensors, m->params, m->sizes);
	return 0;
}

/*
 * Make o the owner of the model's memory: the parameters move into o's
 * memory (a GPU's, for the CUDA backend); gradients and activations are
 * dropped and made again in o's memory when next needed (gpt2_zero_grad,
 * the next forward). A backend that shares the current one's allocator (a
 * timing wrapper of the CPU backend) takes the memory as it is.
 */
static int move_memory(struct gpt2 *m, const struct ops *o)
{
	size_t bytes = (m->num_params ? m->num_params : 1) * sizeof(float);
	float *p;

	if (o->alloc == m->ops->alloc) {
		m->ops = o;
		return 0;
	}
	if (!(p = o->alloc(bytes))) {
		gpt2_oom_message(o, "the parameters", bytes, m->err, sizeof m->err);
		return -2;
	}
	o->upload(p, m->params, bytes);
	drop_work_memory(m);
	m->ops->free(m->params);
	m->ops = o;
	m->params = p;
	point_tensors(m->tensors, m->params, m->sizes);
	return 0;
}

void gpt2_oom_message(const struct ops *o, const char *what, size_t bytes, char *err,
		      size_t errlen)
{
	size_t free_b = 0, total_b = 0;
	char free_s[48] = "";

	/* a GPU says how much it has left; the host does not */
	o->mem_info(&free_b, &total_b);
	if (total_b)
		snprintf(free_s, sizeof free_s, ", %zu MiB free", free_b >> 20);
	snprintf(err, errlen, "out of %s memory for %s: %zu MiB asked%s", o->name, what,
		 bytes >> 20, free_s);
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
	if (m->config.arch == MODEL_LLAMA) {
		NEED(rmsnorm_forward);
		NEED(rmsnorm_backward);
		NEED(rope_forward);
		NEED(rope_backward);
		NEED(swiglu_forward);
		NEED(swiglu_backward);
	}
	NEED(zero);
	NEED(alloc);
	NEED(upload);
	NEED(download);
	NEED(copy);
#undef NEED
	if (n) {
		/* bounded so that the sentence always ends in m->err */
		snprintf(m->err, sizeof m->err,
			 "backend %.32s lacks %d kernel(s) the model needs: %.120s; use another "
			 "backend (e.g. cpu)",
			 o->name ? o->name : "(unnamed)", n, missing);
		return -1;
	}
	return move_memory(m, o);
}

/* A chunk's normals, each block drawn from where it begins in the chunk's stream. */
struct normal_fill {
	float *p;
	size_t n;
	uint64_t state; /* the stream's state before its first draw */
	float std;
};

#define NORMALS_PER_BLOCK ((size_t)1 << 20)

static void fill_normal_block(void *arg, int k, int count)
{
	struct normal_fill *f = arg;
	size_t lo = (size_t)k * NORMALS_PER_BLOCK, hi = lo + NORMALS_PER_BLOCK;
	uint64_t st = f->state;

	(void)count;
	rng_skip(&st, 2 * lo); /* rng_normal draws twice */
	for (size_t i = lo; i < hi && i < f->n; i++)
		f->p[i] = rng_normal(&st, 0.0f, f->std);
}

/*
 * The initial values of one chunk of the whole model (see gpt2_build in
 * model.h): each (tensor, layer) draws from its own stream, so a shard
 * generates the chunks it holds and keeps its slice of each. Norm weights
 * are 1, biases 0, matrices normal with the architecture's deviation. A
 * matrix is drawn in blocks on the rank's threads (a 1B model is over a
 * billion normals: 44 s on one core); each block jumps its stream to its
 * first element, so the values are those of one thread drawing in order.
 */
static void init_chunk(const struct gpt2_config *c, int t, int l, uint64_t seed, float *p)
{
	size_t n = full_chunk(c, t), real = n;
	int is_bias = t == GPT2_QKVB || t == GPT2_ATTPROJB || t == GPT2_FCB || t == GPT2_FCPROJB ||
		      t == GPT2_LN1B || t == GPT2_LN2B || t == GPT2_LNFB;
	int is_lnw = t == GPT2_LN1W || t == GPT2_LN2W || t == GPT2_LNFW;
	struct normal_fill f = { p, 0, rng_seed(seed, (uint64_t)t * 65536 + (uint64_t)l),
				 arch_of(c)->init_std(c, t) };

	if (is_lnw || is_bias) {
		for (size_t i = 0; i < n; i++)
			p[i] = is_lnw ? 1.0f : 0.0f;
		return;
	}
	if ((t == GPT2_WTE || t == GPT2_LMHEAD) && n) /* padding rows stay 0 */
		real = (size_t)c->vocab_size * c->channels;
	f.n = real;
	ops_cpu_parallel_for((int)((real + NORMALS_PER_BLOCK - 1) / NORMALS_PER_BLOCK),
			     fill_normal_block, &f);
	memset(p + real, 0, (n - real) * sizeof *p);
}

struct build_args {
	const struct gpt2_config *c;
	const struct gpt2_shard *s;
	uint64_t seed;
	float *tmp;                  /* a whole chunk, where the shard keeps a slice of it */
	float *local;                /* the shard's parameters */
};

static int build_one(void *arg, int t, int l, size_t full_off, size_t local_off)
{
	struct build_args *a = arg;

	(void)full_off;
	if (!a->tmp) { /* the shard holds whole chunks: drawn in place, first touched in parallel */
		init_chunk(a->c, t, l, a->seed, a->local + local_off);
		return 0;
	}
	init_chunk(a->c, t, l, a->seed, a->tmp);
	copy_chunk(a->c, a->s, t, a->tmp, a->local + local_off, 1);
	return 0;
}

/* Floats of the largest chunk: scratch for building or reading one chunk at a time. */
static size_t max_chunk(const struct gpt2_config *c)
{
	size_t n = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		n = full_chunk(c, t) > n ? full_chunk(c, t) : n;
	return n;
}

int gpt2_build_shard(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s,
		     uint64_t seed)
{
	struct build_args a = { c, s, seed, NULL, NULL };
	char err[200];
	int rc;

	if (gpt2_config_check(c, err, sizeof err) || gpt2_shard_check(c, s, err, sizeof err)) {
		memset(m, 0, sizeof *m);
		snprintf(m->err, sizeof m->err, "%s", err);
		return -1;
	}
	rc = gpt2_alloc(m, c, s);
	if (rc)
		return rc;
	if (s->tp_size > 1 && !(a.tmp = alloc_floats(max_chunk(c)))) {
		gpt2_free(m);
		snprintf(m->err, sizeof m->err, "out of memory for the model");
		return -2;
	}
	a.local = m->params;
	for_each_chunk(c, s, build_one, &a);
	free(a.tmp);
	return 0;
}

int gpt2_shard_from_full(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s,
			 const float *full)
{
	struct gpt2_shard whole;
	char err[200];
	int rc;

	gpt2_shard_whole(c, &whole);
	if (!s)
		s = &whole;
	if (gpt2_config_check(c, err, sizeof err) || gpt2_shard_check(c, s, err, sizeof err)) {
		memset(m, 0, sizeof *m);
		snprintf(m->err, sizeof m->err, "%s", err);
		return -1;
	}
	if ((rc = gpt2_alloc(m, c, s)))
		return rc;
	if (full)
		gpt2_shard_copy(c, s, (float *)full, m->params, 1);
	return 0;
}

int gpt2_build(struct gpt2 *m, const struct gpt2_config *c, uint64_t seed)
{
	struct gpt2_shard s;

	gpt2_shard_whole(c, &s);
	return gpt2_build_shard(m, c, &s, seed);
}

/* A float in an int32 slot of the header, bit for bit. */
static int32_t float_bits(float f)
{
	int32_t i;

	memcpy(&i, &f, sizeof i);
	return i;
}

static float bits_float(int32_t i)
{
	float f;

	memcpy(&f, &i, sizeof f);
	return f;
}

/* Llama's header: GPT-2's sizes in the same slots, then its own keys from slot 8. */
static void llama_header(const struct gpt2_config *c, int32_t *hdr)
{
	hdr[0] = LLAMA_MAGIC;
	hdr[1] = LLAMA_VERSION_FP32;
	hdr[8] = c->kv_heads;
	hdr[9] = c->intermediate;
	hdr[10] = c->untied;
	hdr[11] = c->rope_original_max_positions;
	hdr[12] = float_bits(c->norm_eps);
	hdr[13] = float_bits(c->rope_theta);
	hdr[14] = float_bits(c->rope_factor);
	hdr[15] = float_bits(c->rope_low_freq_factor);
	hdr[16] = float_bits(c->rope_high_freq_factor);
}

static void llama_from_header(const int32_t *h, struct gpt2_config *c)
{
	c->arch = MODEL_LLAMA;
	c->kv_heads = h[8];
	c->intermediate = h[9];
	c->untied = h[10] != 0;
	c->rope_original_max_positions = h[11];
	c->norm_eps = bits_float(h[12]);
	c->rope_theta = bits_float(h[13]);
	c->rope_factor = bits_float(h[14]);
	c->rope_low_freq_factor = bits_float(h[15]);
	c->rope_high_freq_factor = bits_float(h[16]);
}

void gpt2_config_header(const struct gpt2_config *c, int32_t hdr[GPT2_HEADER_INTS])
{
	memset(hdr, 0, GPT2_HEADER_INTS * sizeof(int32_t));
	hdr[0] = GPT2_MAGIC;
	hdr[1] = GPT2_VERSION_FP32;
	if (c->arch == MODEL_LLAMA)
		llama_header(c, hdr);
	hdr[2] = c->max_seq_len;
	hdr[3] = c->vocab_size;
	hdr[4] = c->num_layers;
	hdr[5] = c->num_heads;
	hdr[6] = c->channels;
	hdr[7] = c->padded_vocab_size;
}

void gpt2_header(const struct gpt2 *m, int32_t hdr[GPT2_HEADER_INTS])
{
	gpt2_config_header(&m->config, hdr);
}

int gpt2_config_from_header(const int32_t *h, const char *path, struct gpt2_config *c, char *err,
			    size_t errlen)
{
	char why[200];

	if (h[0] == LLAMA_MAGIC && h[1] != LLAMA_VERSION_FP32) {
		snprintf(err, errlen, "%s: Llama model file version %d is not supported (expected %d)",
			 path, h[1], LLAMA_VERSION_FP32);
		return -1;
	}
	if (h[0] != GPT2_MAGIC && h[0] != LLAMA_MAGIC) {
		snprintf(err, errlen,
			 "%s: not an llm.c model file (magic %d, expected %d); is it a token "
			 "shard or another format?",
			 path, h[0], GPT2_MAGIC);
		return -1;
	}
	if (h[0] == GPT2_MAGIC && h[1] != GPT2_VERSION_FP32) {
		snprintf(err, errlen,
			 "%s: model file version %d is not supported (expected %d = fp32%s)", path,
			 h[1], GPT2_VERSION_FP32,
			 h[1] == 5 ? "; version 5 is bf16: export fp32 weights" : "");
		return -1;
	}
	*c = (struct gpt2_config){ .max_seq_len = h[2], .vocab_size = h[3], .num_layers = h[4],
				   .num_heads = h[5], .channels = h[6], .padded_vocab_size = h[7] };
	if (h[0] == LLAMA_MAGIC)
		llama_from_header(h, c);
	if (gpt2_config_check(c, why, sizeof why)) {
		snprintf(err, errlen, "%s: bad header: %s", path, why);
		return -1;
	}
	return 0;
}

int gpt2_read_config(const char *path, struct gpt2_config *c, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	FILE *f = fopen(path, "rb");
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "cannot open model file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fread(hdr, sizeof hdr, 1, f) != 1)
		snprintf(err, errlen, "%s: cannot read the header: %s", path,
			 ferror(f) ? strerror(errno) : "file too short");
	else
		rc = gpt2_config_from_header(hdr, path, c, err, errlen);
	fclose(f);
	return rc;
}

struct load_args {
	const struct gpt2_config *c;
	const struct gpt2_shard *s;
	int fd;
	const char *path;
	float *tmp;
	float *local;                /* the shard's parameters */
	char *err;
	size_t errlen;
};

/* Read one chunk of the whole model from the file and keep the shard's slice. */
static int load_one(void *arg, int t, int l, size_t full_off, size_t local_off)
{
	struct load_args *a = arg;
	size_t bytes = full_chunk(a->c, t) * sizeof(float);
	off_t at = (off_t)(GPT2_HEADER_INTS * sizeof(int32_t) + full_off * sizeof(float));
	ssize_t k = pread_all(a->fd, a->tmp, bytes, at);

	(void)l;
	if (k != (ssize_t)bytes) {
		snprintf(a->err, a->errlen, "%s: truncated while reading the parameters%s%s",
			 a->path, k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
		return -1;
	}
	copy_chunk(a->c, a->s, t, a->tmp, a->local + local_off, 1);
	return 0;
}

int gpt2_load_shard(struct gpt2 *m, const char *path, const struct gpt2_shard *want, char *err,
		    size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	struct gpt2_config c;
	struct gpt2_shard s;
	struct load_args a = { .path = path, .err = err, .errlen = errlen };
	struct stat st;
	long long body;
	size_t full_params, sizes[GPT2_NUM_TENSORS];
	FILE *f = fopen(path, "rb");
	int rc = -1;
	char why[200];

	memset(m, 0, sizeof *m);
	if (!f) {
		snprintf(err, errlen, "cannot open model file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) < 0) {
		snprintf(err, errlen, "cannot stat model file %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((size_t)st.st_size < sizeof hdr) {
		snprintf(err, errlen, "%s: truncated: %lld bytes, shorter than the %zu-byte header",
			 path, (long long)st.st_size, sizeof hdr);
		goto fail;
	}
	if (fread(hdr, sizeof hdr, 1, f) != 1) {
		snprintf(err, errlen, "%s: cannot read the header: %s", path,
			 ferror(f) ? strerror(errno) : "file too short");
		goto fail;
	}
	if (gpt2_config_from_header(hdr, path, &c, err, errlen))
		goto fail;
	gpt2_shard_whole(&c, &s);
	if (want)
		s = *want;
	if (gpt2_shard_check(&c, &s, why, sizeof why)) {
		snprintf(err, errlen, "%s: cannot cut this model: %s", path, why);
		goto fail;
	}
	{
		struct gpt2_shard whole;

		gpt2_shard_whole(&c, &whole);
		full_params = gpt2_shard_sizes(&c, &whole, sizes);
	}
	body = (long long)st.st_size - (long long)sizeof hdr;
	if (body < (long long)(full_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: truncated: the header announces %zu parameters (%zu bytes), the file "
			 "has %lld bytes after the header",
			 path, full_params, full_params * sizeof(float), body);
		goto fail;
	}
	if (body > (long long)(full_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: %lld bytes after the %zu parameters the header announces: the file "
			 "does not match its header",
			 path, body - (long long)(full_params * sizeof(float)), full_params);
		goto fail;
	}
	rc = gpt2_alloc(m, &c, &s);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path, m->err);
		goto fail;
	}
	rc = -1;
	a.c = &c;
	a.s = &s;
	a.fd = fileno(f);
	if (!(a.tmp = alloc_floats(max_chunk(&c)))) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -2;
		goto fail;
	}
	a.local = m->params;
	if (for_each_chunk(&c, &s, load_one, &a))
		goto fail;
	free(a.tmp);
	fclose(f);
	return 0;
fail:
	free(a.tmp);
	fclose(f);
	gpt2_free(m);
	return rc;
}

int gpt2_load(struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	return gpt2_load_shard(m, path, NULL, err, errlen);
}

int gpt2_save(const struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	FILE *f;

	if (m->shard.tp_size != 1 || m->shard.first_layer != 0 ||
	    m->shard.last_layer != m->config.num_layers) {
		snprintf(err, errlen, "cannot write %s from a shard of the model", path);
		return -1;
	}
	if (!(f = fopen(path, "wb"))) {
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
 * Layers of storage a per-layer activation array gets: one per layer when
 * the forward pass keeps it, else one scratch layer that each layer's
 * forward pass (and its recomputation in the backward pass) overwrites.
 * The layer outputs (res3) are always kept: they are the next layer's
 * input, from which block recomputation starts.
 */
static size_t kept_layers(size_t L, enum gpt2_recompute r, enum gpt2_recompute drop_from)
{
	return r >= drop_from && L > 0 ? 1 : L;
}

/*
 * Point the fields of a at mem (NULL: only count) for (B, T) and the
 * shard's layers [first, last): per-layer arrays for those layers only (or
 * one scratch layer where recomputation r makes them again), the head
 * (final LayerNorm, logits, losses) only when the stage ends the model,
 * every width the shard's. Arrays of no size are NULL. Returns the floats
 * needed.
 */
static size_t layout_acts(struct gpt2_acts *a, float *mem, const struct gpt2_config *c,
			  const struct gpt2_shard *s, int B, int T, enum gpt2_recompute r)
{
	struct block_dims d = block_dims(c, s);
	size_t Lr = (size_t)(s->last_layer - s->first_layer), C = c->channels, BT = (size_t)B * T;
	size_t M = c->arch != MODEL_LLAMA; /* 1 where the norms keep a mean (LayerNorm) */
	size_t L = kept_layers(Lr, r, GPT2_RECOMPUTE_BLOCK);
	size_t Lg = kept_layers(Lr, r, GPT2_RECOMPUTE_GELU);
	size_t H = s->last_layer == c->num_layers; /* 1 if the stage has the head */
	struct {
		float **field;
		size_t n;
	} f[] = {
		{ &a->encoded, BT * C },
		{ &a->ln1, L * BT * C },	   { &a->ln1_mean, M * L * BT },
		{ &a->ln1_rstd, L * BT },	   { &a->qkvr, L * BT * d.qkvr_oc },
		{ &a->qkv, L * BT * d.qkv_oc },
		{ &a->atty, L * BT * d.att_c },	   { &a->att_stats, L * B * d.NH * T * OPS_ATT_STATS },
		{ &a->res2, L * BT * C },	   { &a->ln2, L * BT * C },
		{ &a->ln2_mean, M * L * BT },	   { &a->ln2_rstd, L * BT },
		{ &a->fch, L * BT * d.fc_oc },	   { &a->fch_gelu, Lg * BT * d.act_oc },
		{ &a->res3, Lr * BT * C },	   { &a->lnf, H * BT * C },
		{ &a->lnf_mean, M * H * BT },	   { &a->lnf_rstd, H * BT },
		{ &a->logits, H * BT * d.Vp },	   { &a->losses, H * BT },
		{ &a->vocab_rows, H * (s->tp_size > 1) * 2 * BT },
		{ &a->dres, BT * C },		   { &a->dln, BT * C },
		{ &a->datty, BT * d.att_c },	   { &a->dqkv, BT * d.qkv_oc },
		{ &a->dqkvr, BT * d.qkvr_oc },
		{ &a->dfch, BT * d.fc_oc },	   { &a->dfch_gelu, BT * d.act_oc },
		{ &a->dlnf, BT * C },
	};
	size_t total = 0;

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (mem)
			*f[i].field = f[i].n ? mem + total : NULL;
		total += (f[i].n + 15) / 16 * 16; /* keep every array on a cache line */
	}
	return total;
}

size_t gpt2_activation_floats(const struct gpt2_config *c, const struct gpt2_shard *s, int B,
			      int T, enum gpt2_recompute r)
{
	struct gpt2_acts a;

	return layout_acts(&a, NULL, c, s, B, T, r);
}

/* Save the current slot's fields into its record. */
static void save_slot(struct gpt2 *m)
{
	m->slots[m->slot] = (struct gpt2_slot){ .acts = m->acts, .inputs = m->inputs,
						.targets = m->targets,
						.have_targets = m->have_targets, .loss = m->loss,
						.dlogits_scale = m->dlogits_scale };
}

void gpt2_use_slot(struct gpt2 *m, int k)
{
	const struct gpt2_slot *s;

	if (k < 0 || k >= m->nslots || k == m->slot)
		return;
	save_slot(m);
	m->slot = k;
	s = &m->slots[k];
	m->acts = s->acts;
	m->inputs = s->inputs;
	m->targets = s->targets;
	m->have_targets = s->have_targets;
	m->loss = s->loss;
	m->dlogits_scale = s->dlogits_scale;
}

int gpt2_set_slots(struct gpt2 *m, int n)
{
	struct gpt2_slot *slots;

	if (n < 1)
		n = 1;
	if (n == m->nslots)
		return 0;
	if (!(slots = calloc((size_t)n, sizeof *slots)))
		return -2;
	forget_acts(m);
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
	m->slot = 0;
	return 0;
}

const char *gpt2_recompute_name(enum gpt2_recompute r)
{
	return r == GPT2_RECOMPUTE_BLOCK ? "block" : r == GPT2_RECOMPUTE_GELU ? "gelu" : "none";
}

void gpt2_set_layer_hook(struct gpt2 *m, void (*fn)(void *arg, struct gpt2 *m, int layer),
			 void *arg)
{
	m->layer_done = fn;
	m->layer_done_arg = arg;
}

int gpt2_layer_grads(const struct gpt2 *m, int l, float **p, size_t *n)
{
	size_t L = (size_t)(m->shard.last_layer - m->shard.first_layer);
	int k = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t per = per_layer(t) && L ? m->sizes[t] / L : 0;

		if (per) {
			p[k] = m->grad_tensors[t] + (size_t)(l - m->shard.first_layer) * per;
			n[k++] = per;
		}
	}
	return k;
}

int gpt2_global_grads(const struct gpt2 *m, float **p, size_t *n)
{
	int k = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		if (!per_layer(t) && m->sizes[t]) {
			p[k] = m->grad_tensors[t];
			n[k++] = m->sizes[t];
		}
	}
	return k;
}

size_t gpt2_grad_pieces(const struct gpt2 *m)
{
	size_t L = (size_t)(m->shard.last_layer - m->shard.first_layer);

	return (size_t)GPT2_NUM_TENSORS * (L + 1);
}

void gpt2_set_fused(struct gpt2 *m, int on, float loss_scale)
{
	m->fused = on;
	m->loss_scale = loss_scale > 0.0f ? loss_scale : 1.0f;
}

int gpt2_set_recompute(struct gpt2 *m, enum gpt2_recompute r)
{
	if (r != m->recompute) {
		forget_acts(m);
		m->recompute = r;
	}
	return 0;
}

/*
 * Make the activations of every slot fit (B, T); reuses the buffer when it
 * is large enough. Keeps the current slot.
 */
static int ensure_acts(struct gpt2 *m, int B, int T)
{
	size_t per, need, ntok = 2 * (size_t)B * T;

	if (m->act_mem && m->B == B && m->T == T)
		return arch_of(&m->config)->prepare(m, B, T);
	per = layout_acts(&m->acts, NULL, &m->config, &m->shard, B, T, m->recompute);
	need = per * (size_t)m->nslots;
	if (need > m->act_cap) {
		float *mem = m->ops->alloc(need * sizeof(float));

		if (!mem)
			goto nomem;
		if (m->act_mem)
			m->ops->free(m->act_mem);
		m->act_mem = mem;
		m->act_cap = need;
	}
	if (ntok * (size_t)m->nslots > m->tok_cap) {
		int *tok = m->ops->alloc(ntok * (size_t)m->nslots * sizeof(int));

		if (!tok)
			goto nomem;
		if (m->tok_mem)
			m->ops->free(m->tok_mem);
		m->tok_mem = tok;
		m->tok_cap = ntok * (size_t)m->nslots;
	}
	free(m->host_losses);
	if (!(m->host_losses = malloc((size_t)B * T * sizeof(float))))
		goto nomem;
	for (int k = 0; k < m->nslots; k++) {
		struct gpt2_slot *s = &m->slots[k];

		layout_acts(&s->acts, m->act_mem + (size_t)k * per, &m->config, &m->shard, B, T,
			    m->recompute);
		s->inputs = m->tok_mem + (size_t)k * ntok;
		s->targets = s->inputs + (size_t)B * T;
		s->have_targets = 0;
		s->loss = -1.0f;
	}
	m->acts = m->slots[m->slot].acts;
	m->inputs = m->slots[m->slot].inputs;
	m->targets = m->slots[m->slot].targets;
	m->have_targets = 0;
	m->B = B;
	m->T = T;
	m->act_first = m->shard.first_layer;
	m->act_last = m->shard.last_layer;
	return arch_of(&m->config)->prepare(m, B, T);
nomem:
	{
		char what[64];

		snprintf(what, sizeof what, "the activations of B=%d, T=%d", B, T);
		gpt2_oom_message(m->ops, what, per * (size_t)m->nslots * sizeof(float), m->err,
				 sizeof m->err);
	}
	return -2;
}

/* ------------------------------------------------------------ blocks */

/*
 * Make again what the forward pass of layer l did not keep: under block
 * recomputation the whole layer runs forward again from its kept input
 * (its tensor-parallel all-reduces too, which every rank of the group
 * makes in the same order); under GELU recomputation the MLP's
 * activation of fc's kept output. Same kernels, same inputs: the same
 * bits as the first time.
 */
static int recompute_layer(struct gpt2 *m, int l)
{
	const struct arch *a = arch_of(&m->config);

	if (m->recompute == GPT2_RECOMPUTE_BLOCK)
		return a->block_forward(m, l);
	if (m->recompute == GPT2_RECOMPUTE_GELU)
		a->activation_again(m, l);
	return 0;
}

static int block_backward(struct gpt2 *m, int l)
{
	if (recompute_layer(m, l))
		return -1;
	return arch_of(&m->config)->block_backward(m, l);
}

/* ------------------------------------------------------------ passes */

static int check_batch(struct gpt2 *m, int B, int T)
{
	const struct gpt2_config *c = &m->config;

	if (B <= 0 || T <= 0 || T > c->max_seq_len) {
		snprintf(m->err, sizeof m->err,
			 "batch B=%d, T=%d does not fit the model (1 <= T <= max_seq_len %d)", B, T,
			 c->max_seq_len);
		return -1;
	}
	return 0;
}

/* Copy n host tokens into dst (the backend's memory), checking each is a vocabulary id. */
static int copy_tokens(struct gpt2 *m, int *dst, const int *src, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (src[i] < 0 || src[i] >= m->config.vocab_size) {
			snprintf(m->err, sizeof m->err,
				 "%s token %d at position %zu is outside the vocabulary [0, %d)", what,
				 src[i], i, m->config.vocab_size);
			return -1;
		}
	}
	m->ops->upload(dst, src, n * sizeof(int));
	return 0;
}

/* The LM head: a tensor of its own (untied), else the token embedding. */
static float *head_weight(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS])
{
	return m->sizes[GPT2_LMHEAD] ? t[GPT2_LMHEAD] : t[GPT2_WTE];
}

/* The position embedding, or NULL (rotary positions). */
static float *position_weight(const struct gpt2 *m, float *const t[GPT2_NUM_TENSORS])
{
	return m->sizes[GPT2_WPE] ? t[GPT2_WPE] : NULL;
}

/*
 * Final norm, LM head (the tied embedding or its own), softmax and loss (the
 * mean over the batch in *loss). A tensor-parallel shard holds Vp/tp rows
 * of the head: its logits are its vocabulary slice, and the softmax is
 * taken across the slices (tensor_parallel.c) without gathering them.
 * With fused kernels, a pass with targets ends in the fused classifier:
 * the logits then hold their gradient for m->loss_scale already.
 */
static int head_forward(struct gpt2 *m, int have_targets, float *loss)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	struct block_dims d = block_dims(c, &m->shard);
	int N = m->B * m->T, C = c->channels;
	const int *targets = have_targets ? m->targets : NULL;
	double sum = 0.0;

	arch_of(c)->final_norm_forward(m, layer_input(m, c->num_layers));
	o->matmul_forward(a->logits, a->lnf, head_weight(m, m->tensors), NULL, N, C, d.Vp);
	m->dlogits_scale = 0.0f;
	if (m->shard.tp_size == 1 && targets && m->fused && o->softmax_xent_fused) {
		o->softmax_xent_fused(a->losses, a->logits, targets, m->loss_scale / N, N,
				      c->vocab_size, c->padded_vocab_size);
		m->dlogits_scale = m->loss_scale;
	} else if (m->shard.tp_size == 1) {
		o->softmax_xent_forward(a->losses, a->logits, targets, N, c->vocab_size,
					c->padded_vocab_size);
	} else if (tp_softmax_xent_forward(m, a->losses, a->logits, targets, N)) {
		return -1;
	}
	*loss = 0.0f;
	if (!have_targets)
		return 0;
	/* the losses come to the host (N floats) and are added there in row
	 * order, so every backend's mean loss is the same fold */
	o->download(m->host_losses, a->losses, (size_t)N * sizeof(float));
	for (int i = 0; i < N; i++)
		sum += m->host_losses[i];
	*loss = (float)(sum / N);
	return 0;
}

/* Say which pass and block the model is in (a hang's report reads it). */
static void where_now(struct gpt2 *m, int phase, int layer)
{
	if (!m->where)
		return;
	atomic_store_explicit(&m->where->layer, layer, memory_order_relaxed);
	atomic_store_explicit(&m->where->phase, phase, memory_order_relaxed);
}

/* Token and position embedding of the stage's inputs into acts.encoded. */
static int embed(struct gpt2 *m)
{
	if (m->shard.tp_size > 1)
		return tp_encoder_forward(m, m->acts.encoded, m->inputs, m->B, m->T);
	m->ops->encoder_forward(m->acts.encoded, m->inputs, m->tensors[GPT2_WTE],
				position_weight(m, m->tensors), m->B, m->T, m->config.channels);
	return 0;
}

int gpt2_stage_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T,
		       const float *x_in, float *x_out, float *loss)
{
	size_t BTC = (size_t)B * T * m->config.channels;
	int first = m->shard.first_layer, last = m->shard.last_layer, rc;
	float l = 0.0f;

	m->have_targets = 0;
	m->loss = -1.0f;
	where_now(m, GPT2_PHASE_FORWARD, -1);
	if (check_batch(m, B, T))
		return -1;
	rc = ensure_acts(m, B, T);
	if (rc)
		return rc;
	if (targets && copy_tokens(m, m->targets, targets, (size_t)B * T, "target"))
		return -1;
	if (first == 0) {
		if (copy_tokens(m, m->inputs, inputs, (size_t)B * T, "input") || embed(m))
			return -1;
	} else {
		m->ops->copy(layer_input(m, first), x_in, BTC * sizeof(float));
	}
	for (int k = first; k < last; k++) {
		where_now(m, GPT2_PHASE_FORWARD, k);
		if (arch_of(&m->config)->block_forward(m, k))
			return -1;
	}
	where_now(m, GPT2_PHASE_FORWARD, last);
	if (last < m->config.num_layers) {
		m->ops->copy(x_out, layer_input(m, last), BTC * sizeof(float));
		return 0;
	}
	if (head_forward(m, targets != NULL, &l))
		return -1;
	m->have_targets = targets != NULL;
	m->loss = m->have_targets ? l : 0.0f;
	if (loss)
		*loss = m->loss;
	return 0;
}

float gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T)
{
	float loss = 0.0f;

	if (m->shard.first_layer != 0 || m->shard.last_layer != m->config.num_layers) {
		snprintf(m->err, sizeof m->err,
			 "a forward pass of the whole model on a pipeline stage (layers [%d, %d))",
			 m->shard.first_layer, m->shard.last_layer);
		return NAN;
	}
	if (gpt2_stage_forward(m, inputs, targets, B, T, NULL, NULL, &loss))
		return NAN;
	return loss;
}

int gpt2_zero_grad(struct gpt2 *m)
{
	if (!m->grads) {
		size_t n = m->num_params + m->grad_pad + 1;

		m->grads = m->ops->alloc(n * sizeof(float));
		if (!m->grads) {
			gpt2_oom_message(m->ops, "the gradients", n * sizeof(float), m->err,
					 sizeof m->err);
			return -2;
		}
		m->ops->zero(m->grads, n);
		point_tensors(m->grad_tensors, m->grads, m->sizes);
		return 0;
	}
	m->ops->zero(m->grads, m->num_params);
	return 0;
}

/* Gradient from the loss back to dres (the gradient of the last layer's output). */
static int head_backward(struct gpt2 *m, float loss_scale)
{
	const struct ops *o = m->ops;
	const struct gpt2_config *c = &m->config;
	struct gpt2_acts *a = &m->acts;
	struct block_dims d = block_dims(c, &m->shard);
	int N = m->B * m->T, C = c->channels;

	if (m->dlogits_scale > 0.0f) {
		/* the fused classifier's gradient, for the scale it expected */
		if (loss_scale != m->dlogits_scale)
			o->scale(a->logits, (size_t)N * d.Vp, loss_scale / m->dlogits_scale);
	} else if (m->shard.tp_size == 1) {
		o->softmax_xent_backward(a->logits, m->targets, loss_scale / N, N, c->vocab_size,
					 c->padded_vocab_size);
	} else {
		tp_softmax_xent_backward(m, a->logits, m->targets, loss_scale / N, N);
	}
	o->zero(a->dlnf, (size_t)N * C);
	o->matmul_backward(a->dlnf, head_weight(m, m->grad_tensors), NULL, a->logits, a->lnf,
			   head_weight(m, m->tensors), N, C, d.Vp);
	if (tp_allreduce(m, a->dlnf, (size_t)N * C))
		return -1;
	o->zero(a->dres, (size_t)N * C);
	arch_of(c)->final_norm_backward(m, layer_input(m, c->num_layers));
	return 0;
}

int gpt2_stage_backward(struct gpt2 *m, float loss_scale, const float *dx_out, float *dx_in)
{
	size_t BTC = (size_t)m->B * m->T * m->config.channels;
	int first = m->shard.first_layer, last = m->shard.last_layer;

	if (!m->grads || !m->act_mem) {
		snprintf(m->err, sizeof m->err,
			 "backward pass without %s", !m->grads ? "gradients (call gpt2_zero_grad)" :
								"a forward pass");
		return -1;
	}
	if (last == m->config.num_layers) {
		if (!m->have_targets) {
			snprintf(m->err, sizeof m->err,
				 "backward pass without a forward pass with targets");
			return -1;
		}
		if (head_backward(m, loss_scale))
			return -1;
		m->have_targets = 0; /* the logits now hold their gradient */
	} else {
		m->ops->copy(m->acts.dres, dx_out, BTC * sizeof(float));
	}
	for (int l = last - 1; l >= first; l--) {
		where_now(m, GPT2_PHASE_BACKWARD, l);
		if (block_backward(m, l))
			return -1;
		if (m->layer_done)
			m->layer_done(m->layer_done_arg, m, l);
	}
	if (first > 0)
		m->ops->copy(dx_in, m->acts.dres, BTC * sizeof(float));
	else if (m->shard.tp_size > 1)
		tp_encoder_backward(m, m->grad_tensors[GPT2_WTE], position_weight(m, m->grad_tensors),
				    m->acts.dres, m->inputs, m->B, m->T);
	else
		m->ops->encoder_backward(m->grad_tensors[GPT2_WTE], position_weight(m, m->grad_tensors),
					 m->acts.dres, m->inputs, m->B, m->T, m->config.channels);
	return 0;
}

int gpt2_backward(struct gpt2 *m, float loss_scale)
{
	return gpt2_stage_backward(m, loss_scale, NULL, NULL);
}

void gpt2_params_to_host(const struct gpt2 *m, float *dst)
{
	m->ops->download(dst, m->params, m->num_params * sizeof(float));
}

void gpt2_free(struct gpt2 *m)
{
	if (m->ops) {
		drop_work_memory(m);
		m->ops->free(m->params);
	}
	free(m->slots);
	memset(m, 0, sizeof *m);
}
