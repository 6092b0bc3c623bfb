/*
 * t/unit/check_model.c - the model (daemon/engine/model/model.c, GPT-2 and Llama) and its optimizer
 * (daemon/engine/model/optimizer.c): gradients against finite differences, llm.c file
 * round trips and errors, determinism, pipeline stages, AdamW, the
 * learning-rate schedule and clipping.
 *
 * All on a tiny model (2 layers, 2 heads, 8 channels, vocabulary 11 padded
 * to 16) so the whole suite runs in well under a second.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "lib/comm/comm.h"
#include "lib/rng.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct gpt2_config tiny = { .max_seq_len = 8, .vocab_size = 11,
					 .padded_vocab_size = 16, .num_layers = 2,
					 .num_heads = 2, .channels = 8 };
/* The same sizes as a Llama: one key-value head for both query heads, rope scaling on, untied. */
static const struct gpt2_config tiny_llama = {
	.max_seq_len = 8, .vocab_size = 11, .padded_vocab_size = 16, .num_layers = 2,
	.num_heads = 2, .channels = 8, .arch = MODEL_LLAMA, .kv_heads = 1, .intermediate = 12,
	.untied = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_factor = 8.0f,
	.rope_low_freq_factor = 1.0f, .rope_high_freq_factor = 4.0f,
	.rope_original_max_positions = 4,
};
static const struct gpt2_config *const archs[] = { &tiny, &tiny_llama };
enum { B = 2, T = 4 };
static const int inputs[B * T] = { 1, 5, 9, 2, 10, 0, 3, 3 };
static const int targets[B * T] = { 5, 9, 2, 7, 0, 3, 3, 4 };

static void build(struct gpt2 *m, uint64_t seed)
{
	ck_assert_msg(gpt2_build(m, &tiny, seed) == 0, "build: %s", m->err);
}

static char tmp_path[256];

static const char *tmpfile_path(const char *name)
{
	snprintf(tmp_path, sizeof tmp_path, "/tmp/check_model.%d.%s", (int)getpid(), name);
	return tmp_path;
}

/* ------------------------------------------------------------ build */

START_TEST(test_build_is_deterministic)
{
	struct gpt2 a, b, c;

	build(&a, 7);
	build(&b, 7);
	build(&c, 8);
	ck_assert_uint_eq(a.num_params, b.num_params);
	ck_assert_msg(!memcmp(a.params, b.params, a.num_params * sizeof(float)),
		      "same seed, different parameters");
	ck_assert_msg(memcmp(a.params, c.params, a.num_params * sizeof(float)),
		      "different seeds, same parameters");
	gpt2_free(&a);
	gpt2_free(&b);
	gpt2_free(&c);
}
END_TEST

START_TEST(test_build_uses_gpt2_initialisation)
{
	struct gpt2_config big = { .max_seq_len = 64, .vocab_size = 100, .padded_vocab_size = 128,
				   .num_layers = 4, .num_heads = 4, .channels = 64 };
	struct gpt2 m;
	double s2 = 0;
	size_t n;

	ck_assert_int_eq(gpt2_build(&m, &big, 1), 0);
	/* llm.c's parameter count for these sizes: 12 L C^2 + 13 L C + (Vp + maxT + 2) C */
	ck_assert_uint_eq(m.num_params, 12u * 4 * 64 * 64 + 13u * 4 * 64 + (128u + 64 + 2) * 64);
	for (size_t i = 0; i < m.sizes[GPT2_LN1W]; i++)
		ck_assert_float_eq(m.tensors[GPT2_LN1W][i], 1.0f);
	for (size_t i = 0; i < m.sizes[GPT2_QKVB]; i++)
		ck_assert_float_eq(m.tensors[GPT2_QKVB][i], 0.0f);
	for (size_t i = 100 * 64; i < m.sizes[GPT2_WTE]; i++)
		ck_assert_msg(m.tensors[GPT2_WTE][i] == 0.0f, "padding row of wte not zero");
	n = m.sizes[GPT2_FCW];
	for (size_t i = 0; i < n; i++)
		s2 += (double)m.tensors[GPT2_FCW][i] * m.tensors[GPT2_FCW][i];
	/* 65536 draws: the sample std is within 1% of 0.02 with overwhelming probability */
	ck_assert_msg(fabs(sqrt(s2 / n) - 0.02) < 0.0004, "fcw std %g", sqrt(s2 / n));
	s2 = 0;
	n = m.sizes[GPT2_FCPROJW];
	for (size_t i = 0; i < n; i++)
		s2 += (double)m.tensors[GPT2_FCPROJW][i] * m.tensors[GPT2_FCPROJW][i];
	ck_assert_msg(fabs(sqrt(s2 / n) - 0.02 / sqrt(8.0)) < 0.0002, "fcprojw std %g",
		      sqrt(s2 / n));
	gpt2_free(&m);
}
END_TEST

START_TEST(test_rng_skip_lands_where_the_draws_would)
{
	static const uint64_t counts[] = { 0, 1, 2, 63, 64, 65, 1000, (1u << 20) + 3, 3u << 21 };

	for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
		uint64_t drawn = rng_seed(5, k), jumped = drawn;

		for (uint64_t i = 0; i < counts[k]; i++)
			rng_u32(&drawn);
		rng_skip(&jumped, counts[k]);
		ck_assert_msg(drawn == jumped, "skip %llu: %016llx, drawn %016llx",
			      (unsigned long long)counts[k], (unsigned long long)jumped,
			      (unsigned long long)drawn);
	}
}
END_TEST

/*
 * The embedding of this model is over two blocks of the parallel fill
 * (2.1 M normals): on 1 and on 3 threads it is the one stream of its
 * (tensor, layer) drawn in order, padding rows 0, and so is everything else.
 */
START_TEST(test_build_draws_each_matrix_as_one_stream)
{
	struct gpt2_config c = { .max_seq_len = 16, .vocab_size = 4100, .padded_vocab_size = 4224,
				 .num_layers = 1, .num_heads = 8, .channels = 512 };
	size_t real = (size_t)c.vocab_size * c.channels;
	uint64_t st = rng_seed(3, (uint64_t)GPT2_WTE * 65536);
	struct gpt2 one, three;

	ops_cpu_set_threads(1);
	ck_assert_int_eq(gpt2_build(&one, &c, 3), 0);
	ops_cpu_set_threads(3);
	ck_assert_int_eq(gpt2_build(&three, &c, 3), 0);
	ops_cpu_set_threads(0);
	ck_assert_msg(!memcmp(one.params, three.params, one.num_params * sizeof(float)),
		      "1 and 3 threads built different parameters");
	for (size_t i = 0; i < real; i++) {
		float want = rng_normal(&st, 0.0f, 0.02f);

		if (three.tensors[GPT2_WTE][i] != want)
			ck_abort_msg("wte[%zu] = %.9g, the stream's draw %zu is %.9g", i,
				     three.tensors[GPT2_WTE][i], i, want);
	}
	for (size_t i = real; i < three.sizes[GPT2_WTE]; i++)
		ck_assert_msg(three.tensors[GPT2_WTE][i] == 0.0f, "padding wte[%zu] not 0", i);
	gpt2_free(&one);
	gpt2_free(&three);
}
END_TEST

START_TEST(test_build_rejects_bad_sizes)
{
	struct gpt2 m;
	struct gpt2_config c = tiny;

	c.channels = 9; /* not a multiple of 2 heads */
	ck_assert_int_eq(gpt2_build(&m, &c, 1), -1);
	ck_assert_msg(strstr(m.err, "channels"), "message: %s", m.err);
	c = tiny;
	c.num_layers = 0;
	ck_assert_int_eq(gpt2_build(&m, &c, 1), -1);
	ck_assert_msg(strstr(m.err, "layers is 0"), "message: %s", m.err);
}
END_TEST

/* ------------------------------------------------------------ gradients */

/*
 * Parameters spread wider than GPT-2's init (std 0.3 instead of 0.02) so
 * that every tensor's gradient is large enough to compare.
 */
static void spread(struct gpt2 *m)
{
	uint64_t st = rng_seed(3, 0);

	for (size_t i = 0; i < m->num_params; i++)
		m->params[i] += rng_normal(&st, 0.0f, 0.3f);
}

