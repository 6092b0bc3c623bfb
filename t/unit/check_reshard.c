/*
 * t/unit/check_reshard.c - a rank's part of a checkpoint of another layout,
 * read by byte ranges (daemon/engine/checkpoint/checkpoint_reshard.c).
 *
 * A model and its moments (each float a value of its own) are written as
 * real checkpoints, whole (model.bin + optimizer.bin) or as the shards of
 * every rank of a layout, and read back by every rank of another layout.
 * Each rank's parameters and packed moment parts must be the bits the
 * whole arrays hold at its places (cut with gpt2_shard_copy, the map the
 * training code uses). GPT-2 and a Llama with grouped-query attention and
 * an untied head; tensor, pipeline and data parallelism, with and without
 * ZeRO-1 on either side. A missing or truncated shard fails, naming it.
 */
#include "config.h"
#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/checkpoint/checkpoint_format.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/model/model.h"
#include "lib/io/atomic_file.h"

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct gpt2_config gpt2 = { .max_seq_len = 8, .vocab_size = 30,
					 .padded_vocab_size = 32, .num_layers = 4,
					 .num_heads = 4, .channels = 16 };
static const struct gpt2_config llama = {
	.max_seq_len = 8, .vocab_size = 30, .padded_vocab_size = 32, .num_layers = 4,
	.num_heads = 4, .channels = 16, .arch = MODEL_LLAMA, .kv_heads = 2, .intermediate = 24,
	.untied = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
};

struct lay {
	int dp, tp, pp, zero;
};

/* The whole model: parameters and moments, every float its own value. */
struct whole {
	struct gpt2_config c;
	float *p, *m, *v;
	size_t n;
};

static void whole_make(struct whole *w, const struct gpt2_config *c)
{
	struct gpt2_shard s;
	size_t sizes[GPT2_NUM_TENSORS];

	w->c = *c;
	gpt2_shard_whole(c, &s);
	w->n = gpt2_shard_sizes(c, &s, sizes);
	w->p = malloc(w->n * sizeof(float));
	w->m = malloc(w->n * sizeof(float));
	w->v = malloc(w->n * sizeof(float));
	ck_assert(w->p && w->m && w->v);
	for (size_t i = 0; i < w->n; i++) {
		w->p[i] = (float)i;
		w->m[i] = -(float)i - 0.5f;
		w->v[i] = (float)i + 0.25f;
	}
}

static void whole_free(struct whole *w)
{
	free(w->p);
	free(w->m);
	free(w->v);
}

static void info_of(const struct gpt2_config *c, struct lay a, int rank,
		    struct ckpt_shard_info *info, struct gpt2_shard *s)
{
	struct par_layout l;
	char err[512];
	int world = a.dp * a.tp * a.pp;

	ck_assert_msg(layout_make(&l, c, world, a.tp, a.pp, a.zero, NULL, 8, rank, err,
				  sizeof err) == 0, "%s", err);
	layout_shard(&l, s);
	ckpt_shard_info_of(c, &l, info);
}

/* Rank's parameters and packed moment parts, cut from the whole arrays. */
static void cut(const struct whole *w, const struct ckpt_shard_info *info,
		const struct gpt2_shard *s, float *p, float *m, float *v)
{
	float *lm = malloc(info->nparams * sizeof(float)), *lv = malloc(info->nparams * sizeof(float));
	size_t at = 0;

	ck_assert(lm && lv);
	gpt2_shard_copy(&w->c, s, w->p, p, 1);
	gpt2_shard_copy(&w->c, s, w->m, lm, 1);
	gpt2_shard_copy(&w->c, s, w->v, lv, 1);
	for (int k = 0; k < info->nseg; k++) {
		size_t n = info->seg_hi[k] - info->seg_lo[k];

		memcpy(m + at, lm + info->seg_lo[k], n * sizeof(float));
		memcpy(v + at, lv + info->seg_lo[k], n * sizeof(float));
		at += n;
	}
	free(lm);
	free(lv);
}

static size_t moments_of(const struct ckpt_shard_info *info)
{
	size_t n = 0;

	for (int k = 0; k < info->nseg; k++)
		n += info->seg_hi[k] - info->seg_lo[k];
	return n;
}

