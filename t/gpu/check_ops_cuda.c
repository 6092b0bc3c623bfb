/*
 * t/gpu/check_ops_cuda.c - every entry of the CUDA backend against the CPU
 * backend (t/unit/check_kernels checks the CPU one against a double
 * reference), on random inputs, forward and backward, at ordinary and odd
 * sizes: T = 1, C not a multiple of 32, N not a multiple of any block,
 * Vp > V.
 *
 * Backward entries add into their outputs, so gradient buffers start from
 * random values, not zeros. Tolerance: both sides compute in fp32 (TF32
 * off) and differ only in the order of their sums; a sum of K terms of
 * size ~1 then differs by about K * 6e-8 at worst, below 1e-5 for the K <=
 * 200 of these sizes. We allow 1e-4 absolute + 1e-4 relative, ten times
 * that, and far below what a wrong index or formula gives (O(0.1)).
 * Deterministic entries (sumsq, the encoder's, LayerNorm's, RMSNorm's and
 * rope's backward, column sums) must also repeat their bits exactly.
 * Exits 77 without a GPU.
 */
#include "config.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/rng.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4

static uint64_t rng = 7;

struct pair {
	float *h; /* host: the CPU backend's input/output */
	float *d; /* device: the CUDA backend's */
	size_t n;
};

static void use_gpu(void)
{
	char desc[160], err[256];

	ck_assert_msg(kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) == 0, "%s",
		      err);
	ops_cuda.set_precision(OPS_FP32);
}

/* n random floats (scale s) on both sides. */
static struct pair rnd(size_t n, float s)
{
	struct pair p = { malloc((n ? n : 1) * sizeof(float)), ops_cuda.alloc(n * sizeof(float)), n };

	ck_assert_ptr_nonnull(p.h);
	ck_assert_ptr_nonnull(p.d);
	for (size_t i = 0; i < n; i++)
		p.h[i] = rng_normal(&rng, 0.0f, s);
	ops_cuda.upload(p.d, p.h, n * sizeof(float));
	return p;
}

static int *tokens(size_t n, int V, int **dev)
{
	int *t = malloc(n * sizeof(int));

	for (size_t i = 0; i < n; i++)
		t[i] = (int)rng_below(&rng, (uint32_t)V);
	/* a few repeats of token 0, so encoder_backward meets shared rows */
	for (size_t i = 0; i < n; i += 3)
		t[i] = 0;
	*dev = ops_cuda.alloc(n * sizeof(int));
	ops_cuda.upload(*dev, t, n * sizeof(int));
	return t;
}

/*
 * The device copy agrees with the host copy within tol (|cuda - cpu| / (1 +
 * |cpu|)); returns that largest difference.
 */
static double agree_within(const struct pair *p, const char *what, double tol)
{
	float *g = malloc((p->n ? p->n : 1) * sizeof(float));
	double worst = 0.0;
	size_t at = 0;

	ops_cuda.download(g, p->d, p->n * sizeof(float));
	for (size_t i = 0; i < p->n; i++) {
		double e = fabs((double)g[i] - p->h[i]) / (1.0 + fabs(p->h[i]));

		ck_assert_msg(isfinite(g[i]), "%s[%zu] = %g", what, i, g[i]);
		if (e > worst) {
			worst = e;
			at = i;
		}
	}
	ck_assert_msg(worst <= tol, "%s: element %zu: cuda %.8g reference %.8g (tolerance %g)", what,
		      at, g[at], p->h[at], tol);
	free(g);
	return worst;
}

/* The device copy agrees with the host copy within TOL. */
static void agree(const struct pair *p, const char *what)
{
	agree_within(p, what, TOL);
}

static void drop(struct pair *p)
{
	free(p->h);
	ops_cuda.free(p->d);
}

/* n device floats as a host copy (the caller frees it). */
static float *fetch(const float *d, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof(float));

	ck_assert_ptr_nonnull(h);
	ops_cuda.download(h, d, n * sizeof(float));
	return h;
}

/* The device copy's bits equal want (n floats on the host). */
static void same_bits(const float *d, const float *want, size_t n, const char *what)
{
	float *got = fetch(d, n);

	ck_assert_msg(!memcmp(got, want, n * sizeof(float)), "%s: other bits than the reference's", what);
	free(got);
}

/*
 * Sizes: ordinary, and odd ones (T = 1, C = 40, N = 3 * 17, T = 150: more
 * than two of the CPU attention's 64-row blocks).
 */
struct dims {
	int B, T, C, NH, V, Vp;
};
static const struct dims sizes[] = {
	{ 4, 64, 128, 4, 300, 384 },
	{ 3, 17, 40, 5, 250, 256 },
	{ 2, 1, 40, 5, 100, 128 },
	{ 1, 33, 96, 3, 97, 100 },
	{ 1, 150, 64, 2, 50, 64 },
};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