START_TEST(test_gradients_match_finite_differences)
{
	const struct gpt2_config *c = archs[_i];
	struct gpt2 m;
	float *g;

	ck_assert_msg(gpt2_build(&m, c, 11) == 0, "build: %s", m.err);
	spread(&m);
	gpt2_zero_grad(&m);
	gpt2_forward(&m, inputs, targets, B, T);
	ck_assert_int_eq(gpt2_backward(&m, 1.0f), 0);
	g = malloc(m.num_params * sizeof(float));
	memcpy(g, m.grads, m.num_params * sizeof(float));
	/*
	 * Central differences of the float model with h = 1e-2. The loss is a
	 * float (~2.5, rounding ~3e-7) summed in double, so the difference
	 * quotient carries ~3e-5 of rounding noise; the h^2 truncation term is
	 * ~1e-4 * |f'''| ~ 1e-4. We allow 1e-3 absolute plus 2% relative:
	 * ten times that noise, while a wrong formula is off by O(|g|).
	 */
	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t n = m.sizes[t], step = n / 7 + 1;
		int checked = 0;

		if (!n) /* a tensor this architecture has not */
			continue;

		for (size_t i = 0; i < n; i += step) {
			float *p = m.tensors[t] + i, save = *p;
			double lp, lm, fd, an = g[(size_t)(p - m.params)];

			if ((t == GPT2_WTE || t == GPT2_LMHEAD) &&
			    i >= (size_t)tiny.vocab_size * tiny.channels)
				continue; /* padding rows: checked to be 0 below */
			if (t == GPT2_WPE && i >= (size_t)T * tiny.channels)
				continue; /* positions beyond T get no gradient */
			*p = save + 1e-2f;
			lp = gpt2_forward(&m, inputs, targets, B, T);
			*p = save - 1e-2f;
			lm = gpt2_forward(&m, inputs, targets, B, T);
			*p = save;
			/* the float step actually taken is (save+h)-(save-h) */
			fd = (lp - lm) / ((double)(save + 1e-2f) - (double)(save - 1e-2f));
			ck_assert_msg(fabs(fd - an) <= 1e-3 + 0.02 * fabs(fd),
				      "%s %s[%zu]: backward %g, finite difference %g",
				      model_arch_name(c->arch), gpt2_tensor_name(t), i, an, fd);
			checked++;
		}
		ck_assert_msg(checked > 0, "no element of %s checked", gpt2_tensor_name(t));
	}
	for (size_t i = (size_t)tiny.vocab_size * tiny.channels; i < m.sizes[GPT2_WTE]; i++)
		ck_assert_msg(g[i] == 0.0f, "padding row of wte has gradient %g", g[i]);
	free(g);
	gpt2_free(&m);
}
END_TEST

START_TEST(test_forward_backward_is_deterministic)
{
	struct gpt2 m;
	float l1, l2, *g;

	build(&m, 5);
	gpt2_zero_grad(&m);
	l1 = gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	g = malloc(m.num_params * sizeof(float));
	memcpy(g, m.grads, m.num_params * sizeof(float));
	gpt2_zero_grad(&m);
	l2 = gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	ck_assert_msg(l1 == l2, "losses %.9g and %.9g differ", l1, l2);
	ck_assert_msg(!memcmp(g, m.grads, m.num_params * sizeof(float)), "gradients differ");
	/* an untrained model predicts roughly uniformly over the 11 tokens */
	ck_assert_msg(fabs(l1 - log(11.0)) < 0.1, "initial loss %g, want ~ln 11", l1);
	free(g);
	gpt2_free(&m);
}
END_TEST

START_TEST(test_backward_accumulates_scaled_gradients)
{
	struct gpt2 m;
	float *g;

	build(&m, 5);
	gpt2_zero_grad(&m);
	gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	g = malloc(m.num_params * sizeof(float));
	memcpy(g, m.grads, m.num_params * sizeof(float));
	gpt2_zero_grad(&m);
	for (int k = 0; k < 2; k++) {
		gpt2_forward(&m, inputs, targets, B, T);
		gpt2_backward(&m, 0.5f);
	}
	for (size_t i = 0; i < m.num_params; i++)
		ck_assert_msg(fabsf(m.grads[i] - g[i]) <= 1e-6f * (1 + fabsf(g[i])),
			      "two half micro-steps != one step at %zu", i);
	free(g);
	gpt2_free(&m);
}
END_TEST

/* A shard of config c: TP slice k of n, layers [first, last). */
static struct gpt2_shard shard_of(const struct gpt2_config *c, int k, int n, int first, int last)
{
	struct gpt2_shard s;

	gpt2_shard_whole(c, &s);
	s.tp_rank = k;
	s.tp_size = n;
	s.first_layer = first;
	s.last_layer = last;
	return s;
}

/*
 * Two stages, one model object each (as two pipeline ranks): the loss is
 * the whole model's bit for bit, and so are the gradients once the two
 * stages' gradients are placed in the whole model's layout, except for the
 * tied embedding: it gets its LM-head part in the last stage and its
 * embedding part (one term per occurrence of a token) in the first, which
 * the whole model adds up in another order, so those agree to float
 * rounding (1e-6 relative).
 */
START_TEST(test_pipeline_stages_equal_whole_model)
{
	struct gpt2 m, s0, s1;
	struct gpt2_shard h0 = shard_of(&tiny, 0, 1, 0, 1), h1 = shard_of(&tiny, 0, 1, 1, 2);
	float whole, staged, x[B * T * 8], dx[B * T * 8], *g0, *g1;

	build(&m, 9);
	ck_assert_int_eq(gpt2_build_shard(&s0, &tiny, &h0, 9), 0);
	ck_assert_int_eq(gpt2_build_shard(&s1, &tiny, &h1, 9), 0);
	ck_assert_uint_lt(s0.num_params, m.num_params);
	ck_assert_uint_eq(s1.sizes[GPT2_WPE], 0);  /* the position embedding is the first stage's */
	ck_assert_uint_eq(s0.sizes[GPT2_LNFW], 0); /* the final LayerNorm the last stage's */
	ck_assert_uint_eq(s0.sizes[GPT2_WTE], s1.sizes[GPT2_WTE]); /* tied: both ends */
	gpt2_zero_grad(&m);
	gpt2_zero_grad(&s0);
	gpt2_zero_grad(&s1);
	whole = gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	ck_assert_int_eq(gpt2_stage_forward(&s0, inputs, NULL, B, T, NULL, x, NULL), 0);
	ck_assert_int_eq(gpt2_stage_forward(&s1, NULL, targets, B, T, x, NULL, &staged), 0);
	ck_assert_msg(whole == staged, "loss %g whole, %g in two stages", whole, staged);
	ck_assert_int_eq(gpt2_stage_backward(&s1, 1.0f, NULL, dx), 0);
	ck_assert_int_eq(gpt2_stage_backward(&s0, 1.0f, dx, NULL), 0);
	g0 = calloc(m.num_params, sizeof *g0);
	g1 = calloc(m.num_params, sizeof *g1);
	gpt2_shard_copy(&tiny, &h0, g0, s0.grads, 0);
	gpt2_shard_copy(&tiny, &h1, g1, s1.grads, 0);
	for (size_t i = 0; i < m.num_params; i++) {
		float sum = g0[i] + g1[i], tol = 0.0f;

		if (i < m.sizes[GPT2_WTE])
			tol = 1e-6f * (fabsf(g0[i]) + fabsf(g1[i]));
		ck_assert_msg(fabsf(sum - m.grads[i]) <= tol,
			      "gradient %zu: %.9g + %.9g in two stages, %.9g whole", i,
			      (double)g0[i], (double)g1[i], (double)m.grads[i]);
	}
	free(g0);
	free(g1);
	gpt2_free(&m);
	gpt2_free(&s0);
	gpt2_free(&s1);
}
END_TEST

/*
 * A 4-layer model cut in two stages of 2 layers: each stage's activations
 * are about half the whole model's per-layer arrays (plus the shared
 * scratch), and only the last stage holds the logits.
 */
