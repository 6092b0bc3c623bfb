/*
 * daemon/engine/model/model_shape.c - the model's shapes as arithmetic: a
 * configuration's checks, each tensor's size, and a shard (a stage's
 * layers and a tensor-parallel slice) as sizes and as pieces of the full
 * tensors. Nothing here allocates or computes; the architecture
 * (daemon/engine/model/arch/) says how each tensor is split.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/model_internal.h"
#include "daemon/engine/model/arch/arch.h"

#include <stdio.h>
#include <string.h>

int gpt2_config_check(const struct gpt2_config *c, char *err, size_t errlen)
{
	const struct {
		const char *name;
		int value, max;
	} f[] = {
		{ "max_seq_len", c->max_seq_len, GPT2_MAX_SEQ_LEN },
		{ "vocab_size", c->vocab_size, GPT2_MAX_VOCAB },
		{ "padded_vocab_size", c->padded_vocab_size, GPT2_MAX_VOCAB },
		{ "layers", c->num_layers, GPT2_MAX_LAYERS },
		{ "heads", c->num_heads, GPT2_MAX_HEADS },
		{ "channels", c->channels, GPT2_MAX_CHANNELS },
	};

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].value <= 0) {
			snprintf(err, errlen, "model %s is %d: it must be positive", f[i].name,
				 f[i].value);
			return -1;
		}
		if (f[i].value > f[i].max) {
			snprintf(err, errlen, "model %s is %d: more than the %d any model may have",
				 f[i].name, f[i].value, f[i].max);
			return -1;
		}
	}
	/* Llama's: 0 in a GPT-2 configuration (as many as heads, 4C) */
	if (c->kv_heads < 0 || c->kv_heads > GPT2_MAX_HEADS) {
		snprintf(err, errlen, "model kv_heads is %d: it must be 0 to %d", c->kv_heads,
			 GPT2_MAX_HEADS);
		return -1;
	}
	if (c->intermediate < 0 || c->intermediate > GPT2_MAX_INTERMEDIATE) {
		snprintf(err, errlen, "model intermediate_size is %d: it must be 0 to %d",
			 c->intermediate, GPT2_MAX_INTERMEDIATE);
		return -1;
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
size_t model_full_chunk(const struct gpt2_config *c, int t)
{
	return arch_of(c)->chunk(c, t);
}

size_t gpt2_chunk_floats(const struct gpt2_config *c, enum gpt2_tensor t)
{
	return model_full_chunk(c, t);
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
	return is_split(c, t) ? model_full_chunk(c, t) / (size_t)s->tp_size : model_full_chunk(c, t);
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
		piece_run_add(run, full, local, model_full_chunk(c, t));
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
void model_copy_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, int t, float *full,
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
int model_for_each_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, model_chunk_fn *fn,
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
			full_off += model_full_chunk(c, t);
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

	model_for_each_chunk(c, s, pieces_of_chunk, &a);
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