START_TEST(test_encoder)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, *dtok, *tok;
	struct pair wte, wpe, out, dout, dwte, dwpe;

	use_gpu();
	tok = tokens((size_t)N, z->V, &dtok);
	wte = rnd((size_t)z->V * z->C, 1.0f);
	wpe = rnd((size_t)z->T * z->C, 1.0f);
	out = rnd((size_t)N * z->C, 1.0f);
	ops_cpu.encoder_forward(out.h, tok, wte.h, wpe.h, z->B, z->T, z->C);
	ops_cuda.encoder_forward(out.d, dtok, wte.d, wpe.d, z->B, z->T, z->C);
	agree(&out, "encoder out");
	dout = rnd((size_t)N * z->C, 1.0f);
	dwte = rnd((size_t)z->V * z->C, 1.0f);
	dwpe = rnd((size_t)z->T * z->C, 1.0f);
	ops_cpu.encoder_backward(dwte.h, dwpe.h, dout.h, tok, z->B, z->T, z->C);
	ops_cuda.encoder_backward(dwte.d, dwpe.d, dout.d, dtok, z->B, z->T, z->C);
	agree(&dwte, "dwte");
	agree(&dwpe, "dwpe");
	drop(&wte), drop(&wpe), drop(&out), drop(&dout), drop(&dwte), drop(&dwpe);
	free(tok);
	ops_cuda.free(dtok);
}
END_TEST

/* Llama has no position embedding: wpe and dwpe NULL, only the token rows. */
START_TEST(test_encoder_without_positions)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, *dtok, *tok;
	struct pair wte, out, dout, dwte;

	use_gpu();
	tok = tokens((size_t)N, z->V, &dtok);
	wte = rnd((size_t)z->V * z->C, 1.0f);
	out = rnd((size_t)N * z->C, 1.0f);
	ops_cpu.encoder_forward(out.h, tok, wte.h, NULL, z->B, z->T, z->C);
	ops_cuda.encoder_forward(out.d, dtok, wte.d, NULL, z->B, z->T, z->C);
	agree(&out, "encoder out (no wpe)");
	dout = rnd((size_t)N * z->C, 1.0f);
	dwte = rnd((size_t)z->V * z->C, 1.0f);
	ops_cpu.encoder_backward(dwte.h, NULL, dout.h, tok, z->B, z->T, z->C);
	ops_cuda.encoder_backward(dwte.d, NULL, dout.d, dtok, z->B, z->T, z->C);
	agree(&dwte, "dwte (no wpe)");
	drop(&wte), drop(&out), drop(&dout), drop(&dwte);
	free(tok);
	ops_cuda.free(dtok);
}
END_TEST

START_TEST(test_layernorm)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, C = z->C;
	struct pair x = rnd((size_t)N * C, 2.0f), w, b, out, mean, rstd, dout, dx, dw, db;

	use_gpu();
	w = rnd((size_t)C, 1.0f);
	b = rnd((size_t)C, 1.0f);
	out = rnd((size_t)N * C, 1.0f);
	mean = rnd((size_t)N, 1.0f);
	rstd = rnd((size_t)N, 1.0f);
	ops_cpu.layernorm_forward(out.h, mean.h, rstd.h, x.h, w.h, b.h, N, C);
	ops_cuda.layernorm_forward(out.d, mean.d, rstd.d, x.d, w.d, b.d, N, C);
	agree(&out, "layernorm out");
	agree(&mean, "layernorm mean");
	agree(&rstd, "layernorm rstd");
	dout = rnd((size_t)N * C, 1.0f);
	dx = rnd((size_t)N * C, 1.0f);
	dw = rnd((size_t)C, 1.0f);
	db = rnd((size_t)C, 1.0f);
	ops_cpu.layernorm_backward(dx.h, dw.h, db.h, dout.h, x.h, w.h, mean.h, rstd.h, N, C);
	ops_cuda.layernorm_backward(dx.d, dw.d, db.d, dout.d, x.d, w.d, mean.d, rstd.d, N, C);
	agree(&dx, "layernorm dinp");
	agree(&dw, "layernorm dweight");
	agree(&db, "layernorm dbias");
	drop(&x), drop(&w), drop(&b), drop(&out), drop(&mean), drop(&rstd);
	drop(&dout), drop(&dx), drop(&dw), drop(&db);
}
END_TEST

/*
 * RMSNorm at each size; the backward pass run twice from the same
 * gradients must give the same bits (dweight's column sums have no
 * atomics).
 */
START_TEST(test_rmsnorm)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, C = z->C;
	struct pair x, w, out, rstd, dout, dx, dw;
	float *dx0, *dw0, *dx1, *dw1;

	use_gpu();
	x = rnd((size_t)N * C, 2.0f);
	w = rnd((size_t)C, 1.0f);
	out = rnd((size_t)N * C, 1.0f);
	rstd = rnd((size_t)N, 1.0f);
	ops_cpu.rmsnorm_forward(out.h, rstd.h, x.h, w.h, N, C, 1e-5f);
	ops_cuda.rmsnorm_forward(out.d, rstd.d, x.d, w.d, N, C, 1e-5f);
	agree(&out, "rmsnorm out");
	agree(&rstd, "rmsnorm rstd");
	dout = rnd((size_t)N * C, 1.0f);
	dx = rnd((size_t)N * C, 1.0f);
	dw = rnd((size_t)C, 1.0f);
	dx0 = fetch(dx.d, dx.n);
	dw0 = fetch(dw.d, dw.n);
	ops_cpu.rmsnorm_backward(dx.h, dw.h, dout.h, x.h, w.h, rstd.h, N, C);
	ops_cuda.rmsnorm_backward(dx.d, dw.d, dout.d, x.d, w.d, rstd.d, N, C);
	agree(&dx, "rmsnorm dinp");
	agree(&dw, "rmsnorm dweight");
	dx1 = fetch(dx.d, dx.n);
	dw1 = fetch(dw.d, dw.n);
	ops_cuda.upload(dx.d, dx0, dx.n * sizeof(float));
	ops_cuda.upload(dw.d, dw0, dw.n * sizeof(float));
	ops_cuda.rmsnorm_backward(dx.d, dw.d, dout.d, x.d, w.d, rstd.d, N, C);
	same_bits(dx.d, dx1, dx.n, "rmsnorm dinp, run again");
	same_bits(dw.d, dw1, dw.n, "rmsnorm dweight, run again");
	free(dx0), free(dw0), free(dx1), free(dw1);
	drop(&x), drop(&w), drop(&out), drop(&rstd), drop(&dout), drop(&dx), drop(&dw);
}
END_TEST