START_TEST(test_stage_allocates_activations_for_its_own_layers)
{
	struct gpt2_config c4 = tiny;
	struct gpt2 m, s0, s1;
	struct gpt2_shard h0, h1;
	float x[B * T * 8], loss;
	size_t logits = (size_t)B * T * tiny.padded_vocab_size;

	c4.num_layers = 4;
	h0 = shard_of(&c4, 0, 1, 0, 2);
	h1 = shard_of(&c4, 0, 1, 2, 4);
	ck_assert_int_eq(gpt2_build(&m, &c4, 3), 0);
	ck_assert_int_eq(gpt2_build_shard(&s0, &c4, &h0, 3), 0);
	ck_assert_int_eq(gpt2_build_shard(&s1, &c4, &h1, 3), 0);
	ck_assert(gpt2_forward(&m, inputs, targets, B, T) > 0);
	ck_assert_int_eq(gpt2_stage_forward(&s0, inputs, NULL, B, T, NULL, x, NULL), 0);
	ck_assert_int_eq(gpt2_stage_forward(&s1, NULL, targets, B, T, x, NULL, &loss), 0);
	ck_assert_ptr_null(s0.acts.logits);
	ck_assert_ptr_nonnull(s1.acts.logits);
	/* without the head, half the layers: below half of what the whole model holds */
	ck_assert_msg(s0.act_cap < (m.act_cap - logits) / 2 + m.act_cap / 8,
		      "first stage holds %zu floats, the whole model %zu", s0.act_cap, m.act_cap);
	ck_assert_msg(s1.act_cap - logits < (m.act_cap - logits) / 2 + m.act_cap / 8,
		      "last stage holds %zu floats, the whole model %zu", s1.act_cap, m.act_cap);
	/* a stage is not the whole model */
	ck_assert(isnan(gpt2_forward(&s1, inputs, targets, B, T)));
	ck_assert_msg(strstr(s1.err, "[2, 4)"), "%s", s1.err);
	gpt2_free(&m);
	gpt2_free(&s0);
	gpt2_free(&s1);
}
END_TEST

/*
 * Shards hold exactly their slice of the whole model: building a shard
 * gives the whole model's values there, and the shards of every layout
 * together write back every parameter of the whole model exactly once
 * (up to the replicas, which agree).
 */
START_TEST(test_shards_tile_the_whole_model)
{
	static const int layouts[][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 }, { 2, 2 } }; /* tp, pp */
	struct gpt2 m;
	float *back = malloc(sizeof(float) * 100000);

	build(&m, 21);
	for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
		int tp = layouts[k][0], pp = layouts[k][1];
		size_t total = 0;

		memset(back, 0xff, m.num_params * sizeof(float)); /* NaN */
		for (int st = 0; st < pp; st++) {
			for (int r = 0; r < tp; r++) {
				struct gpt2_shard h = shard_of(&tiny, r, tp, st, st + 1);
				struct gpt2 s;
				float *slice;

				if (pp == 1)
					h.last_layer = 2;
				ck_assert_int_eq(gpt2_build_shard(&s, &tiny, &h, 21), 0);
				slice = malloc(s.num_params * sizeof(float));
				gpt2_shard_copy(&tiny, &h, m.params, slice, 1);
				ck_assert_msg(!memcmp(slice, s.params, s.num_params * sizeof(float)),
					      "tp %d pp %d: shard (%d, %d) differs from the slice", tp,
					      pp, r, st);
				gpt2_shard_copy(&tiny, &h, back, s.params, 0);
				for (int t = 0; t < GPT2_NUM_TENSORS; t++)
					if (!gpt2_shard_is_replica(&tiny, &h, t))
						total += s.sizes[t];
				free(slice);
				gpt2_free(&s);
			}
		}
		ck_assert_msg(!memcmp(back, m.params, m.num_params * sizeof(float)),
			      "tp %d pp %d: the shards do not cover the model", tp, pp);
		ck_assert_uint_eq(total, m.num_params); /* replicas counted once */
	}
	free(back);
	gpt2_free(&m);
}
END_TEST

/* A shard loaded from an llm.c file holds the file's slice. */
START_TEST(test_load_shard_reads_its_slice)
{
	struct gpt2 m, s;
	struct gpt2_shard h = shard_of(&tiny, 1, 2, 1, 2);
	char err[256];
	float *slice;

	build(&m, 5);
	ck_assert_int_eq(gpt2_save(&m, tmpfile_path("shard.bin"), err, sizeof err), 0);
	ck_assert_msg(gpt2_load_shard(&s, tmp_path, &h, err, sizeof err) == 0, "%s", err);
	slice = malloc(s.num_params * sizeof(float));
	gpt2_shard_copy(&tiny, &h, m.params, slice, 1);
	ck_assert(!memcmp(slice, s.params, s.num_params * sizeof(float)));
	ck_assert_int_eq(gpt2_save(&s, tmp_path, err, sizeof err), -1); /* not the whole model */
	gpt2_free(&s);
	h.tp_size = 4; /* 2 heads cannot be cut in 4 */
	h.tp_rank = 0;
	ck_assert_int_eq(gpt2_load_shard(&s, tmp_path, &h, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot cut"), "%s", err);
	unlink(tmp_path);
	free(slice);
	gpt2_free(&m);
}
END_TEST

/*
 * Tensor parallelism: two rank threads, each with half the heads, half the
 * MLP and half the vocabulary, compute the whole model's loss and, once
 * their gradients are placed in the whole model's layout, its gradients,
 * to float rounding (the row-parallel sums are added in another order).
 * The replicated parameters get bit-identical gradients on both ranks.
 */
struct tp_rank {
	struct comm *c;
	struct gpt2 s;
	struct gpt2_shard h;
	enum gpt2_recompute recompute;
	float loss;
	int rc;
};

static void *tp_main(void *p)
{
	struct tp_rank *r = p;

	r->h.tp = r->c;
	r->rc = gpt2_build_shard(&r->s, &tiny, &r->h, 17);
	if (!r->rc)
		r->rc = gpt2_set_recompute(&r->s, r->recompute);
	if (!r->rc)
		r->rc = gpt2_zero_grad(&r->s);
	if (!r->rc)
		r->loss = gpt2_forward(&r->s, inputs, targets, B, T);
	if (!r->rc)
		r->rc = gpt2_backward(&r->s, 1.0f);
	return NULL;
}

START_TEST(test_tensor_parallel_equals_whole_model)
{
	struct comm_world *w = comm_world_create(2);
	struct tp_rank r[2];
	pthread_t th[2];
	struct gpt2 m;
	float whole, *g[2];

	build(&m, 17);
	gpt2_zero_grad(&m);
	whole = gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	for (int k = 0; k < 2; k++) {
		r[k] = (struct tp_rank){ .c = comm_world_rank(w, k),
					 .h = shard_of(&tiny, k, 2, 0, tiny.num_layers) };
		ck_assert_int_eq(pthread_create(&th[k], NULL, tp_main, &r[k]), 0);
	}
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		ck_assert_msg(r[k].rc == 0, "rank %d: %s", k, r[k].s.err);
		ck_assert_msg(fabsf(r[k].loss - whole) <= 1e-6f * whole, "loss %.9g whole, %.9g rank %d",
			      whole, r[k].loss, k);
		ck_assert_uint_eq(r[k].s.sizes[GPT2_WTE], m.sizes[GPT2_WTE] / 2);
		ck_assert_uint_eq(r[k].s.sizes[GPT2_FCW], m.sizes[GPT2_FCW] / 2);
		g[k] = malloc(m.num_params * sizeof(float));
		memset(g[k], 0, m.num_params * sizeof(float));
		gpt2_shard_copy(&tiny, &r[k].h, g[k], r[k].s.grads, 0);
	}
	ck_assert(r[0].loss == r[1].loss);
	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		size_t off = (size_t)(m.grad_tensors[t] - m.grads);

		for (size_t i = 0; i < m.sizes[t]; i++) {
			float a = g[0][off + i], b = g[1][off + i], want = m.grads[off + i];
			float got = gpt2_shard_is_replica(&tiny, &r[1].h, t) ? a : a + b;

			if (gpt2_shard_is_replica(&tiny, &r[1].h, t))
				ck_assert_msg(a == b, "%s[%zu]: replicas differ: %.9g, %.9g",
					      gpt2_tensor_name(t), i, a, b);
			else
				ck_assert_msg(a == 0.0f || b == 0.0f, "%s[%zu] held twice",
					      gpt2_tensor_name(t), i);
			ck_assert_msg(fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-7f,
				      "%s[%zu]: %.9g with tp 2, %.9g whole", gpt2_tensor_name(t), i,
				      got, want);
		}
	}
	for (int k = 0; k < 2; k++) {
		free(g[k]);
		gpt2_free(&r[k].s);
	}
	gpt2_free(&m);
	comm_world_destroy(w);
}
END_TEST

