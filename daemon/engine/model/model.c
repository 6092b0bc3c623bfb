/*
 * daemon/engine/model/model.c - a model's parameters in memory, the same
 * for every architecture (see model.h): the buffers of a shard's tensors,
 * their move to a backend (struct ops), their initialisation from a seed
 * and a shard cut from the full parameters. The shapes are model_shape.c's,
 * files model_file.c's, the passes model_pass.c's; what differs from one
 * architecture to the next comes from daemon/engine/model/arch/.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/model_internal.h"
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

float *model_alloc_floats(size_t n)
{
	return big_alloc(n * sizeof(float));
}

/* Point tensors[] into buf following sizes. */
void model_point_tensors(float *tensors[GPT2_NUM_TENSORS], float *buf,
			  const size_t sizes[GPT2_NUM_TENSORS])
{
	for (int i = 0; i < GPT2_NUM_TENSORS; i++) {
		tensors[i] = buf;
		buf += sizes[i];
	}
}

/* Free the activations and token copies: the next forward pass lays them out again. */
void model_forget_acts(struct gpt2 *m)
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
void model_drop_work_memory(struct gpt2 *m)
{
	model_forget_acts(m);
	if (m->grads)
		m->ops->free(m->grads);
	free(m->host_losses);
	m->grads = NULL;
	m->host_losses = NULL;
	memset(m->grad_tensors, 0, sizeof m->grad_tensors);
}

/* Sizes and an uninitialised parameter buffer for shard s of config c. */
int gpt2_alloc(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s)
{
	memset(m, 0, sizeof *m);
	m->config = *c;
	m->shard = *s;
	m->ops = &ops_cpu;
	m->loss = -1.0f;
	m->num_params = gpt2_shard_sizes(c, s, m->sizes);
	m->nslots = 1;
	m->slots = calloc(1, sizeof *m->slots);
	m->params = model_alloc_floats(m->num_params ? m->num_params : 1);
	if (!m->params || !m->slots) {
		char what[64];

		snprintf(what, sizeof what, "%zu parameters", m->num_params);
		gpt2_oom_message(m->ops, what, m->num_params * sizeof(float), m->err, sizeof m->err);
		return -2;
	}
	model_point_tensors(m->tensors, m->params, m->sizes);
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
	model_drop_work_memory(m);
	m->ops->free(m->params);
	m->ops = o;
	m->params = p;
	model_point_tensors(m->tensors, m->params, m->sizes);
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
	size_t n = model_full_chunk(c, t), real = n;
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
	model_copy_chunk(a->c, a->s, t, a->tmp, a->local + local_off, 1);
	return 0;
}

/* Floats of the largest chunk: scratch for building or reading one chunk at a time. */
size_t model_max_chunk(const struct gpt2_config *c)
{
	size_t n = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++)
		n = model_full_chunk(c, t) > n ? model_full_chunk(c, t) : n;
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
	if (s->tp_size > 1 && !(a.tmp = model_alloc_floats(model_max_chunk(c)))) {
		gpt2_free(m);
		snprintf(m->err, sizeof m->err, "out of memory for the model");
		return -2;
	}
	a.local = m->params;
	model_for_each_chunk(c, s, build_one, &a);
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

void gpt2_params_to_host(const struct gpt2 *m, float *dst)
{
	m->ops->download(dst, m->params, m->num_params * sizeof(float));
}

void gpt2_free(struct gpt2 *m)
{
	if (m->ops) {
		model_drop_work_memory(m);
		m->ops->free(m->params);
	}
	free(m->slots);
	memset(m, 0, sizeof *m);
}