/*
 * Rotary positions with grouped-query heads (KV < NH), with one key and
 * value head for all (KV = 1), and plain multi-head (KV = NH); T = 1 and
 * N not a multiple of any block among them.
 */
struct rope_dims {
	int B, T, NH, KV, HS;
};
static const struct rope_dims rope_sizes[] = {
	{ 2, 5, 8, 2, 16 }, { 2, 5, 8, 8, 16 }, { 3, 17, 6, 1, 8 }, { 2, 1, 4, 2, 64 },
	{ 1, 33, 12, 4, 128 },
};
#define NROPE ((int)(sizeof rope_sizes / sizeof rope_sizes[0]))

/*
 * The table rope (T, HS/2, 2) of cos, sin of t * inv_freq[i], inv_freq[i]
 * = 1 / 10000^(2i/HS) (Llama's), on both sides.
 */
static struct pair rope_table(int T, int HS)
{
	int half = HS / 2;
	struct pair p = rnd((size_t)T * HS, 1.0f);

	for (int t = 0; t < T; t++)
		for (int i = 0; i < half; i++) {
			double angle = t / pow(10000.0, 2.0 * i / HS);

			p.h[((size_t)t * half + i) * 2] = (float)cos(angle);
			p.h[((size_t)t * half + i) * 2 + 1] = (float)sin(angle);
		}
	ops_cuda.upload(p.d, p.h, p.n * sizeof(float));
	return p;
}

START_TEST(test_rope)
{
	const struct rope_dims *z = &rope_sizes[_i];
	int B = z->B, T = z->T, NH = z->NH, KV = z->KV, HS = z->HS;
	size_t nraw = (size_t)B * T * (NH + 2 * KV) * HS, nqkv = (size_t)B * T * 3 * NH * HS;
	struct pair rope, raw, qkv, dqkv, draw;
	float *start, *first;

	use_gpu();
	rope = rope_table(T, HS);
	raw = rnd(nraw, 1.0f);
	qkv = rnd(nqkv, 1.0f);
	ops_cpu.rope_forward(qkv.h, raw.h, rope.h, B, T, NH, KV, HS);
	ops_cuda.rope_forward(qkv.d, raw.d, rope.d, B, T, NH, KV, HS);
	agree(&qkv, "rope qkv");
	dqkv = rnd(nqkv, 1.0f);
	draw = rnd(nraw, 1.0f);
	start = fetch(draw.d, nraw);
	ops_cpu.rope_backward(draw.h, dqkv.h, rope.h, B, T, NH, KV, HS);
	ops_cuda.rope_backward(draw.d, dqkv.d, rope.d, B, T, NH, KV, HS);
	agree(&draw, "rope draw");
	/* each float of draw has one writer: the same bits again */
	first = fetch(draw.d, nraw);
	ops_cuda.upload(draw.d, start, nraw * sizeof(float));
	ops_cuda.rope_backward(draw.d, dqkv.d, rope.d, B, T, NH, KV, HS);
	same_bits(draw.d, first, nraw, "rope draw, run again");
	free(start), free(first);
	drop(&rope), drop(&raw), drop(&qkv), drop(&dqkv), drop(&draw);
}
END_TEST

/* SwiGLU with I = 2C + 1: rows of gate and up not a multiple of any block. */
START_TEST(test_swiglu)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, I = 2 * z->C + 1;
	struct pair inp, out, dout, dinp;

	use_gpu();
	inp = rnd((size_t)N * 2 * I, 2.0f);
	out = rnd((size_t)N * I, 1.0f);
	ops_cpu.swiglu_forward(out.h, inp.h, N, I);
	ops_cuda.swiglu_forward(out.d, inp.d, N, I);
	agree(&out, "swiglu out");
	dout = rnd((size_t)N * I, 1.0f);
	dinp = rnd((size_t)N * 2 * I, 1.0f);
	ops_cpu.swiglu_backward(dinp.h, inp.h, dout.h, N, I);
	ops_cuda.swiglu_backward(dinp.d, inp.d, dout.d, N, I);
	agree(&dinp, "swiglu dinp");
	drop(&inp), drop(&out), drop(&dout), drop(&dinp);
}
END_TEST

/*
 * The linear layers in precision p on both backends, forward with and
 * without bias, backward with and without dinp (the LM head's call). In
 * bf16 the GPU (bf16 copies, cublasGemmEx on the tensor cores, fp32 sums)
 * meets the CPU's exact emulation (sgemm on bf16-rounded copies):
 * products of bf16 values are exact in fp32 on both sides, so they differ
 * only in the order of their sums, as in fp32, and the same tolerance
 * holds; the GPU's bf16 output must also differ from its fp32 output.
 */