/*
 * Block recomputation under tensor parallelism: the layer's forward pass
 * runs again with its all-reduces (every rank of the group in the same
 * order), and the losses and gradients are those of keeping everything,
 * bit for bit.
 */
START_TEST(test_tensor_parallel_block_recompute_is_bit_exact)
{
	struct comm_world *w = comm_world_create(2);
	struct tp_rank r[2][2];
	pthread_t th[2];

	for (int mode = 0; mode < 2; mode++) {
		for (int k = 0; k < 2; k++) {
			r[mode][k] = (struct tp_rank){
				.c = comm_world_rank(w, k), .h = shard_of(&tiny, k, 2, 0, tiny.num_layers),
				.recompute = mode ? GPT2_RECOMPUTE_BLOCK : GPT2_RECOMPUTE_NONE
			};
			ck_assert_int_eq(pthread_create(&th[k], NULL, tp_main, &r[mode][k]), 0);
		}
		for (int k = 0; k < 2; k++) {
			pthread_join(th[k], NULL);
			ck_assert_msg(r[mode][k].rc == 0, "rank %d: %s", k, r[mode][k].s.err);
		}
	}
	for (int k = 0; k < 2; k++) {
		ck_assert_msg(r[0][k].loss == r[1][k].loss, "rank %d: loss %.9g, %.9g recomputed", k,
			      r[0][k].loss, r[1][k].loss);
		ck_assert_msg(!memcmp(r[0][k].s.grads, r[1][k].s.grads,
				      r[0][k].s.num_params * sizeof(float)),
			      "rank %d: gradients differ with block recomputation", k);
		ck_assert_uint_lt(r[1][k].s.act_cap, r[0][k].s.act_cap);
		gpt2_free(&r[0][k].s);
		gpt2_free(&r[1][k].s);
	}
	comm_world_destroy(w);
}
END_TEST

/*
 * Micro-batches in flight (a pipeline stage's 1F1B): two forwards into two
 * slots, then the backwards in order, give the gradients of two sequential
 * forward+backward passes, bit for bit, whatever the slots recompute (a
 * slot's scratch layer must not be another slot's).
 */
START_TEST(test_slots_keep_micro_batches_apart)
{
	static const int in2[B * T] = { 3, 3, 1, 0, 4, 4, 7, 2 };
	static const int tg2[B * T] = { 3, 1, 0, 9, 4, 7, 2, 8 };
	struct gpt2 a, b;
	float la1, la2, lb1, lb2;

	build(&a, 4);
	gpt2_zero_grad(&a);
	la1 = gpt2_forward(&a, inputs, targets, B, T);
	gpt2_backward(&a, 0.5f);
	la2 = gpt2_forward(&a, in2, tg2, B, T);
	gpt2_backward(&a, 0.5f);
	for (int r = GPT2_RECOMPUTE_NONE; r <= GPT2_RECOMPUTE_BLOCK; r++) {
		build(&b, 4);
		gpt2_zero_grad(&b);
		ck_assert_int_eq(gpt2_set_slots(&b, 2), 0);
		gpt2_set_recompute(&b, r);
		gpt2_use_slot(&b, 0);
		lb1 = gpt2_forward(&b, inputs, targets, B, T);
		gpt2_use_slot(&b, 1);
		lb2 = gpt2_forward(&b, in2, tg2, B, T);
		gpt2_use_slot(&b, 0);
		ck_assert_int_eq(gpt2_backward(&b, 0.5f), 0);
		gpt2_use_slot(&b, 1);
		ck_assert_int_eq(gpt2_backward(&b, 0.5f), 0);
		ck_assert_msg(la1 == lb1 && la2 == lb2, "recompute %s: losses differ",
			      gpt2_recompute_name(r));
		ck_assert_msg(!memcmp(a.grads, b.grads, a.num_params * sizeof(float)),
			      "recompute %s: gradients differ", gpt2_recompute_name(r));
		gpt2_free(&b);
	}
	gpt2_free(&a);
}
END_TEST

/*
 * Three training steps of a 4-layer model under each recomputation mode:
 * the same losses and gradients, bit for bit, as keeping everything (the
 * backward pass recomputes with the same kernels on the same inputs),
 * while the activations take less memory: GELU recomputation drops the
 * per-layer GELU outputs, block recomputation every per-layer array but
 * the layers' outputs. The sizes the model allocates are the ones
 * gpt2_activation_floats reports (stork bench train prints them).
 */
START_TEST(test_recompute_keeps_losses_and_gradients_bit_for_bit)
{
	static const int batches[3][B * T + 1] = { { 1, 5, 9, 2, 10, 0, 3, 3, 4 },
						   { 7, 7, 2, 0, 1, 9, 9, 5, 6 },
						   { 3, 1, 4, 1, 5, 9, 2, 6, 5 } };
	struct gpt2_config c4 = tiny;
	struct gpt2_shard whole;
	struct gpt2 ref, m;
	float want[3], *g[3];
	size_t n, cap[3];

	c4.num_layers = 4;
	gpt2_shard_whole(&c4, &whole);
	ck_assert_int_eq(gpt2_build(&ref, &c4, 21), 0);
	n = ref.num_params;
	for (int s = 0; s < 3; s++) {
		gpt2_zero_grad(&ref);
		want[s] = gpt2_forward(&ref, batches[s], batches[s] + 1, B, T);
		gpt2_backward(&ref, 1.0f);
		g[s] = malloc(n * sizeof(float));
		memcpy(g[s], ref.grads, n * sizeof(float));
		for (size_t i = 0; i < n; i++) /* a plain SGD step: the next batch meets new weights */
			ref.params[i] -= 0.1f * ref.grads[i];
	}
	for (int r = GPT2_RECOMPUTE_NONE; r <= GPT2_RECOMPUTE_BLOCK; r++) {
		ck_assert_int_eq(gpt2_build(&m, &c4, 21), 0);
		gpt2_set_recompute(&m, r);
		for (int s = 0; s < 3; s++) {
			float got;

			gpt2_zero_grad(&m);
			got = gpt2_forward(&m, batches[s], batches[s] + 1, B, T);
			ck_assert_int_eq(gpt2_backward(&m, 1.0f), 0);
			ck_assert_msg(got == want[s], "recompute %s, step %d: loss %.9g, want %.9g",
				      gpt2_recompute_name(r), s, got, want[s]);
			ck_assert_msg(!memcmp(g[s], m.grads, n * sizeof(float)),
				      "recompute %s, step %d: gradients differ", gpt2_recompute_name(r), s);
			for (size_t i = 0; i < n; i++)
				m.params[i] -= 0.1f * m.grads[i];
		}
		cap[r] = m.act_cap;
		ck_assert_uint_eq(cap[r], gpt2_activation_floats(&c4, &whole, B, T, r));
		gpt2_free(&m);
	}
	ck_assert_msg(cap[GPT2_RECOMPUTE_GELU] < cap[GPT2_RECOMPUTE_NONE] &&
			      cap[GPT2_RECOMPUTE_BLOCK] < cap[GPT2_RECOMPUTE_GELU],
		      "activation floats: none %zu, gelu %zu, block %zu", cap[0], cap[1], cap[2]);
	/* GELU recomputation saves 3 of the 4 layers' GELU outputs (B*T*4C each) */
	ck_assert_uint_ge(cap[GPT2_RECOMPUTE_NONE] - cap[GPT2_RECOMPUTE_GELU],
			  3 * (size_t)B * T * 4 * c4.channels);
	for (int s = 0; s < 3; s++)
		free(g[s]);
	gpt2_free(&ref);
}
END_TEST