/* Write w as a checkpoint of layout a (dp only without ZeRO-1: the whole-model form) under root. */
static void write_checkpoint(const struct whole *w, struct lay a, const char *root, char *dir,
			     size_t len)
{
	struct ckpt_state st = { .step = 3 };
	char err[512];
	int world = a.dp * a.tp * a.pp;

	snprintf(dir, len, "%s/step_00000003", root);
	if (a.tp == 1 && a.pp == 1 && !a.zero) {
		struct gpt2 m;
		struct adamw_state opt = { .m = w->m, .v = w->v, .n = w->n, .step = 7 };

		ck_assert(gpt2_shard_from_full(&m, &w->c, NULL, w->p) == 0);
		ck_assert_msg(ckpt_save(root, &m, &opt, &st, (struct ckpt_keep){ .newest = 2 }, err,
						 sizeof err) == 0, "%s", err);
		gpt2_free(&m);
		return;
	}
	uint64_t sums[64], sizes[64];
	struct ckpt_layout l = { .world = world, .dp = a.dp, .tp = a.tp, .pp = a.pp,
				 .zero = a.zero, .sharded = 1 };

	ck_assert_msg(ckpt_prepare(root, st.step, err, sizeof err) == 0, "%s", err);
	for (int r = 0; r < world; r++) {
		struct ckpt_shard_info info;
		struct gpt2_shard s;
		float *p, *m, *v;

		info_of(&w->c, a, r, &info, &s);
		info.opt_step = 7;
		p = malloc(info.nparams * sizeof(float));
		m = malloc((moments_of(&info) + 1) * sizeof(float));
		v = malloc((moments_of(&info) + 1) * sizeof(float));
		cut(w, &info, &s, p, m, v);
		ck_assert_msg(ckpt_write_shard(root, st.step, &info, p, m, v, &sums[r], &sizes[r], err,
					       sizeof err) == 0, "%s", err);
		free(p);
		free(m);
		free(v);
	}
	ck_assert_msg(ckpt_commit(root, &st, &l, sums, sizes, (struct ckpt_keep){ .newest = 2 }, err,
						 sizeof err) == 0, "%s", err);
}

/* Every rank of layout b reads its part of dir: the bits cut from w. */
static void check_every_rank(const struct whole *w, struct lay b, const char *dir)
{
	int world = b.dp * b.tp * b.pp;

	for (int r = 0; r < world; r++) {
		struct ckpt_shard_info info;
		struct gpt2_shard s;
		size_t nm;
		float *p, *m, *v, *ep, *em, *ev;
		int64_t step = -1;
		char err[1024];

		info_of(&w->c, b, r, &info, &s);
		nm = moments_of(&info);
		p = malloc(info.nparams * sizeof(float));
		ep = malloc(info.nparams * sizeof(float));
		m = calloc(nm + 1, sizeof(float));
		v = calloc(nm + 1, sizeof(float));
		em = calloc(nm + 1, sizeof(float));
		ev = calloc(nm + 1, sizeof(float));
		cut(w, &info, &s, ep, em, ev);
		ck_assert_msg(ckpt_read_resharded(dir, &info, p, m, v, &step, err, sizeof err) == 0,
			      "rank %d of dp %d tp %d pp %d: %s", r, b.dp, b.tp, b.pp, err);
		ck_assert_int_eq(step, 7);
		ck_assert_msg(!memcmp(p, ep, info.nparams * sizeof(float)),
			      "rank %d of dp %d tp %d pp %d zero %d: parameters differ", r, b.dp,
			      b.tp, b.pp, b.zero);
		ck_assert_msg(!memcmp(m, em, nm * sizeof(float)) && !memcmp(v, ev, nm * sizeof(float)),
			      "rank %d of dp %d tp %d pp %d zero %d: moments differ", r, b.dp, b.tp,
			      b.pp, b.zero);
		free(p);
		free(ep);
		free(m);
		free(v);
		free(em);
		free(ev);
	}
}

static char *temp_root(void)
{
	char *root = strdup("/tmp/check_reshard.XXXXXX");

	ck_assert(root && mkdtemp(root));
	return root;
}

static const struct lay layouts[] = {
	{ 1, 1, 1, 0 }, { 2, 1, 1, 0 }, { 2, 1, 1, 1 }, { 1, 2, 1, 0 }, { 1, 1, 2, 0 },
	{ 1, 2, 2, 0 }, { 2, 2, 2, 1 }, { 1, 4, 1, 0 }, { 3, 1, 1, 1 }, { 2, 1, 2, 1 },
};
#define NLAYOUTS (int)(sizeof layouts / sizeof layouts[0])

/* Tensor parallelism keeps whole key-value groups: the Llama's 2 allow 2 slices, not 4. */
static int fits(const struct gpt2_config *c, struct lay a)
{
	return model_kv_heads(c) % a.tp == 0;
}

/* From every layout (a loop index) to every other, for one architecture. */
static void from_layout(const struct gpt2_config *c, int i)
{
	struct whole w;
	char *root, dir[4200];

	if (!fits(c, layouts[i]))
		return;
	root = temp_root();
	whole_make(&w, c);
	write_checkpoint(&w, layouts[i], root, dir, sizeof dir);
	for (int j = 0; j < NLAYOUTS; j++)
		if (fits(c, layouts[j]))
			check_every_rank(&w, layouts[j], dir);
	ck_assert(remove_tree(root) == 0);
	free(root);
	whole_free(&w);
}

START_TEST(gpt2_every_layout_to_every_layout)
{
	from_layout(&gpt2, _i);
}
END_TEST

START_TEST(llama_every_layout_to_every_layout)
{
	from_layout(&llama, _i);
}
END_TEST