static void check_matmul(const struct dims *z, enum ops_precision p)
{
	int N = z->B * z->T, C = z->C, OC = 3 * z->C + 5;
	struct pair x = rnd((size_t)N * C, 1.0f), w = rnd((size_t)OC * C, 0.1f), b = rnd(OC, 1.0f);
	struct pair out = rnd((size_t)N * OC, 1.0f), dout, dx, dw, db;
	float *fp32 = malloc((size_t)N * OC * sizeof(float));

	use_gpu();
	ops_cuda.matmul_forward(out.d, x.d, w.d, b.d, N, C, OC);
	ops_cuda.download(fp32, out.d, (size_t)N * OC * sizeof(float));
	ops_cpu.set_precision(p);
	ops_cuda.set_precision(p);
	for (int bias = 0; bias < 2; bias++) {
		ops_cpu.matmul_forward(out.h, x.h, w.h, bias ? b.h : NULL, N, C, OC);
		ops_cuda.matmul_forward(out.d, x.d, w.d, bias ? b.d : NULL, N, C, OC);
		agree(&out, bias ? "matmul out (bias)" : "matmul out");
	}
	if (p == OPS_BF16) {
		float *bf = malloc((size_t)N * OC * sizeof(float));
		double moved = 0.0;

		ops_cuda.download(bf, out.d, (size_t)N * OC * sizeof(float));
		for (int i = 0; i < N * OC; i++)
			moved = fmax(moved, fabs((double)bf[i] - fp32[i]));
		ck_assert_msg(moved > 1e-5, "bf16 output equals fp32's (largest difference %g)", moved);
		free(bf);
	}
	dout = rnd((size_t)N * OC, 1.0f);
	dx = rnd((size_t)N * C, 1.0f);
	dw = rnd((size_t)OC * C, 1.0f);
	db = rnd((size_t)OC, 1.0f);
	ops_cpu.matmul_backward(dx.h, dw.h, db.h, dout.h, x.h, w.h, N, C, OC);
	ops_cuda.matmul_backward(dx.d, dw.d, db.d, dout.d, x.d, w.d, N, C, OC);
	agree(&dx, "matmul dinp");
	agree(&dw, "matmul dweight");
	agree(&db, "matmul dbias");
	/* the LM head's call: no dinp buffer, no bias */
	ops_cpu.matmul_backward(NULL, dw.h, NULL, dout.h, x.h, w.h, N, C, OC);
	ops_cuda.matmul_backward(NULL, dw.d, NULL, dout.d, x.d, w.d, N, C, OC);
	agree(&dw, "matmul dweight (no dinp)");
	ops_cpu.set_precision(OPS_FP32);
	ops_cuda.set_precision(OPS_FP32);
	free(fp32);
	drop(&x), drop(&w), drop(&b), drop(&out), drop(&dout), drop(&dx), drop(&dw), drop(&db);
}

START_TEST(test_matmul)
{
	check_matmul(&sizes[_i], OPS_FP32);
}
END_TEST

START_TEST(test_matmul_bf16)
{
	check_matmul(&sizes[_i], OPS_BF16);
}
END_TEST

START_TEST(test_attention)
{
	const struct dims *z = &sizes[_i];
	int B = z->B, T = z->T, NH = z->NH, HS = z->C / z->NH, C = z->C;
	struct pair qkv = rnd((size_t)B * T * 3 * C, 1.0f), out = rnd((size_t)B * T * C, 1.0f);
	struct pair stats = rnd((size_t)B * NH * T * OPS_ATT_STATS, 1.0f), dout, dqkv;

	use_gpu();
	ops_cpu.attention_forward(out.h, stats.h, qkv.h, B, T, NH, HS);
	ops_cuda.attention_forward(out.d, stats.d, qkv.d, B, T, NH, HS);
	agree(&stats, "attention rows' max and exp-sum");
	agree(&out, "attention out");
	dout = rnd((size_t)B * T * C, 1.0f);
	dqkv = rnd((size_t)B * T * 3 * C, 1.0f);
	ops_cpu.attention_backward(dqkv.h, dout.h, qkv.h, stats.h, B, T, NH, HS);
	ops_cuda.attention_backward(dqkv.d, dout.d, qkv.d, stats.d, B, T, NH, HS);
	agree(&dqkv, "attention dqkv");
	drop(&qkv), drop(&out), drop(&stats), drop(&dout), drop(&dqkv);
}
END_TEST

START_TEST(test_softmax_xent)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, *dtok, *tok;
	struct pair logits = rnd((size_t)N * z->Vp, 3.0f), losses = rnd((size_t)N, 1.0f);

	use_gpu();
	tok = tokens((size_t)N, z->V, &dtok);
	ops_cpu.softmax_xent_forward(losses.h, logits.h, tok, N, z->V, z->Vp);
	ops_cuda.softmax_xent_forward(losses.d, logits.d, dtok, N, z->V, z->Vp);
	agree(&logits, "probabilities");
	agree(&losses, "losses");
	ops_cpu.softmax_xent_backward(logits.h, tok, 1.0f / N, N, z->V, z->Vp);
	ops_cuda.softmax_xent_backward(logits.d, dtok, 1.0f / N, N, z->V, z->Vp);
	agree(&logits, "dlogits");
	/* without targets: probabilities only, losses untouched */
	drop(&logits), drop(&losses);
	free(tok);
	ops_cuda.free(dtok);
}
END_TEST

/*
 * Tensor parallelism over the vocabulary: each of 2 slices' embedding and
 * softmax steps against the CPU's. Each step starts from the CPU's result
 * of the step before, uploaded, so a difference is the step's own.
 */