/*
 * Fused kernels (gpt2_set_fused) change no bit: two micro-batches with
 * loss scale 1/2 give the unfused losses and gradients exactly. A
 * backward pass with another scale than the one announced still gets the
 * gradient (rescaled, so equal to rounding), and a forward pass without
 * targets still leaves probabilities.
 */
START_TEST(test_fused_kernels_keep_losses_and_gradients_bit_for_bit)
{
	static const int in2[B * T] = { 3, 3, 1, 0, 4, 4, 7, 2 };
	static const int tg2[B * T] = { 3, 1, 0, 9, 4, 7, 2, 8 };
	struct gpt2 ref, m;
	float r1, r2, f1, f2, sum = 0.0f;

	build(&ref, 6);
	build(&m, 6);
	gpt2_set_fused(&m, 1, 0.5f);
	gpt2_zero_grad(&ref);
	gpt2_zero_grad(&m);
	r1 = gpt2_forward(&ref, inputs, targets, B, T);
	gpt2_backward(&ref, 0.5f);
	r2 = gpt2_forward(&ref, in2, tg2, B, T);
	gpt2_backward(&ref, 0.5f);
	f1 = gpt2_forward(&m, inputs, targets, B, T);
	ck_assert_float_eq(m.dlogits_scale, 0.5f); /* the classifier did run fused */
	gpt2_backward(&m, 0.5f);
	f2 = gpt2_forward(&m, in2, tg2, B, T);
	gpt2_backward(&m, 0.5f);
	ck_assert(r1 == f1 && r2 == f2);
	ck_assert(!memcmp(ref.grads, m.grads, m.num_params * sizeof(float)));
	/* another scale than announced: the same gradient to rounding */
	gpt2_zero_grad(&ref);
	gpt2_zero_grad(&m);
	gpt2_forward(&ref, inputs, targets, B, T);
	gpt2_backward(&ref, 1.0f);
	gpt2_forward(&m, inputs, targets, B, T);
	gpt2_backward(&m, 1.0f);
	for (size_t i = 0; i < m.num_params; i++)
		ck_assert_msg(fabsf(m.grads[i] - ref.grads[i]) <= 1e-6f * (1e-3f + fabsf(ref.grads[i])),
			      "gradient %zu: %.9g fused with a rescale, %.9g", i, m.grads[i],
			      ref.grads[i]);
	/* inference: probabilities, as without fusion */
	gpt2_forward(&m, inputs, NULL, B, T);
	for (int v = 0; v < tiny.padded_vocab_size; v++)
		sum += m.acts.logits[v];
	ck_assert_msg(fabsf(sum - 1.0f) < 1e-5f, "row 0 of the probabilities sums to %g", sum);
	gpt2_free(&ref);
	gpt2_free(&m);
}
END_TEST

/* A backend without every kernel the passes call is refused, naming what it lacks. */
START_TEST(test_backend_missing_kernels_is_refused)
{
	struct gpt2 m;
	struct ops partial = ops_cpu;

	build(&m, 1);
	partial.name = "partial";
	partial.layernorm_forward = NULL;
	partial.attention_backward = NULL;
	ck_assert_int_eq(gpt2_set_backend(&m, &partial), -1);
	ck_assert_msg(strstr(m.err, "partial") && strstr(m.err, "layernorm_forward") &&
			      strstr(m.err, "attention_backward") && strstr(m.err, "2 kernel"),
		      "%s", m.err);
	ck_assert_ptr_eq(m.ops, &ops_cpu); /* kept */
	partial = ops_cpu;
	ck_assert_int_eq(gpt2_set_backend(&m, &partial), 0);
	ck_assert_ptr_eq(m.ops, &partial);
	ck_assert(gpt2_forward(&m, inputs, targets, B, T) > 0);
	gpt2_free(&m);
}
END_TEST

START_TEST(test_forward_rejects_tokens_outside_vocabulary)
{
	struct gpt2 m;
	int bad[B * T];

	build(&m, 1);
	memcpy(bad, inputs, sizeof bad);
	bad[3] = 11; /* V = 11: the padding ids are not tokens */
	ck_assert_msg(isnan(gpt2_forward(&m, bad, targets, B, T)), "no error");
	ck_assert_msg(strstr(m.err, "11") && strstr(m.err, "vocabulary"), "message: %s", m.err);
	ck_assert_msg(isnan(gpt2_forward(&m, inputs, targets, 1, 9)), "T > maxT accepted");
	gpt2_free(&m);
}
END_TEST

/* ------------------------------------------------------------ files */