START_TEST(a_missing_or_short_shard_is_named)
{
	struct whole w;
	struct ckpt_shard_info info;
	struct gpt2_shard s;
	char *root = temp_root(), dir[4200], path[4400], err[1024];
	float *p, *m, *v;
	int64_t step;

	whole_make(&w, &gpt2);
	write_checkpoint(&w, (struct lay){ 2, 2, 2, 1 }, root, dir, sizeof dir);
	info_of(&gpt2, (struct lay){ 1, 1, 1, 0 }, 0, &info, &s);
	p = malloc(info.nparams * sizeof(float));
	m = malloc(info.nparams * sizeof(float));
	v = malloc(info.nparams * sizeof(float));
	/* the second replica's moment parts cut short */
	snprintf(path, sizeof path, "%s/shard-00003.bin", dir);
	ck_assert(truncate(path, 4096) == 0);
	ck_assert(ckpt_read_resharded(dir, &info, p, m, v, &step, err, sizeof err) < 0);
	ck_assert_msg(strstr(err, "shard-00003.bin") && strstr(err, "truncated"), "%s", err);
	ck_assert(unlink(path) == 0);
	ck_assert(ckpt_read_resharded(dir, &info, p, m, v, &step, err, sizeof err) < 0);
	ck_assert_msg(strstr(err, "shard-00003.bin"), "%s", err);
	free(p);
	free(m);
	free(v);
	ck_assert(remove_tree(root) == 0);
	free(root);
	whole_free(&w);
}
END_TEST

/* Overwrite len bytes at off of path. */
static void patch(const char *path, long off, const void *data, size_t len)
{
	FILE *f = fopen(path, "r+b");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
	ck_assert_int_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

/*
 * A shard whose header lies: a parameter count its file cannot hold, or a
 * model shape at the point where the sizes wrapped. Refused naming the
 * file and the field before anything is allocated for it.
 */
START_TEST(a_shard_header_that_lies_is_refused_before_any_allocation)
{
	struct whole w;
	struct ckpt_full full;
	char *root = temp_root(), dir[4200], path[4400], err[1024];
	uint64_t huge = (uint64_t)1 << 40;
	int32_t channels = 1 << 30, heads = 1;

	whole_make(&w, &gpt2);
	write_checkpoint(&w, (struct lay){ 2, 2, 1, 1 }, root, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/shard-00000.bin", dir);
	patch(path, offsetof(struct shard_header, nparams), &huge, sizeof huge);
	ck_assert(ckpt_load_full(dir, NULL, &full, err, sizeof err) < 0);
	ck_assert_msg(strstr(err, "shard-00000.bin: truncated: its header's nparams (1099511627776) is more "
			      "than the file's"), "%s", err);
	ck_assert(remove_tree(root) == 0);
	free(root);
	/* the model's shape in the header, channels 2^30: 3*C*C floats would wrap */
	root = temp_root();
	write_checkpoint(&w, (struct lay){ 2, 2, 1, 1 }, root, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/shard-00000.bin", dir);
	patch(path, offsetof(struct shard_header, model) + 5 * sizeof(int32_t), &heads, sizeof heads);
	patch(path, offsetof(struct shard_header, model) + 6 * sizeof(int32_t), &channels,
	      sizeof channels);
	ck_assert(ckpt_load_full(dir, NULL, &full, err, sizeof err) < 0);
	ck_assert_msg(strstr(err, "shard-00000.bin") &&
		      strstr(err, "model channels is 1073741824: more than the 65536"), "%s", err);
	ck_assert(remove_tree(root) == 0);
	free(root);
	whole_free(&w);
}
END_TEST

START_TEST(another_shape_is_refused_naming_both)
{
	struct whole w;
	struct ckpt_shard_info info;
	struct gpt2_shard s;
	struct gpt2_config other = gpt2;
	char *root = temp_root(), dir[4200], err[1024];
	float *p, *m, *v;
	int64_t step;

	whole_make(&w, &gpt2);
	write_checkpoint(&w, (struct lay){ 1, 1, 1, 0 }, root, dir, sizeof dir);
	other.num_heads = 2;
	info_of(&other, (struct lay){ 1, 2, 1, 0 }, 0, &info, &s);
	p = malloc(info.nparams * sizeof(float));
	m = malloc(info.nparams * sizeof(float));
	v = malloc(info.nparams * sizeof(float));
	ck_assert(ckpt_read_resharded(dir, &info, p, m, v, &step, err, sizeof err) < 0);
	ck_assert_msg(strstr(err, "another shape") && strstr(err, "heads 4") &&
		      strstr(err, "heads 2"), "%s", err);
	free(p);
	free(m);
	free(v);
	ck_assert(remove_tree(root) == 0);
	free(root);
	whole_free(&w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reshard");
	TCase *tc = tcase_create("reshard");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, gpt2_every_layout_to_every_layout, 0, NLAYOUTS);
	tcase_add_loop_test(tc, llama_every_layout_to_every_layout, 0, NLAYOUTS);
	tcase_add_test(tc, a_missing_or_short_shard_is_named);
	tcase_add_test(tc, a_shard_header_that_lies_is_refused_before_any_allocation);
	tcase_add_test(tc, another_shape_is_refused_naming_both);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