START_TEST(test_vocab_parallel)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, C = z->C, vn = z->Vp / 2, *dtok, *tok;

	use_gpu();
	tok = tokens((size_t)N, z->V, &dtok);
	for (int k = 0; k < 2; k++) {
		int v0 = k * vn, nv = z->V - v0 < vn ? z->V - v0 : vn;
		struct pair wte = rnd((size_t)vn * C, 1.0f), out = rnd((size_t)N * C, 1.0f);
		struct pair dout = rnd((size_t)N * C, 1.0f), dwte = rnd((size_t)vn * C, 1.0f);
		struct pair dwpe = rnd((size_t)z->T * C, 1.0f), logits = rnd((size_t)N * vn, 3.0f);
		struct pair rows = rnd((size_t)N, 1.0f), sums = rnd((size_t)N, 1.0f);
		struct pair losses = rnd((size_t)N, 1.0f);

		ops_cpu.vocab_encoder_forward(out.h, tok, wte.h, N, C, v0, vn);
		ops_cuda.vocab_encoder_forward(out.d, dtok, wte.d, N, C, v0, vn);
		agree(&out, "vocab encoder out");
		ops_cpu.vocab_encoder_backward(dwte.h, k ? NULL : dwpe.h, dout.h, tok, z->B, z->T,
					       C, v0, vn);
		ops_cuda.vocab_encoder_backward(dwte.d, k ? NULL : dwpe.d, dout.d, dtok, z->B, z->T, C,
						v0, vn);
		agree(&dwte, "vocab dwte");
		agree(&dwpe, "vocab dwpe");
		ops_cpu.vocab_softmax_max(rows.h, logits.h, N, nv, vn);
		ops_cuda.vocab_softmax_max(rows.d, logits.d, N, nv, vn);
		agree(&rows, "vocab row max");
		ops_cuda.upload(rows.d, rows.h, (size_t)N * sizeof(float));
		ops_cpu.vocab_softmax_exp(logits.h, sums.h, rows.h, N, nv, vn);
		ops_cuda.vocab_softmax_exp(logits.d, sums.d, rows.d, N, nv, vn);
		agree(&logits, "vocab exponentials");
		agree(&sums, "vocab row sums");
		ops_cuda.upload(sums.d, sums.h, (size_t)N * sizeof(float));
		ops_cuda.upload(logits.d, logits.h, (size_t)N * vn * sizeof(float));
		ops_cpu.vocab_softmax_finish(losses.h, logits.h, sums.h, tok, N, nv, vn, v0);
		ops_cuda.vocab_softmax_finish(losses.d, logits.d, sums.d, dtok, N, nv, vn, v0);
		agree(&logits, "vocab probabilities");
		agree(&losses, "vocab losses");
		ops_cpu.vocab_xent_backward(logits.h, tok, 1.0f / N, N, nv, vn, v0);
		ops_cuda.vocab_xent_backward(logits.d, dtok, 1.0f / N, N, nv, vn, v0);
		agree(&logits, "vocab dlogits");
		drop(&wte), drop(&out), drop(&dout), drop(&dwte), drop(&dwpe);
		drop(&logits), drop(&rows), drop(&sums), drop(&losses);
	}
	free(tok);
	ops_cuda.free(dtok);
}
END_TEST

/*
 * The fused kernels on the GPU: within TOL of the CPU's fused kernels,
 * and the bits of the GPU's own unfused kernels (the same expressions and
 * reduction orders): the classifier's losses and dlogits; the residual
 * and its LayerNorm, the sum written over one input as the model does.
 */
START_TEST(test_fused_kernels)
{
	const struct dims *z = &sizes[_i];
	int N = z->B * z->T, C = z->C, *dtok, *tok;
	size_t NV = (size_t)N * z->Vp, NC = (size_t)N * C;
	struct pair logits = rnd(NV, 3.0f), losses = rnd((size_t)N, 1.0f);
	struct pair x = rnd(NC, 1.0f), y = rnd(NC, 1.0f), w = rnd((size_t)C, 1.0f);
	struct pair b = rnd((size_t)C, 1.0f), out = rnd(NC, 1.0f), mean = rnd((size_t)N, 1.0f);
	struct pair rstd = rnd((size_t)N, 1.0f);
	float *tmp, *want[5];

	use_gpu();
	tok = tokens((size_t)N, z->V, &dtok);
	/* the unfused kernels on a device copy of the logits */
	tmp = ops_cuda.alloc(NV * sizeof(float));
	ops_cuda.copy(tmp, logits.d, NV * sizeof(float));
	ops_cuda.softmax_xent_forward(losses.d, tmp, dtok, N, z->V, z->Vp);
	ops_cuda.softmax_xent_backward(tmp, dtok, 0.5f / N, N, z->V, z->Vp);
	want[0] = fetch(tmp, NV);
	want[1] = fetch(losses.d, (size_t)N);
	ops_cuda.free(tmp);
	ops_cpu.softmax_xent_fused(losses.h, logits.h, tok, 0.5f / N, N, z->V, z->Vp);
	ops_cuda.softmax_xent_fused(losses.d, logits.d, dtok, 0.5f / N, N, z->V, z->Vp);
	agree(&logits, "fused dlogits");
	agree(&losses, "fused losses");
	same_bits(logits.d, want[0], NV, "fused dlogits");
	same_bits(losses.d, want[1], (size_t)N, "fused losses");

	tmp = ops_cuda.alloc(NC * sizeof(float));
	ops_cuda.residual_forward(tmp, x.d, y.d, NC);
	ops_cuda.layernorm_forward(out.d, mean.d, rstd.d, tmp, w.d, b.d, N, C);
	want[2] = fetch(tmp, NC);
	want[3] = fetch(out.d, NC);
	want[4] = fetch(rstd.d, (size_t)N);
	ops_cuda.free(tmp);
	ops_cpu.residual_layernorm_forward(y.h, out.h, mean.h, rstd.h, x.h, y.h, w.h, b.h, N, C);
	ops_cuda.residual_layernorm_forward(y.d, out.d, mean.d, rstd.d, x.d, y.d, w.d, b.d, N, C);
	agree(&y, "fused residual");
	agree(&out, "fused layernorm out");
	agree(&mean, "fused layernorm mean");
	agree(&rstd, "fused layernorm rstd");
	same_bits(y.d, want[2], NC, "fused residual");
	same_bits(out.d, want[3], NC, "fused layernorm out");
	same_bits(rstd.d, want[4], (size_t)N, "fused layernorm rstd");
	for (int i = 0; i < 5; i++)
		free(want[i]);
	drop(&logits), drop(&losses), drop(&x), drop(&y), drop(&w), drop(&b), drop(&out);
	drop(&mean), drop(&rstd);
	free(tok);
	ops_cuda.free(dtok);
}
END_TEST