START_TEST(test_save_load_round_trip_is_bit_exact)
{
	struct gpt2 a, b;
	char err[512];
	int32_t hdr[GPT2_HEADER_INTS];
	const char *path = tmpfile_path("rt.bin");
	FILE *f;
	long size;

	build(&a, 3);
	ck_assert_msg(gpt2_save(&a, path, err, sizeof err) == 0, "%s", err);
	f = fopen(path, "rb");
	ck_assert_int_eq(fread(hdr, sizeof hdr, 1, f), 1);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fclose(f);
	/* llm.c's layout, read independently of gpt2_load */
	ck_assert_int_eq(hdr[0], 20240326);
	ck_assert_int_eq(hdr[1], 3);
	ck_assert_int_eq(hdr[2], 8);
	ck_assert_int_eq(hdr[3], 11);
	ck_assert_int_eq(hdr[4], 2);
	ck_assert_int_eq(hdr[5], 2);
	ck_assert_int_eq(hdr[6], 8);
	ck_assert_int_eq(hdr[7], 16);
	ck_assert_int_eq(size, 1024 + 4 * (long)a.num_params);
	ck_assert_msg(gpt2_load(&b, path, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(!memcmp(&a.config, &b.config, sizeof a.config), "config differs");
	ck_assert_msg(!memcmp(a.params, b.params, a.num_params * sizeof(float)),
		      "parameters differ after save and load");
	unlink(path);
	gpt2_free(&a);
	gpt2_free(&b);
}
END_TEST

/* Save a tiny model, let edit() damage the file, and expect load to fail with words. */
static void expect_load_error(void (*edit)(const char *path), const char *word)
{
	struct gpt2 a, b;
	char err[512] = "";
	const char *path = tmpfile_path("bad.bin");

	build(&a, 3);
	ck_assert_int_eq(gpt2_save(&a, path, err, sizeof err), 0);
	edit(path);
	ck_assert_int_eq(gpt2_load(&b, path, err, sizeof err), -1);
	ck_assert_msg(strstr(err, path), "message does not name the file: %s", err);
	ck_assert_msg(strstr(err, word), "message does not say '%s': %s", word, err);
	ck_assert_msg(b.params == NULL, "failed load left parameters behind");
	unlink(path);
	gpt2_free(&a);
}

static void put_int(const char *path, long off, int32_t v)
{
	FILE *f = fopen(path, "r+b");

	fseek(f, off, SEEK_SET);
	fwrite(&v, sizeof v, 1, f);
	fclose(f);
}

static void wrong_magic(const char *path)
{
	put_int(path, 0, 20240520); /* a token shard's magic */
}

static void wrong_version(const char *path)
{
	put_int(path, 4, 5);
}

static void cut_parameters(const char *path)
{
	ck_assert_int_eq(truncate(path, 1024 + 100), 0);
}

static void cut_header(const char *path)
{
	ck_assert_int_eq(truncate(path, 10), 0);
}

/* Shapes at the point where the sizes would wrap: refused by name before any allocation. */
static void huge_channels(const char *path)
{
	put_int(path, 20, 1);       /* heads: 1 divides any channels */
	put_int(path, 24, 1 << 30); /* channels: 3*C*C floats wrap a 64-bit size */
}

static void huge_vocabulary(const char *path)
{
	put_int(path, 12, INT32_MAX - 255);
	put_int(path, 28, INT32_MAX - 127);
}

START_TEST(test_load_rejects_shapes_beyond_the_limits)
{
	expect_load_error(huge_channels, "model channels is 1073741824: more than the 65536");
	expect_load_error(huge_vocabulary, "model vocab_size is 2147483392: more than the 2097152");
}
END_TEST

START_TEST(test_load_rejects_wrong_magic)
{
	expect_load_error(wrong_magic, "magic");
}
END_TEST

START_TEST(test_load_rejects_wrong_version)
{
	expect_load_error(wrong_version, "version 5");
}
END_TEST

START_TEST(test_load_rejects_truncated_file)
{
	expect_load_error(cut_parameters, "truncated");
	expect_load_error(cut_header, "truncated");
}
END_TEST

START_TEST(test_load_names_missing_file)
{
	struct gpt2 m;
	char err[512];

	ck_assert_int_eq(gpt2_load(&m, "/nonexistent/model.bin", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "/nonexistent/model.bin"), "message: %s", err);
}
END_TEST

/* ------------------------------------------------------------ optimizer */

START_TEST(test_adamw_init_on_the_cpu_is_adamw_init)
{
	struct adamw_state s;

	ck_assert_int_eq(adamw_init_on(&s, 1000, &ops_cpu), 0);
	ck_assert_ptr_eq(s.mem, &ops_cpu);
	ck_assert_uint_eq(s.n, 1000);
	for (size_t i = 0; i < s.n; i++)
		ck_assert(s.m[i] == 0.0f && s.v[i] == 0.0f);
	adamw_free(&s);
}
END_TEST

START_TEST(test_adamw_matches_hand_computed_steps)
{
	/*
	 * p = 1, g = 0.5 twice, lr 0.1, betas (0.9, 0.999), wd 0.1.
	 * Step 1: m = 0.05, v = 0.00025; mhat = 0.5, vhat = 0.25, so the Adam
	 * direction is 0.5 / 0.5 = 1 and p = 1 - 0.1 (1 + 0.1 * 1) = 0.89.
	 * Step 2: m = 0.095, v = 0.00049975; mhat = 0.095/0.19 = 0.5,
	 * vhat = 0.00049975/0.001999 = 0.25: direction 1 again, and
	 * p = 0.89 - 0.1 (1 + 0.1 * 0.89) = 0.7811. Without decay: 0.9, 0.8.
	 */
	struct adamw_state s;
	struct adamw_params h = { 0.9f, 0.999f, 1e-8f, 0.1f };
	float p[2] = { 1.0f, 1.0f }, g[2] = { 0.5f, 0.5f };

	ck_assert_int_eq(adamw_init(&s, 2), 0);
	adamw_update(&ops_cpu, &s, &h, 0.1f, 1, p, g, 0, 1);
	adamw_update(&ops_cpu, &s, &h, 0.1f, 0, p + 1, g + 1, 1, 1);
	adamw_step_done(&s);
	ck_assert_msg(fabsf(p[0] - 0.89f) < 1e-6f, "decayed step 1: %.8g", p[0]);
	ck_assert_msg(fabsf(p[1] - 0.9f) < 1e-6f, "undecayed step 1: %.8g", p[1]);
	/* 1 - 0.9 and 1 - 0.999 are rounded in float: m, v are off by ~2e-7 relative */
	ck_assert_msg(fabsf(s.m[0] - 0.05f) < 1e-7f && fabsf(s.v[0] - 0.00025f) < 1e-8f,
		      "moments %g %g", s.m[0], s.v[0]);
	adamw_update(&ops_cpu, &s, &h, 0.1f, 1, p, g, 0, 1);
	adamw_update(&ops_cpu, &s, &h, 0.1f, 0, p + 1, g + 1, 1, 1);
	adamw_step_done(&s);
	ck_assert_msg(fabsf(p[0] - 0.7811f) < 1e-5f, "decayed step 2: %.8g", p[0]);
	ck_assert_msg(fabsf(p[1] - 0.8f) < 1e-5f, "undecayed step 2: %.8g", p[1]);
	ck_assert_int_eq(s.step, 2);
	adamw_free(&s);
}
END_TEST

/*
 * AdamW in double precision, written here from the formula of optimizer.h
 * (decoupled decay of the parameter before the update, eps added to the
 * square root of the bias-corrected second moment): one update of one
 * parameter at step t (1-based), with the hyper-parameters' float values.
 */
static double ref_adamw(double p, double g, double *m, double *v, int t, double lr,
			const struct adamw_params *h, int decay)
{
	double b1 = h->beta1, b2 = h->beta2, mhat, vhat;

	*m = b1 * *m + (1.0 - b1) * g;
	*v = b2 * *v + (1.0 - b2) * g * g;
	mhat = *m / (1.0 - pow(b1, t));
	vhat = *v / (1.0 - pow(b2, t));
	return p - lr * (mhat / (sqrt(vhat) + (double)h->eps) + (decay ? h->weight_decay * p : 0.0));
}

/* The tensors AdamW decays: the 2-D weight matrices, not biases or LayerNorms. */
static int decayed(int t)
{
	return t == GPT2_WTE || t == GPT2_WPE || t == GPT2_QKVW || t == GPT2_ATTPROJW ||
	       t == GPT2_FCW || t == GPT2_FCPROJW;
}

/*
 * Every parameter of the tiny model set to +-[0.05, 0.55): GPT-2 starts
 * its biases at 0 and its LayerNorm weights at 1, where a decay that wrongly
 * reached them would be invisible or look like a plain update.
 */
static void spread_params(struct gpt2 *m)
{
	uint64_t r = rng_seed(7, 0);

	for (size_t i = 0; i < m->num_params; i++)
		m->params[i] = (rng_below(&r, 2) ? 1.0f : -1.0f) * (0.05f + 0.5f * rng_f32(&r));
}

/*
 * Two adamw_step_model steps on the model with its real gradients: every
 * parameter follows the double-precision formula, with decay exactly on
 * the 2-D weights. Float error: p' rounds to 6e-8 |p| (|p| < 0.6), the
 * update lr * (mhat / sqrt(vhat) + wd p), |.| < 3, to a few 1e-7 of itself,
 * so below 1e-7 over two steps; decaying a tensor it should not, or
 * not decaying one it should, moves a parameter by lr * wd * |p| >= 5e-5.
 */
START_TEST(test_adamw_on_the_model_follows_the_formula_decaying_2d_weights_only)
{
	const struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	const float lr = 1e-2f;
	struct gpt2 m;
	struct adamw_state s;
	double *p, *mom, *vel, worst = 0;
	size_t off, worst_at = 0;

	build(&m, 4);
	spread_params(&m);
	ck_assert_int_eq(adamw_init(&s, m.num_params), 0);
	ck_assert_ptr_nonnull(p = malloc(3 * m.num_params * sizeof *p));
	mom = p + m.num_params;
	vel = mom + m.num_params;
	for (size_t i = 0; i < m.num_params; i++)
		p[i] = m.params[i], mom[i] = vel[i] = 0.0;
	for (int t = 1; t <= 2; t++) {
		ck_assert_int_eq(gpt2_zero_grad(&m), 0);
		gpt2_forward(&m, inputs, targets, B, T);
		ck_assert_int_eq(gpt2_backward(&m, 1.0f), 0);
		off = 0;
		for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
			for (size_t i = off; i < off + m.sizes[k]; i++)
				p[i] = ref_adamw(p[i], m.grads[i], &mom[i], &vel[i], t, lr, &h,
						 decayed(k));
			off += m.sizes[k];
		}
		adamw_step_model(&s, &h, lr, &m);
		for (size_t i = 0; i < m.num_params; i++) {
			double err = fabs(m.params[i] - p[i]);

			if (err > worst)
				worst = err, worst_at = i;
		}
		ck_assert_msg(worst <= 1e-7, "step %d: parameter %zu is %.9g, the formula gives %.9g",
			      t, worst_at, (double)m.params[worst_at], p[worst_at]);
	}
	ck_assert_int_eq(s.step, 2);
	free(p);
	adamw_free(&s);
	gpt2_free(&m);
}
END_TEST

/*
 * With no gradient the Adam direction is 0 and only the decay moves a
 * parameter: every 2-D weight shrinks to p (1 - lr wd) (within one float
 * rounding of p), every bias and LayerNorm parameter keeps its exact bits.
 */
START_TEST(test_weight_decay_shrinks_2d_weights_and_leaves_the_rest)
{
	const struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	const float lr = 0.5f; /* lr wd = 0.05: a visible shrink */
	struct gpt2 m;
	struct adamw_state s;
	float *before;
	size_t off = 0;

	build(&m, 5);
	spread_params(&m);
	ck_assert_ptr_nonnull(before = malloc(m.num_params * sizeof *before));
	memcpy(before, m.params, m.num_params * sizeof *before);
	ck_assert_int_eq(gpt2_zero_grad(&m), 0);
	ck_assert_int_eq(adamw_init(&s, m.num_params), 0);
	adamw_step_model(&s, &h, lr, &m);
	for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
		for (size_t i = off; i < off + m.sizes[k]; i++) {
			double p0 = before[i], p1 = m.params[i];

			if (!decayed(k)) {
				ck_assert_msg(p1 == p0, "%s[%zu] moved from %.9g to %.9g",
					      gpt2_tensor_name(k), i - off, p0, p1);
				continue;
			}
			ck_assert_msg(fabs(p1) < fabs(p0) &&
				      fabs(p1 - p0 * (1.0 - (double)lr * h.weight_decay)) <=
					      6e-8 * fabs(p0),
				      "%s[%zu]: %.9g decayed to %.9g, want %.9g", gpt2_tensor_name(k),
				      i - off, p0, p1, p0 * (1.0 - (double)lr * h.weight_decay));
		}
		off += m.sizes[k];
	}
	free(before);
	adamw_free(&s);
	gpt2_free(&m);
}
END_TEST

