/*
 * t/fuzz/fuzz_ckpt_shard.c - a checkpoint's parameter files driven by their
 * headers' fields rather than their bytes: a whole checkpoint's model.bin
 * (llm.c's header) and optimizer.bin (struct opt_header), or shard 0 of a
 * tensor-parallel pair (struct shard_header), each written with the shape,
 * layout, counts and segment the input says and a body of the length it
 * says, beside the real files of a checkpoint made once per process. So
 * the fuzzer reaches the points where the sizes would wrap, counts that
 * disagree with the shape or with the file's length and segments outside
 * the shard, where a byte fuzzer rarely gets: loading the whole model
 * (ckpt_load_full: stork export, a resume on another layout), a rank
 * reading its own shard (ckpt_read_own_shard) and a rank of another
 * layout reading its part by byte ranges (ckpt_read_resharded) must each
 * refuse with a message, never allocate from a size that wrapped, never
 * read past a buffer.
 *
 * The input, in the host's byte order: a kind byte (even: whole, odd:
 * shard) and three bytes of padding; the model header's ints 0..9 (magic,
 * version, max_seq_len, vocab_size, layers, heads, channels,
 * padded_vocab_size, kv_heads, intermediate); the shard's 11 layout ints
 * (rank, world, dp, tp, pp, zero, tp_rank, dp_rank, stage, first_layer,
 * last_layer); nparams (optimizer.bin's n for a whole checkpoint); nseg;
 * segment 0's lo and hi; the optimizer's step; the body's length (twice
 * that for optimizer.bin, whose moments are twice the parameters); then
 * bytes the body repeats.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/checkpoint/checkpoint_format.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "daemon/engine/parallel/layout.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_CAP (1 << 20) /* a body is at most this long: more than the small model needs */

struct fields {
	uint8_t kind, pad[3];
	int32_t model[10];
	int32_t layout[11];
	uint64_t nparams;
	uint32_t nseg;
	uint64_t seg_lo, seg_hi;
	int64_t step;
	uint32_t body;
} __attribute__((packed));

static const struct gpt2_config small = { .max_seq_len = 8, .vocab_size = 30,
					  .padded_vocab_size = 32, .num_layers = 2,
					  .num_heads = 4, .channels = 16 };

/* What rank r of a layout of world ranks (tensor tp) is to read. */
static int info_of(int world, int tp, int r, struct ckpt_shard_info *info)
{
	struct par_layout l;
	char err[512];

	if (layout_make(&l, &small, world, tp, 1, 0, NULL, 8, r, err, sizeof err) < 0)
		abort();
	ckpt_shard_info_of(&small, &l, info);
	return 0;
}

/* The real checkpoints the crafted files join: whole/ and shard/ (TP2), step 3. */
static void make_checkpoints(char *whole, char *shard, size_t len)
{
	struct ckpt_state st = { .step = 3 };
	struct ckpt_layout l = { .world = 2, .dp = 1, .tp = 2, .pp = 1, .sharded = 1 };
	uint64_t sums[2], sizes[2];
	struct gpt2 m;
	struct adamw_state opt = { 0 };
	char root[PATH_MAX - 64], err[1024];
	float *p, *mv;

	snprintf(root, sizeof root, "%s/whole", fuzz_dir());
	if (gpt2_build(&m, &small, 1) < 0 || adamw_init(&opt, m.num_params) < 0 ||
	    ckpt_save(root, &m, &opt, &st, (struct ckpt_keep){ .newest = 2 }, err, sizeof err) < 0)
		abort();
	snprintf(whole, len, "%s/step_00000003", root);
	adamw_free(&opt);
	gpt2_free(&m);
	snprintf(root, sizeof root, "%s/shard", fuzz_dir());
	if (ckpt_prepare(root, st.step, err, sizeof err) < 0)
		abort();
	for (int r = 0; r < 2; r++) {
		struct ckpt_shard_info info;

		info_of(2, 2, r, &info);
		p = calloc(info.nparams + 1, sizeof *p);
		mv = calloc(info.nparams + 1, sizeof *mv);
		if (!p || !mv || ckpt_write_shard(root, st.step, &info, p, mv, mv, &sums[r], &sizes[r],
						  err, sizeof err) < 0)
			abort();
		free(p);
		free(mv);
	}
	if (ckpt_commit(root, &st, &l, sums, sizes, (struct ckpt_keep){ .newest = 2 }, err, sizeof err) < 0)
		abort();
	snprintf(shard, len, "%s/step_00000003", root);
}