START_TEST(test_elementwise)
{
	size_t n = 1000003; /* not a multiple of any block */
	struct pair x = rnd(n, 2.0f), y = rnd(n, 1.0f), out = rnd(n, 1.0f), d = rnd(n, 1.0f);
	struct pair da = rnd(n, 1.0f), db = rnd(n, 1.0f), m = rnd(n, 0.1f), v = rnd(n, 0.1f);

	use_gpu();
	for (size_t i = 0; i < n; i++)
		v.h[i] = fabsf(v.h[i]);
	ops_cuda.upload(v.d, v.h, n * sizeof(float));
	ops_cpu.gelu_forward(out.h, x.h, n);
	ops_cuda.gelu_forward(out.d, x.d, n);
	agree(&out, "gelu");
	ops_cpu.gelu_backward(da.h, x.h, d.h, n);
	ops_cuda.gelu_backward(da.d, x.d, d.d, n);
	agree(&da, "gelu backward");
	ops_cpu.residual_forward(out.h, x.h, y.h, n);
	ops_cuda.residual_forward(out.d, x.d, y.d, n);
	agree(&out, "residual");
	ops_cpu.residual_backward(da.h, db.h, d.h, n);
	ops_cuda.residual_backward(da.d, db.d, d.d, n);
	agree(&da, "residual da");
	agree(&db, "residual db");
	ops_cpu.adamw(x.h, d.h, m.h, v.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
	ops_cuda.adamw(x.d, d.d, m.d, v.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
	agree(&x, "adamw params");
	agree(&m, "adamw m");
	agree(&v, "adamw v");
	ops_cpu.scale(y.h, n, 0.37f);
	ops_cuda.scale(y.d, n, 0.37f);
	agree(&y, "scale");
	/* bf16 activations: the same rounding, bit for bit */
	ops_cpu.round_bf16(x.h, n);
	ops_cuda.round_bf16(x.d, n);
	same_bits(x.d, x.h, n, "round_bf16");
	ops_cpu.zero(y.h, n);
	ops_cuda.zero(y.d, n);
	agree(&y, "zero");
	drop(&x), drop(&y), drop(&out), drop(&d), drop(&da), drop(&db), drop(&m), drop(&v);
}
END_TEST

START_TEST(test_sumsq_is_deterministic_and_right)
{
	size_t ns[] = { 1, 255, 1000003, 5000000 };

	use_gpu();
	for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
		struct pair x = rnd(ns[k], 1.0f);
		double c = ops_cpu.sumsq(x.h, ns[k]), g = ops_cuda.sumsq(x.d, ns[k]);

		ck_assert_msg(fabs(g - c) <= 1e-9 * c, "n %zu: cuda %.15g cpu %.15g", ns[k], g, c);
		for (int r = 0; r < 3; r++)
			ck_assert_msg(ops_cuda.sumsq(x.d, ns[k]) == g, "sumsq changed between runs");
		drop(&x);
	}
}
END_TEST

/* Backward passes without atomics give the same bits every run. */
START_TEST(test_backward_passes_repeat_their_bits)
{
	int B = 8, T = 64, C = 96, V = 50, N = B * T, *dtok, *tok;
	struct pair dout = rnd((size_t)N * C, 1.0f), x = rnd((size_t)N * C, 1.0f);
	struct pair w = rnd((size_t)C, 1.0f), mean = rnd((size_t)N, 0.1f), rstd = rnd((size_t)N, 1.0f);
	float *first = malloc((size_t)V * C * sizeof(float)), *again = malloc((size_t)V * C * sizeof(float));
	float *lnw1 = malloc((size_t)C * sizeof(float)), *lnw2 = malloc((size_t)C * sizeof(float));

	use_gpu();
	tok = tokens((size_t)N, V, &dtok);
	for (int run = 0; run < 3; run++) {
		struct pair dwte = rnd((size_t)V * C, 0.0f), dwpe = rnd((size_t)T * C, 0.0f);
		struct pair dx = rnd((size_t)N * C, 0.0f), dw = rnd((size_t)C, 0.0f), db = rnd((size_t)C, 0.0f);

		ops_cuda.encoder_backward(dwte.d, dwpe.d, dout.d, dtok, B, T, C);
		ops_cuda.layernorm_backward(dx.d, dw.d, db.d, dout.d, x.d, w.d, mean.d, rstd.d, N, C);
		ops_cuda.download(run ? again : first, dwte.d, (size_t)V * C * sizeof(float));
		ops_cuda.download(run ? lnw2 : lnw1, dw.d, (size_t)C * sizeof(float));
		if (run) {
			ck_assert_msg(!memcmp(first, again, (size_t)V * C * sizeof(float)), "dwte bits");
			ck_assert_msg(!memcmp(lnw1, lnw2, (size_t)C * sizeof(float)), "dweight bits");
		}
		drop(&dwte), drop(&dwpe), drop(&dx), drop(&dw), drop(&db);
	}
	drop(&dout), drop(&x), drop(&w), drop(&mean), drop(&rstd);
	free(first), free(again), free(lnw1), free(lnw2), free(tok);
	ops_cuda.free(dtok);
}
END_TEST

START_TEST(test_memory_round_trip_and_out_of_memory)
{
	size_t free_b = 0, total_b = 0;
	float h[5] = { 1, 2, 3, 4, 5 }, back[5] = { 0 };
	float *d, *d2, *pinned;

	use_gpu();
	ops_cuda.mem_info(&free_b, &total_b);
	ck_assert_msg(total_b > 0 && free_b <= total_b, "mem_info %zu of %zu", free_b, total_b);
	d = ops_cuda.alloc(sizeof h);
	d2 = ops_cuda.alloc(sizeof h);
	pinned = ops_cuda.host_alloc(sizeof h);
	ck_assert_ptr_nonnull(pinned);
	ck_assert(kernels_cuda_is_device_ptr(d));
	ck_assert(!kernels_cuda_is_device_ptr(h));
	ck_assert(!kernels_cuda_is_device_ptr(pinned));
	ops_cuda.upload(d, h, sizeof h);
	ops_cuda.copy(d2, d, sizeof h);
	ops_cuda.download(back, d2, sizeof h);
	ck_assert(!memcmp(h, back, sizeof h));
	/* more than the card holds: NULL, and the device stays usable */
	ck_assert_ptr_null(ops_cuda.alloc(total_b * 2));
	ops_cuda.download(back, d, sizeof h);
	ck_assert(!memcmp(h, back, sizeof h));
	ops_cuda.free(d);
	ops_cuda.free(d2);
	ops_cuda.host_free(pinned);
}
END_TEST

/* The engine's count of its device memory (metrics gpu_engine_bytes and _peak_bytes): 64 MiB in, out, the peak kept. */
START_TEST(test_engine_bytes_follow_alloc_and_free)
{
	const size_t big = 64u << 20;
	double now0, peak0, now1, peak1, now2, peak2;
	float *d;

	use_gpu();
	kernels_cuda_engine_bytes(0, &now0, &peak0);
	d = ops_cuda.alloc(big);
	ck_assert_ptr_nonnull(d);
	kernels_cuda_engine_bytes(0, &now1, &peak1);
	ops_cuda.free(d);
	kernels_cuda_engine_bytes(0, &now2, &peak2);
	ck_assert_msg(now1 == now0 + big, "%.0f after %zu more than %.0f", now1, big, now0);
	ck_assert(peak1 >= now1 && peak1 >= peak0);
	ck_assert_msg(now2 == now0, "%.0f after the free, %.0f before", now2, now0);
	ck_assert(peak2 == peak1);
	kernels_cuda_engine_bytes(-1, &now2, &peak2);
	ck_assert(now2 == 0 && peak2 == 0);
}
END_TEST

/*
 * The fused attention against the unfused one (fp32, on the GPU), forward
 * and backward, in each precision of its tiles, at T up to 2048 and heads
 * 8 to 128 wide (padded to 32, 64, 128). fp32 sums the same terms in
 * another order: TOL. TF32 and bf16 round q, k, v, the weights and the
 * score gradients to 10 and 7 mantissa bits (relative 5e-4 and 4e-3) and
 * sum in fp32: 5e-3 and 3e-2, well below what a wrong tile or mask gives.
 * The backward pass repeats its bits (no atomics). A precision that leaves
 * every output as fp32's did not run.
 */
struct att_dims {
	int B, T, NH, HS;
};
static const struct att_dims att_sizes[] = {
	{ 4, 64, 4, 32 }, { 3, 17, 5, 8 },  { 2, 1, 5, 8 },      { 1, 150, 2, 32 },
	{ 1, 300, 3, 96 }, { 1, 512, 2, 128 }, { 2, 1024, 12, 64 }, { 1, 2048, 2, 64 },
};
#define NATT ((int)(sizeof att_sizes / sizeof att_sizes[0]))
static const enum ops_precision att_precisions[] = { OPS_FP32, OPS_TF32, OPS_BF16 };
static const double att_tol[] = { TOL, 5e-3, 3e-2 };

/* The device copy of p into its host copy: the reference the next call is measured against. */
static void keep(struct pair *p)
{
	ops_cuda.download(p->h, p->d, p->n * sizeof(float));
}

/* The fused attention (the register-tile kernels where mma) of size z in prec against the unfused fp32. */
static void fused_against_unfused(const struct att_dims *z, enum ops_precision prec, double tol,
				  int mma)
{
	double worst[3];
	int B = z->B, T = z->T, NH = z->NH, HS = z->HS;
	size_t nq = (size_t)B * T * 3 * NH * HS, no = (size_t)B * T * NH * HS;
	struct pair qkv = rnd(nq, 1.0f), out = rnd(no, 1.0f), dout = rnd(no, 1.0f);
	struct pair stats = rnd((size_t)B * NH * T * OPS_ATT_STATS, 1.0f), dqkv = rnd(nq, 1.0f);
	float *start = malloc(nq * sizeof(float)), *again = malloc(nq * sizeof(float));

	use_gpu();
	kernels_cuda_fused_attention_everywhere(1);
	ck_assert_ptr_nonnull(start);
	ck_assert_ptr_nonnull(again);
	memcpy(start, dqkv.h, nq * sizeof(float));
	ops_cuda.attention_forward(out.d, stats.d, qkv.d, B, T, NH, HS);
	ops_cuda.attention_backward(dqkv.d, dout.d, qkv.d, stats.d, B, T, NH, HS);
	keep(&out), keep(&stats), keep(&dqkv);

	ops_cuda.set_precision(prec);
	kernels_cuda_attention_mma(mma);
	ops_cuda.upload(dqkv.d, start, nq * sizeof(float));
	ops_cuda.attention_fused_forward(out.d, stats.d, qkv.d, B, T, NH, HS);
	worst[0] = agree_within(&out, "fused attention out", tol);
	agree_within(&stats, "fused attention rows' max and exp-sum", tol);
	ops_cuda.attention_fused_backward(dqkv.d, dout.d, out.d, qkv.d, stats.d, B, T, NH, HS);
	worst[1] = agree_within(&dqkv, "fused attention dqkv", tol);
	ops_cuda.download(again, dqkv.d, nq * sizeof(float));
	ops_cuda.upload(dqkv.d, start, nq * sizeof(float));
	ops_cuda.attention_fused_backward(dqkv.d, dout.d, out.d, qkv.d, stats.d, B, T, NH, HS);
	same_bits(dqkv.d, again, nq, "fused attention dqkv, run again");
	kernels_cuda_attention_mma(1); /* the default */
	ops_cuda.set_precision(OPS_FP32);
	kernels_cuda_fused_attention_everywhere(0);
	printf("fused attention%s %s B=%d T=%d NH=%d HS=%d: worst difference out %.2g, dqkv %.2g\n",
	       mma ? " (mma)" : "", ops_precision_name(prec), B, T, NH, HS, worst[0], worst[1]);
	if (prec != OPS_FP32)
		ck_assert_msg(worst[0] > 0.0, "%s: the output is fp32's", ops_precision_name(prec));
	free(start), free(again);
	drop(&qkv), drop(&out), drop(&dout), drop(&stats), drop(&dqkv);
}

START_TEST(test_fused_attention)
{
	fused_against_unfused(&att_sizes[_i / 3], att_precisions[_i % 3], att_tol[_i % 3], 0);
}
END_TEST

/*
 * The register-tile bf16 kernels (kernels_cuda_attention_mma) at the same
 * sizes and tolerance; heads wider than 64 show that they hand those to
 * the WMMA kernels.
 */
START_TEST(test_fused_attention_mma)
{
	fused_against_unfused(&att_sizes[_i], OPS_BF16, att_tol[2], 1);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	/* before the suite exists: a skipped test leaks nothing (LeakSanitizer) */
	if (kernels_cuda_device_count() == 0) {
		printf("check_ops_cuda: skipped: no CUDA device visible (%s)\n",
		       kernels_cuda_versions());
		return 77;
	}
	s = suite_create("ops_cuda");
	tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_encoder, 0, NSIZES);
	tcase_add_loop_test(tc, test_encoder_without_positions, 0, NSIZES);
	tcase_add_loop_test(tc, test_layernorm, 0, NSIZES);
	tcase_add_loop_test(tc, test_rmsnorm, 0, NSIZES);
	tcase_add_loop_test(tc, test_rope, 0, NROPE);
	tcase_add_loop_test(tc, test_swiglu, 0, NSIZES);
	tcase_add_loop_test(tc, test_matmul, 0, NSIZES);
	tcase_add_loop_test(tc, test_matmul_bf16, 0, NSIZES);
	tcase_add_loop_test(tc, test_attention, 0, NSIZES);
	tcase_add_loop_test(tc, test_fused_attention, 0, 3 * NATT);
	tcase_add_loop_test(tc, test_fused_attention_mma, 0, NATT);
	tcase_add_loop_test(tc, test_softmax_xent, 0, NSIZES);
	tcase_add_loop_test(tc, test_fused_kernels, 0, NSIZES);
	tcase_add_loop_test(tc, test_vocab_parallel, 0, NSIZES);
	tcase_add_test(tc, test_elementwise);
	tcase_add_test(tc, test_sumsq_is_deterministic_and_right);
	tcase_add_test(tc, test_backward_passes_repeat_their_bits);
	tcase_add_test(tc, test_memory_round_trip_and_out_of_memory);
	tcase_add_test(tc, test_engine_bytes_follow_alloc_and_free);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	/* no fork per test: the device count above initialised CUDA in this
	 * process, and CUDA cannot be used in a child forked after that */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