START_TEST(test_lr_schedule_warmup_peak_end)
{
	struct lr_schedule c = { LR_COSINE, 1.0f, 0.1f, 10, 111 };
	struct lr_schedule k = { LR_CONSTANT, 0.5f, 0.0f, 0, 0 };

	ck_assert_msg(fabsf(lr_at(&c, 0) - 0.1f) < 1e-7f, "first warmup step");
	ck_assert_msg(fabsf(lr_at(&c, 4) - 0.5f) < 1e-7f, "mid warmup");
	ck_assert_msg(fabsf(lr_at(&c, 9) - 1.0f) < 1e-7f, "end of warmup reaches the peak");
	ck_assert_msg(fabsf(lr_at(&c, 10) - 1.0f) < 1e-7f, "cosine starts at the peak");
	/* step 60: half way through the 100 cosine steps, (1 + cos(pi/2))/2 = 0.5 */
	ck_assert_msg(fabsf(lr_at(&c, 60) - 0.55f) < 1e-6f, "half way: %g", lr_at(&c, 60));
	ck_assert_msg(fabsf(lr_at(&c, 110) - 0.1f) < 1e-7f, "last step at min_lr");
	ck_assert_msg(fabsf(lr_at(&c, 500) - 0.1f) < 1e-7f, "after the end: min_lr");
	ck_assert_float_eq(lr_at(&k, 0), 0.5f);
	ck_assert_float_eq(lr_at(&k, 1000), 0.5f);
}
END_TEST

START_TEST(test_clipping_scales_to_the_global_norm)
{
	float g[2] = { 3.0f, 4.0f };
	float norm = (float)sqrt(grad_sumsq(&ops_cpu, g, 2));

	ck_assert_float_eq(norm, 5.0f);
	ck_assert_float_eq(grad_clip_scale(norm, 1.0f), 0.2f);
	ck_assert_float_eq(grad_clip_scale(norm, 0.0f), 1.0f); /* off */
	ck_assert_float_eq(grad_clip_scale(norm, 10.0f), 1.0f); /* below the limit */
	grad_scale(&ops_cpu, g, 2, grad_clip_scale(norm, 1.0f));
	ck_assert_msg(fabs(sqrt(grad_sumsq(&ops_cpu, g, 2)) - 1.0) < 1e-6, "clipped norm");
}
END_TEST

START_TEST(test_training_steps_lower_the_loss)
{
	struct gpt2 m;
	struct adamw_state s;
	struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.0f };
	float first = 0, last = 0;

	build(&m, 2);
	ck_assert_int_eq(adamw_init(&s, m.num_params), 0);
	for (int i = 0; i < 30; i++) {
		gpt2_zero_grad(&m);
		last = gpt2_forward(&m, inputs, targets, B, T);
		if (i == 0)
			first = last;
		gpt2_backward(&m, 1.0f);
		adamw_step_model(&s, &h, 1e-2f, &m);
	}
	ck_assert_msg(last < 0.5f * first, "loss %g -> %g over 30 steps of one batch", first,
		      last);
	adamw_free(&s);
	gpt2_free(&m);
}
END_TEST

static const struct gpt2_config small = { .max_seq_len = 16, .vocab_size = 64,
					  .padded_vocab_size = 64, .num_layers = 2,
					  .num_heads = 4, .channels = 32 };
/* The Llama of the same size: GQA (2 key-value heads for 4), SwiGLU, rope, untied. */
static const struct gpt2_config small_llama = {
	.max_seq_len = 16, .vocab_size = 64, .padded_vocab_size = 64, .num_layers = 2,
	.num_heads = 4, .channels = 32, .arch = MODEL_LLAMA, .kv_heads = 2, .intermediate = 64,
	.untied = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
};

/*
 * Losses of 200 AdamW steps of model c on a learnable token stream (each
 * token a function of the one before, with some noise), the matrix
 * products in precision p on this thread, activations in bf16 or not.
 */
static void train_200_of(const struct gpt2_config *c, enum ops_precision p, int bf16_acts,
			 float losses[200])
{
	enum { PB = 4, PT = 16 };
	struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	struct adamw_state s;
	struct gpt2 m;
	int tok[PB * PT + 1];
	uint64_t st = rng_seed(77, 0);

	ck_assert_msg(gpt2_build(&m, c, 7) == 0, "%s", m.err);
	ck_assert_int_eq(adamw_init(&s, m.num_params), 0);
	ops_cpu.set_precision(p);
	gpt2_set_bf16_activations(&m, bf16_acts);
	tok[0] = 1;
	for (int k = 0; k < 200; k++) {
		for (int i = 1; i < PB * PT + 1; i++)
			tok[i] = (int)((5 * tok[i - 1] + 3 + (rng_below(&st, 8) == 0)) % 64);
		gpt2_zero_grad(&m);
		losses[k] = gpt2_forward(&m, tok, tok + 1, PB, PT);
		ck_assert_int_eq(gpt2_backward(&m, 1.0f), 0);
		adamw_step_model(&s, &h, 3e-3f, &m);
		tok[0] = tok[PB * PT];
	}
	ops_cpu.set_precision(OPS_FP32);
	adamw_free(&s);
	gpt2_free(&m);
}

static void train_200(enum ops_precision p, float losses[200])
{
	train_200_of(&small, p, 0, losses);
}

/*
 * bf16 matrix products (emulated on the CPU, kernels/cpu/precision.c)
 * track fp32 within 2% at every one of 200 steps, while the model learns
 * (the loss falls by more than half), and they are not fp32 in disguise:
 * the losses differ.
 */
START_TEST(test_bf16_losses_track_fp32_within_two_percent)
{
	float l32[200], l16[200], worst = 0.0f;
	int differ = 0;

	train_200(OPS_FP32, l32);
	train_200(OPS_BF16, l16);
	for (int k = 0; k < 200; k++) {
		float r = fabsf(l16[k] - l32[k]) / l32[k];

		differ += l16[k] != l32[k];
		worst = r > worst ? r : worst;
		ck_assert_msg(r <= 0.02f, "step %d: bf16 loss %.6f, fp32 %.6f", k, l16[k], l32[k]);
	}
	printf("bf16 against fp32 over 200 steps: worst relative difference %.3g, loss %.3f -> %.3f\n",
	       worst, l32[0], l32[199]);
	ck_assert_msg(differ > 100, "only %d of 200 bf16 losses differ from fp32", differ);
	ck_assert_msg(l32[199] < 0.5f * l32[0] && l16[199] < 0.5f * l16[0],
		      "the model did not learn: fp32 %.3f -> %.3f, bf16 %.3f -> %.3f", l32[0], l32[199],
		      l16[0], l16[199]);
}
END_TEST