/* head, then body bytes of the input's rest, repeated, written as dir/name. */
static void write_file(const char *dir, const char *name, const void *head, size_t hlen,
		       uint32_t body, const uint8_t *rest, size_t nrest)
{
	char rel[PATH_MAX], path[PATH_MAX];
	uint8_t *file = calloc(1, hlen + body);

	if (!file)
		abort();
	memcpy(file, head, hlen);
	for (uint32_t i = 0; i < body && nrest; i++)
		file[hlen + i] = rest[i % nrest];
	snprintf(rel, sizeof rel, "%s/%s", dir + strlen(fuzz_dir()) + 1, name);
	fuzz_write(path, sizeof path, rel, file, hlen + body);
	free(file);
}

/* A rank's reading of dir: its own shard, or its part by byte ranges. */
static void read_as(const char *dir, const struct ckpt_shard_info *want, int resharded)
{
	size_t nm = 0;
	char err[1024];
	int64_t step;

	for (int k = 0; k < want->nseg; k++)
		nm += want->seg_hi[k] - want->seg_lo[k];
	float *p = calloc(want->nparams + 1, sizeof *p), *m = calloc(nm + 1, sizeof *m),
	      *v = calloc(nm + 1, sizeof *v);
	if (p && m && v) {
		if (resharded)
			ckpt_read_resharded(dir, want, p, m, v, &step, err, sizeof err);
		else
			ckpt_read_own_shard(dir, want, p, m, v, &step, err, sizeof err);
	}
	free(p);
	free(m);
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char whole[PATH_MAX], shard[PATH_MAX];
	struct fields f;
	struct ckpt_full full;
	struct ckpt_shard_info own, whole_rank;
	char err[1024];

	fuzz_quiet();
	if (!whole[0])
		make_checkpoints(whole, shard, sizeof whole);
	if (size < sizeof f)
		return 0;
	memcpy(&f, data, sizeof f);
	f.body %= BODY_CAP;
	const uint8_t *rest = data + sizeof f;
	size_t nrest = size - sizeof f;
	int32_t model[GPT2_HEADER_INTS] = { 0 };
	float eps = 1e-5f, theta = 10000.0f;

	memcpy(model, f.model, sizeof f.model);
	/* a Llama header's epsilon and rotary base, valid: the shape is what is
	 * judged (a GPT-2 header holds zeros there) */
	if (model[0] == LLAMA_MAGIC) {
		memcpy(&model[12], &eps, 4);
		memcpy(&model[13], &theta, 4);
	}
	const char *dir = f.kind & 1 ? shard : whole;
	if (f.kind & 1) {
		struct shard_header h = { .magic = SHARD_MAGIC, .version = SHARD_VERSION };

		memcpy(&h.rank, f.layout, sizeof f.layout);
		memcpy(h.model, model, sizeof model);
		h.nparams = f.nparams;
		h.nseg = f.nseg;
		h.seg_lo[0] = f.seg_lo;
		h.seg_hi[0] = f.seg_hi;
		h.opt_step = f.step;
		write_file(dir, "shard-00000.bin", &h, sizeof h, f.body, rest, nrest);
	} else {
		struct opt_header o = { .magic = OPT_MAGIC, .version = OPT_VERSION, .n = f.nparams,
					.step = f.step };

		/* the moments are twice the parameters */
		write_file(dir, "model.bin", model, sizeof model, f.body, rest, nrest);
		write_file(dir, "optimizer.bin", &o, sizeof o, 2 * f.body, rest, nrest);
	}
	if (ckpt_load_full(dir, NULL, &full, err, sizeof err) == 0)
		ckpt_full_free(&full);
	info_of(2, 2, 0, &own);
	read_as(dir, &own, 0);
	info_of(1, 1, 0, &whole_rank);
	read_as(dir, &whole_rank, 1);
	return 0;
}