/* Whether every value of p (n) is a bf16 value (its low 16 bits zero). */
static int all_bf16(const float *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t bits;

		memcpy(&bits, &p[i], sizeof bits);
		if (bits & 0xffffu)
			return 0;
	}
	return 1;
}

/*
 * bf16 activations (gpt2_set_bf16_activations, on top of bf16 products),
 * emulated on the CPU: GPT-2 and the Llama track fp32 within 2% at every
 * one of 200 steps while they learn, and the rounding is not a no-op: the
 * losses differ from those of bf16 products alone.
 */
START_TEST(test_bf16_activations_track_fp32_within_two_percent)
{
	const struct gpt2_config *c = _i ? &small_llama : &small;
	float l32[200], lp[200], la[200], worst = 0.0f;
	int differ = 0;

	train_200_of(c, OPS_FP32, 0, l32);
	train_200_of(c, OPS_BF16, 0, lp);
	train_200_of(c, OPS_BF16, 1, la);
	for (int k = 0; k < 200; k++) {
		float r = fabsf(la[k] - l32[k]) / l32[k];

		differ += la[k] != lp[k];
		worst = r > worst ? r : worst;
		ck_assert_msg(r <= 0.02f, "%s step %d: bf16 activations' loss %.6f, fp32 %.6f",
			      _i ? "llama" : "gpt2", k, la[k], l32[k]);
	}
	printf("%s: bf16 activations against fp32 over 200 steps: worst relative difference %.3g, "
	       "loss %.3f -> %.3f\n", _i ? "llama" : "gpt2", worst, l32[0], l32[199]);
	ck_assert_msg(differ > 100, "only %d of 200 losses differ from bf16 products alone", differ);
	ck_assert_msg(la[199] < 0.5f * la[0], "the model did not learn: %.3f -> %.3f", la[0],
		      la[199]);
}
END_TEST

/*
 * What the passes keep is bf16 where it is stored: the residual stream
 * and every layer's activations after a forward pass, the residual's
 * gradient and the logits' gradient after the backward pass;
 * the statistics (LayerNorm's mean and rstd) stay fp32. Under each
 * recomputation too, whose passes store the same roundings again.
 */
START_TEST(test_bf16_activations_are_stored_as_bf16)
{
	const struct gpt2_config *c = _i % 2 ? &small_llama : &small;
	enum gpt2_recompute rc = _i / 2 == 0 ? GPT2_RECOMPUTE_NONE : GPT2_RECOMPUTE_BLOCK;
	enum { PB = 2, PT = 16 };
	int tok[PB * PT + 1];
	struct gpt2 m, ref;
	size_t N = PB * PT, C = (size_t)c->channels;
	float loss, loss_again;

	for (int i = 0; i < PB * PT + 1; i++)
		tok[i] = (7 * i + 3) % 64;
	ck_assert_msg(gpt2_build(&m, c, 7) == 0, "%s", m.err);
	ck_assert_int_eq(gpt2_set_recompute(&m, rc), 0);
	gpt2_set_bf16_activations(&m, 1);
	ck_assert_int_eq(gpt2_zero_grad(&m), 0);
	loss = gpt2_forward(&m, tok, tok + 1, PB, PT);
	ck_assert(all_bf16(m.acts.encoded, N * C));
	ck_assert(all_bf16(m.acts.ln1, N * C));
	ck_assert(all_bf16(m.acts.lnf, N * C));
	/* (the logits' buffer now holds the softmax's probabilities, fp32 statistics) */
	if (rc == GPT2_RECOMPUTE_NONE) {
		ck_assert(all_bf16(m.acts.res3, N * C * (size_t)c->num_layers));
		ck_assert(all_bf16(m.acts.fch_gelu, N * (c->arch == MODEL_LLAMA ? (size_t)c->intermediate : 4 * C)));
		/* the statistics are not rounded: some mean or rstd has bits below bf16's */
		ck_assert(!all_bf16(m.acts.ln1_rstd, N * (size_t)c->num_layers));
	}
	ck_assert_int_eq(gpt2_backward(&m, 1.0f), 0);
	ck_assert(all_bf16(m.acts.dres, N * C));
	ck_assert(all_bf16(m.acts.logits, N * (size_t)c->padded_vocab_size));
	/* the parameters' gradients are fp32 sums */
	ck_assert(!all_bf16(m.grads, m.num_params));
	/* the same model with fp32 activations gives another loss */
	ck_assert_msg(gpt2_build(&ref, c, 7) == 0, "%s", ref.err);
	loss_again = gpt2_forward(&ref, tok, tok + 1, PB, PT);
	ck_assert_msg(loss != loss_again, "loss %.9g with bf16 activations and without", loss);
	gpt2_free(&ref);
	gpt2_free(&m);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("gpt2");
	TCase *to = tcase_create("optimizer");

	tcase_add_test(tc, test_build_is_deterministic);
	tcase_add_test(tc, test_build_uses_gpt2_initialisation);
	tcase_add_test(tc, test_rng_skip_lands_where_the_draws_would);
	tcase_add_test(tc, test_build_draws_each_matrix_as_one_stream);
	tcase_add_test(tc, test_build_rejects_bad_sizes);
	tcase_add_loop_test(tc, test_gradients_match_finite_differences, 0,
			    sizeof archs / sizeof archs[0]);
	tcase_add_test(tc, test_forward_backward_is_deterministic);
	tcase_add_test(tc, test_backward_accumulates_scaled_gradients);
	tcase_add_test(tc, test_pipeline_stages_equal_whole_model);
	tcase_add_test(tc, test_stage_allocates_activations_for_its_own_layers);
	tcase_add_test(tc, test_shards_tile_the_whole_model);
	tcase_add_test(tc, test_load_shard_reads_its_slice);
	tcase_add_test(tc, test_slots_keep_micro_batches_apart);
	tcase_add_test(tc, test_tensor_parallel_equals_whole_model);
	tcase_add_test(tc, test_recompute_keeps_losses_and_gradients_bit_for_bit);
	tcase_add_test(tc, test_tensor_parallel_block_recompute_is_bit_exact);
	tcase_add_test(tc, test_fused_kernels_keep_losses_and_gradients_bit_for_bit);
	tcase_add_test(tc, test_backend_missing_kernels_is_refused);
	tcase_add_test(tc, test_forward_rejects_tokens_outside_vocabulary);
	tcase_add_test(tc, test_save_load_round_trip_is_bit_exact);
	tcase_add_test(tc, test_load_rejects_wrong_magic);
	tcase_add_test(tc, test_load_rejects_shapes_beyond_the_limits);
	tcase_add_test(tc, test_load_rejects_wrong_version);
	tcase_add_test(tc, test_load_rejects_truncated_file);
	tcase_add_test(tc, test_load_names_missing_file);
	tcase_add_test(to, test_adamw_init_on_the_cpu_is_adamw_init);
	tcase_add_test(to, test_adamw_matches_hand_computed_steps);
	tcase_add_test(to, test_adamw_on_the_model_follows_the_formula_decaying_2d_weights_only);
	tcase_add_test(to, test_weight_decay_shrinks_2d_weights_and_leaves_the_rest);
	tcase_add_test(to, test_lr_schedule_warmup_peak_end);
	tcase_add_test(to, test_clipping_scales_to_the_global_norm);
	tcase_add_test(to, test_training_steps_lower_the_loss);
	tcase_add_test(to, test_bf16_losses_track_fp32_within_two_percent);
	tcase_add_loop_test(to, test_bf16_activations_track_fp32_within_two_percent, 0, 2);
	tcase_add_loop_test(tc, test_bf16_activations_are_stored_as_bf16, 0, 4);
	/* the bf16 test trains 400 steps: about 2 s under AddressSanitizer, more
	 * on a loaded machine, where Check's default of 4 s is too short */
	tcase_set_timeout(to, 60);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, to);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(model_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
