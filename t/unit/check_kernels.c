/*
 * t/unit/check_kernels.c - every CPU kernel of kernels/ops.h against a naive
 * double-precision reference written here.
 *
 * Forward passes are compared with the reference directly. Backward passes
 * are compared with central finite differences of the double reference of
 * a scalar loss sum(out * dout), with dout random: the reference gradients
 * are then independent of the kernels' backward formulas.
 *
 * Tolerances: the kernels compute in float (eps 6e-8) over sums of at most
 * a few hundred terms of size ~1, so their error is below 1e-5 absolute;
 * the double finite differences (h = 1e-5) are exact to ~1e-9. We allow
 * 1e-4 absolute plus 1e-4 relative, ten times the float error, still far
 * below any formula mistake (which moves gradients by O(0.1)).
 */
#include "config.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "lib/rng.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL_ABS 1e-4
#define TOL_REL 1e-4
#define FD_H 1e-5

static uint64_t rng = 42;

/* Buffers the current test allocated: free_bufs (a fixture) frees them after it. */
#define MAX_BUFS 256
static void *bufs[MAX_BUFS];
static int nbufs;

static void *track(void *p)
{
	ck_assert_ptr_nonnull(p);
	ck_assert_int_lt(nbufs, MAX_BUFS);
	bufs[nbufs++] = p;
	return p;
}

static void free_bufs(void)
{
	while (nbufs > 0)
		free(bufs[--nbufs]);
}

static float *frand(size_t n, float scale)
{
	float *p = track(malloc(n * sizeof(float)));

	for (size_t i = 0; i < n; i++)
		p[i] = rng_normal(&rng, 0.0f, scale);
	return p;
}

static float *fzero(size_t n)
{
	return track(calloc(n, sizeof(float)));
}

static double *dcopy(const float *f, size_t n)
{
	double *d = track(malloc(n * sizeof(double)));

	for (size_t i = 0; i < n; i++)
		d[i] = f[i];
	return d;
}

static void assert_close(const float *got, const double *want, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		double tol = TOL_ABS + TOL_REL * fabs(want[i]);

		ck_assert_msg(fabs(got[i] - want[i]) <= tol, "%s[%zu]: got %.8g, want %.8g", what, i,
			      (double)got[i], want[i]);
	}
}

/* A reference loss: sum(ref_forward(...) * dout) evaluated in double. */
struct fd {
	double (*loss)(struct fd *);
	void *ctx;
};

/* The central difference of f->loss with respect to x[i]. */
static double fd_at(struct fd *f, double *x, size_t i)
{
	double save = x[i], lp, lm;

	x[i] = save + FD_H;
	lp = f->loss(f);
	x[i] = save - FD_H;
	lm = f->loss(f);
	x[i] = save;
	return (lp - lm) / (2 * FD_H);
}

/* Central differences of f->loss with respect to each of x[0..n). */
static double *fd_grad(struct fd *f, double *x, size_t n)
{
	double *g = track(malloc(n * sizeof(double)));

	for (size_t i = 0; i < n; i++)
		g[i] = fd_at(f, x, i);
	return g;
}

static double dot(const double *a, const double *b, size_t n)
{
	double s = 0.0;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* ------------------------------------------------------------ encoder */

enum { EB = 2, ET = 3, EC = 4, EV = 5 };

struct enc_ctx {
	int inp[EB * ET];
	double *wte, *wpe, *dout, out[EB * ET * EC];
};

static void ref_encoder(struct enc_ctx *c)
{
	for (int n = 0; n < EB * ET; n++)
		for (int k = 0; k < EC; k++)
			c->out[n * EC + k] = c->wte[c->inp[n] * EC + k] + c->wpe[(n % ET) * EC + k];
}

static double enc_loss(struct fd *f)
{
	struct enc_ctx *c = f->ctx;

	ref_encoder(c);
	return dot(c->out, c->dout, EB * ET * EC);
}

START_TEST(test_encoder_matches_reference)
{
	struct enc_ctx c;
	struct fd f = { enc_loss, &c };
	float *wte = frand(EV * EC, 1), *wpe = frand(ET * EC, 1), *dout = frand(EB * ET * EC, 1);
	float *out = fzero(EB * ET * EC), *dwte = fzero(EV * EC), *dwpe = fzero(ET * EC);
	int inp[EB * ET] = { 0, 4, 4, 1, 2, 0 };

	memcpy(c.inp, inp, sizeof inp);
	c.wte = dcopy(wte, EV * EC);
	c.wpe = dcopy(wpe, ET * EC);
	c.dout = dcopy(dout, EB * ET * EC);
	ops_cpu.encoder_forward(out, inp, wte, wpe, EB, ET, EC);
	ref_encoder(&c);
	assert_close(out, c.out, EB * ET * EC, "encoder out");
	ops_cpu.encoder_backward(dwte, dwpe, dout, inp, EB, ET, EC);
	assert_close(dwte, fd_grad(&f, c.wte, EV * EC), EV * EC, "dwte");
	assert_close(dwpe, fd_grad(&f, c.wpe, ET * EC), ET * EC, "dwpe");
}
END_TEST

/* ------------------------------------------------------------ layernorm */

enum { LN_N = 3, LN_C = 8 };

struct ln_ctx {
	double *inp, *w, *b, *dout, out[LN_N * LN_C];
};

static void ref_layernorm(struct ln_ctx *c)
{
	for (int n = 0; n < LN_N; n++) {
		const double *x = c->inp + n * LN_C;
		double m = 0, v = 0;

		for (int k = 0; k < LN_C; k++)
			m += x[k] / LN_C;
		for (int k = 0; k < LN_C; k++)
			v += (x[k] - m) * (x[k] - m) / LN_C;
		for (int k = 0; k < LN_C; k++)
			c->out[n * LN_C + k] = (x[k] - m) / sqrt(v + 1e-5) * c->w[k] + c->b[k];
	}
}

static double ln_loss(struct fd *f)
{
	struct ln_ctx *c = f->ctx;

	ref_layernorm(c);
	return dot(c->out, c->dout, LN_N * LN_C);
}

START_TEST(test_layernorm_matches_reference)
{
	struct ln_ctx c;
	struct fd f = { ln_loss, &c };
	float *inp = frand(LN_N * LN_C, 2), *w = frand(LN_C, 1), *b = frand(LN_C, 1);
	float *dout = frand(LN_N * LN_C, 1), *out = fzero(LN_N * LN_C), mean[LN_N], rstd[LN_N];
	float *dinp = fzero(LN_N * LN_C), *dw = fzero(LN_C), *db = fzero(LN_C);

	c.inp = dcopy(inp, LN_N * LN_C);
	c.w = dcopy(w, LN_C);
	c.b = dcopy(b, LN_C);
	c.dout = dcopy(dout, LN_N * LN_C);
	ops_cpu.layernorm_forward(out, mean, rstd, inp, w, b, LN_N, LN_C);
	ref_layernorm(&c);
	assert_close(out, c.out, LN_N * LN_C, "layernorm out");
	ops_cpu.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, LN_N, LN_C);
	assert_close(dinp, fd_grad(&f, c.inp, LN_N * LN_C), LN_N * LN_C, "ln dinp");
	assert_close(dw, fd_grad(&f, c.w, LN_C), LN_C, "ln dweight");
	assert_close(db, fd_grad(&f, c.b, LN_C), LN_C, "ln dbias");
}
END_TEST

/* ------------------------------------------------------------ matmul */

struct mm_ctx {
	int N, C, OC;
	double *inp, *w, *b, *dout, *out;
};

static void ref_matmul(struct mm_ctx *c)
{
	for (int n = 0; n < c->N; n++)
		for (int o = 0; o < c->OC; o++) {
			double s = c->b[o];

			for (int k = 0; k < c->C; k++)
				s += c->inp[n * c->C + k] * c->w[o * c->C + k];
			c->out[n * c->OC + o] = s;
		}
}

static double mm_loss(struct fd *f)
{
	struct mm_ctx *c = f->ctx;

	ref_matmul(c);
	return dot(c->out, c->dout, (size_t)c->N * c->OC);
}

/* Forward and backward of an (N, C) x (OC, C)^T product on `threads` threads. */
static void check_matmul(int N, int C, int OC, int threads)
{
	struct mm_ctx c = { .N = N, .C = C, .OC = OC };
	struct fd f = { mm_loss, &c };
	float *inp = frand((size_t)N * C, 1), *w = frand((size_t)OC * C, 0.1f), *b = frand(OC, 1);
	float *dout = frand((size_t)N * OC, 1), *out = fzero((size_t)N * OC);
	float *dinp = fzero((size_t)N * C), *dw = fzero((size_t)OC * C), *db = fzero(OC);

	ops_cpu_set_threads(threads);
	c.inp = dcopy(inp, (size_t)N * C);
	c.w = dcopy(w, (size_t)OC * C);
	c.b = dcopy(b, OC);
	c.dout = dcopy(dout, (size_t)N * OC);
	c.out = track(malloc(sizeof(double) * N * OC));
	ops_cpu.matmul_forward(out, inp, w, b, N, C, OC);
	ref_matmul(&c);
	assert_close(out, c.out, (size_t)N * OC, "matmul out");
	ops_cpu.matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
	/* the loss is linear in each input: exact gradients, no differencing needed */
	for (int n = 0; n < N; n++)
		for (int k = 0; k < C; k++) {
			double s = 0;

			for (int o = 0; o < OC; o++)
				s += c.dout[n * OC + o] * c.w[o * C + k];
			ck_assert_msg(fabs(dinp[n * C + k] - s) <= TOL_ABS + TOL_REL * fabs(s),
				      "dinp[%d,%d] %g want %g", n, k, dinp[n * C + k], s);
		}
	for (int o = 0; o < OC; o++) {
		double sb = 0;

		for (int n = 0; n < N; n++)
			sb += c.dout[n * OC + o];
		ck_assert_msg(fabs(db[o] - sb) <= TOL_ABS + TOL_REL * fabs(sb), "dbias[%d]", o);
		for (int k = 0; k < C; k++) {
			double s = 0;

			for (int n = 0; n < N; n++)
				s += c.dout[n * OC + o] * c.inp[n * C + k];
			ck_assert_msg(fabs(dw[o * C + k] - s) <= TOL_ABS + TOL_REL * fabs(s),
				      "dweight[%d,%d] %g want %g", o, k, dw[o * C + k], s);
		}
	}
	/* and the finite differences agree on a few weights (sanity of the harness) */
	for (int i = 0; i < 3; i++) {
		double *g, save = c.w[i];

		g = fd_grad(&f, c.w + i, 1);
		c.w[i] = save;
		ck_assert_msg(fabs(g[0] - dw[i]) <= 1e-3 * (1 + fabs(g[0])), "fd dweight[%d]", i);
	}
	ops_cpu_set_threads(0);
}

START_TEST(test_matmul_matches_reference)
{
	check_matmul(5, 7, 9, 1);
}
END_TEST

START_TEST(test_matmul_split_over_threads_matches_reference)
{
	/* 2*64*128*300 FLOPs: above the threshold where the product is split */
	check_matmul(64, 128, 300, 2);
	check_matmul(64, 128, 300, 3);
}
END_TEST

/* ------------------------------------------------------------ attention */

struct att_ctx {
	int B, T, NH, HS, C;
	double *qkv, *dout, *out, *s; /* s: one row of scores */
};

static struct att_ctx att_ctx(int B, int T, int NH, int HS, const float *qkv, const float *dout)
{
	struct att_ctx c = { B, T, NH, HS, NH * HS, NULL, NULL, NULL, NULL };

	c.qkv = dcopy(qkv, (size_t)B * T * 3 * c.C);
	c.dout = dcopy(dout, (size_t)B * T * c.C);
	c.out = track(malloc(sizeof(double) * B * T * c.C));
	c.s = track(malloc(sizeof(double) * T));
	return c;
}

/* The textbook attention, in double: softmax(q k^T / sqrt(HS)) v over keys u <= t. */
static void ref_attention(struct att_ctx *c)
{
	int C = c->C, HS = c->HS;
	double *s = c->s;

	for (int b = 0; b < c->B; b++)
		for (int h = 0; h < c->NH; h++)
			for (int t = 0; t < c->T; t++) {
				const double *q = c->qkv + ((size_t)b * c->T + t) * 3 * C + h * HS;
				double max = -1e300, sum = 0;

				for (int u = 0; u <= t; u++) {
					const double *k = q + ((size_t)u - t) * 3 * C + C;

					s[u] = 0;
					for (int i = 0; i < HS; i++)
						s[u] += q[i] * k[i] / sqrt(HS);
					max = s[u] > max ? s[u] : max;
				}
				for (int u = 0; u <= t; u++)
					sum += (s[u] = exp(s[u] - max));
				for (int i = 0; i < HS; i++) {
					double o = 0;

					for (int u = 0; u <= t; u++)
						o += s[u] / sum * q[((size_t)u - t) * 3 * C + 2 * C + i];
					c->out[((size_t)b * c->T + t) * C + h * HS + i] = o;
				}
			}
}

static double att_loss(struct fd *f)
{
	struct att_ctx *c = f->ctx;

	ref_attention(c);
	return dot(c->out, c->dout, (size_t)c->B * c->T * c->C);
}

/*
 * Forward against the reference; backward against central differences of
 * the reference at every `stride`-th element of qkv (all of them for 1).
 */
static void check_attention(int B, int T, int NH, int HS, size_t stride)
{
	size_t nq = (size_t)B * T * 3 * NH * HS, no = (size_t)B * T * NH * HS;
	float *qkv = frand(nq, 1), *dout = frand(no, 1), *out = fzero(no), *dqkv = fzero(nq);
	float *stats = fzero((size_t)B * NH * T * OPS_ATT_STATS);
	struct att_ctx c = att_ctx(B, T, NH, HS, qkv, dout);
	struct fd f = { att_loss, &c };

	ops_cpu.attention_forward(out, stats, qkv, B, T, NH, HS);
	ref_attention(&c);
	assert_close(out, c.out, no, "attention out");
	ops_cpu.attention_backward(dqkv, dout, qkv, stats, B, T, NH, HS);
	for (size_t i = 0; i < nq; i += stride) {
		double g = fd_at(&f, c.qkv, i);

		assert_close(dqkv + i, &g, 1, "attention dqkv");
	}
}

START_TEST(test_attention_matches_reference)
{
	check_attention(2, 5, 2, 4, 1);
}
END_TEST

START_TEST(test_attention_blocks_of_rows_match_reference)
{
	/* 150 rows: two full blocks of query rows and a part, every gradient path through them */
	check_attention(1, 150, 2, 8, 37);
}
END_TEST

START_TEST(test_attention_never_looks_ahead)
{
	enum { B = 1, T = 70, NH = 2, HS = 4, C = NH * HS };
	float *qkv = frand(B * T * 3 * C, 1), *out = fzero(B * T * C), *again = fzero(B * T * C);
	float *stats = fzero(B * NH * T * OPS_ATT_STATS);

	ops_cpu.attention_forward(out, stats, qkv, B, T, NH, HS);
	for (int i = 0; i < 3 * C; i++)
		qkv[(T - 1) * 3 * C + i] += 1.0f; /* the last token's q, k and v */
	ops_cpu.attention_forward(again, stats, qkv, B, T, NH, HS);
	ck_assert_msg(!memcmp(out, again, sizeof(float) * (T - 1) * C),
		      "a change to the last token changed the output of an earlier one");
	ck_assert_msg(memcmp(out, again, sizeof(float) * T * C), "the last token's output kept");
	for (int r = 0; r < B * NH * T; r++)
		ck_assert_msg(stats[r * OPS_ATT_STATS + 1] >= 1.0f,
			      "row %d's exp-sum %g: the max term alone is 1", r,
			      (double)stats[r * OPS_ATT_STATS + 1]);
}
END_TEST

/* ------------------------------------------------------------ element-wise */

START_TEST(test_gelu_matches_reference)
{
	enum { n = 64 };
	float *x = frand(n, 2), *out = fzero(n), *dx = fzero(n), *dout = frand(n, 1);

	ops_cpu.gelu_forward(out, x, n);
	ops_cpu.gelu_backward(dx, x, dout, n);
	for (int i = 0; i < n; i++) {
		double xd = x[i], h = FD_H;
		double g = 0.5 * xd * (1 + tanh(sqrt(2 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
		double gp = 0.5 * (xd + h) *
			    (1 + tanh(sqrt(2 / M_PI) * ((xd + h) + 0.044715 * pow(xd + h, 3))));
		double gm = 0.5 * (xd - h) *
			    (1 + tanh(sqrt(2 / M_PI) * ((xd - h) + 0.044715 * pow(xd - h, 3))));
		double want_dx = (gp - gm) / (2 * h) * dout[i];

		ck_assert_msg(fabs(out[i] - g) <= TOL_ABS, "gelu(%g) = %g, want %g", xd, out[i], g);
		ck_assert_msg(fabs(dx[i] - want_dx) <= TOL_ABS + TOL_REL * fabs(want_dx),
			      "gelu'(%g) * dout = %g, want %g", xd, dx[i], want_dx);
	}
}
END_TEST

START_TEST(test_residual_adds_and_passes_gradients)
{
	float a[3] = { 1, 2, 3 }, b[3] = { 10, 20, 30 }, out[3], dout[3] = { 1, -1, 0.5f };
	float da[3] = { 1, 1, 1 }, db[3] = { 0 };

	ops_cpu.residual_forward(out, a, b, 3);
	ops_cpu.residual_backward(da, db, dout, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_float_eq(out[i], a[i] + b[i]);
		ck_assert_float_eq(da[i], 1 + dout[i]); /* accumulates */
		ck_assert_float_eq(db[i], dout[i]);
	}
}
END_TEST

/* ------------------------------------------------------------ softmax + cross-entropy */

enum { XN = 3, XV = 7, XVP = 10 };

struct xent_ctx {
	double *logits;
	int targets[XN];
};

/* Mean cross-entropy over the first XV logits of each row. */
static double xent_loss(struct fd *f)
{
	struct xent_ctx *c = f->ctx;
	double total = 0;

	for (int n = 0; n < XN; n++) {
		const double *row = c->logits + n * XVP;
		double max = -1e300, sum = 0;

		for (int v = 0; v < XV; v++)
			max = row[v] > max ? row[v] : max;
		for (int v = 0; v < XV; v++)
			sum += exp(row[v] - max);
		total += -(row[c->targets[n]] - max - log(sum));
	}
	return total / XN;
}

START_TEST(test_softmax_xent_excludes_padding)
{
	struct xent_ctx c = { .targets = { 0, 6, 3 } };
	struct fd f = { xent_loss, &c };
	float *logits = frand(XN * XVP, 2), losses[XN];
	double *fd, mean = 0;

	/* huge padding logits must not matter */
	for (int n = 0; n < XN; n++)
		for (int v = XV; v < XVP; v++)
			logits[n * XVP + v] = 50.0f;
	c.logits = dcopy(logits, XN * XVP);
	ops_cpu.softmax_xent_forward(losses, logits, c.targets, XN, XV, XVP);
	for (int n = 0; n < XN; n++) {
		double s = 0;

		for (int v = XV; v < XVP; v++)
			ck_assert_msg(logits[n * XVP + v] == 0.0f, "padding probability not 0");
		for (int v = 0; v < XV; v++)
			s += logits[n * XVP + v];
		ck_assert_msg(fabs(s - 1) < 1e-5, "row %d probabilities sum to %g", n, s);
		mean += losses[n] / XN;
	}
	ck_assert_msg(fabs(mean - xent_loss(&f)) < TOL_ABS, "loss %g want %g", mean,
		      xent_loss(&f));
	ops_cpu.softmax_xent_backward(logits, c.targets, 1.0f / XN, XN, XV, XVP);
	fd = fd_grad(&f, c.logits, XN * XVP);
	assert_close(logits, fd, XN * XVP, "dlogits"); /* padding: fd is exactly 0 */
}
END_TEST

/*
 * The fused classifier gives the bits of softmax_xent_forward followed by
 * softmax_xent_backward: the losses and the logits' gradient (padding 0),
 * over a vocabulary long enough for every SIMD width and several threads.
 */
START_TEST(test_fused_classifier_equals_forward_then_backward)
{
	enum { N = 37, V = 1000, VP = 1024 };
	float *a = frand((size_t)N * VP, 3.0f), *b = track(malloc((size_t)N * VP * sizeof(float)));
	float la[N], lb[N];
	int targets[N];

	for (int n = 0; n < N; n++)
		targets[n] = (n * 131) % V;
	memcpy(b, a, (size_t)N * VP * sizeof(float));
	ops_cpu.softmax_xent_forward(la, a, targets, N, V, VP);
	ops_cpu.softmax_xent_backward(a, targets, 0.25f / N, N, V, VP);
	ops_cpu.softmax_xent_fused(lb, b, targets, 0.25f / N, N, V, VP);
	ck_assert(!memcmp(la, lb, sizeof la));
	ck_assert(!memcmp(a, b, (size_t)N * VP * sizeof(float)));
}
END_TEST

/*
 * Tensor parallelism over the vocabulary: the slices' entries, with the
 * all-reduces done here in rank order, give the whole-vocabulary kernels'
 * results. The embedding bit for bit (one slice holds each row, the
 * others add 0); the softmax within rounding (the slices sum their
 * exponentials in double, the whole kernel in float lanes). The last of
 * the 4 slices ends in padding (V = 1000 of VP = 1024).
 */
START_TEST(test_vocab_slices_give_the_whole_vocabulary)
{
	enum { B = 3, T = 5, C = 24, WV = 50, WVP = 64, TP = 4, N = 37, V = 1000, VP = 1024 };
	enum { WN = B * T, WVN = WVP / TP, VN = VP / TP };
	float *wte = frand(WVP * C, 1.0f), *wpe = frand(T * C, 1.0f), *dout = frand(WN * C, 1.0f);
	float *whole = fzero(WN * C), *part = fzero(WN * C), *sum = fzero(WN * C);
	float *dwte = frand(WVP * C, 1.0f), *dwpe = frand(T * C, 1.0f);
	float *dwte_s = track(malloc(sizeof(float) * WVP * C)), *dwpe_s = track(malloc(sizeof(float) * T * C));
	float *logits = frand((size_t)N * VP, 3.0f), *slice = fzero((size_t)TP * N * VN);
	float mx[N], mk[N], sums[N], sk[N], losses[N], lk[N], lsum[N];
	int tok[WN], targets[N];

	for (int n = 0; n < WN; n++)
		tok[n] = n % 3 ? (n * 17) % WV : 5; /* token 5 repeats */
	ops_cpu.encoder_forward(whole, tok, wte, wpe, B, T, C);
	for (int k = 0; k < TP; k++) {
		ops_cpu.vocab_encoder_forward(part, tok, wte + (size_t)k * WVN * C, WN, C, k * WVN, WVN);
		for (int i = 0; i < WN * C; i++)
			sum[i] = k ? sum[i] + part[i] : part[i];
	}
	for (int b = 0; b < B; b++)
		ops_cpu.residual_forward(sum + b * T * C, sum + b * T * C, wpe, (size_t)T * C);
	ck_assert(!memcmp(whole, sum, sizeof(float) * WN * C));
	memcpy(dwte_s, dwte, sizeof(float) * WVP * C);
	memcpy(dwpe_s, dwpe, sizeof(float) * T * C);
	ops_cpu.encoder_backward(dwte, dwpe, dout, tok, B, T, C);
	for (int k = 0; k < TP; k++)
		ops_cpu.vocab_encoder_backward(dwte_s + (size_t)k * WVN * C, k ? NULL : dwpe_s, dout, tok,
					       B, T, C, k * WVN, WVN);
	ck_assert(!memcmp(dwte, dwte_s, sizeof(float) * WVP * C));
	ck_assert(!memcmp(dwpe, dwpe_s, sizeof(float) * T * C));

	for (int n = 0; n < N; n++)
		targets[n] = (n * 131) % V;
	for (int k = 0; k < TP; k++)
		for (int n = 0; n < N; n++)
			memcpy(slice + ((size_t)k * N + n) * VN, logits + (size_t)n * VP + k * VN,
			       sizeof(float) * VN);
	ops_cpu.softmax_xent_forward(losses, logits, targets, N, V, VP);
	for (int k = 0; k < TP; k++) { /* the MAX all-reduce */
		int nv = V - k * VN < VN ? V - k * VN : VN;

		ops_cpu.vocab_softmax_max(mk, slice + (size_t)k * N * VN, N, nv, VN);
		for (int n = 0; n < N; n++)
			mx[n] = k && mx[n] > mk[n] ? mx[n] : mk[n];
	}
	for (int k = 0; k < TP; k++) { /* the SUM all-reduce */
		int nv = V - k * VN < VN ? V - k * VN : VN;

		ops_cpu.vocab_softmax_exp(slice + (size_t)k * N * VN, sk, mx, N, nv, VN);
		for (int n = 0; n < N; n++)
			sums[n] = k ? sums[n] + sk[n] : sk[n];
	}
	for (int k = 0; k < TP; k++) {
		int nv = V - k * VN < VN ? V - k * VN : VN;

		ops_cpu.vocab_softmax_finish(lk, slice + (size_t)k * N * VN, sums, targets, N, nv, VN,
					     k * VN);
		for (int n = 0; n < N; n++)
			lsum[n] = k ? lsum[n] + lk[n] : lk[n];
		ops_cpu.vocab_xent_backward(slice + (size_t)k * N * VN, targets, 0.25f / N, N, nv, VN,
					    k * VN);
	}
	ops_cpu.softmax_xent_backward(logits, targets, 0.25f / N, N, V, VP);
	for (int n = 0; n < N; n++) {
		ck_assert_msg(fabsf(lsum[n] - losses[n]) <= 1e-5f * (1 + fabsf(losses[n])),
			      "row %d: loss %.8g over the slices, %.8g whole", n, lsum[n], losses[n]);
		for (int v = 0; v < VP; v++) {
			float got = slice[((size_t)(v / VN) * N + n) * VN + v % VN];
			float want = logits[(size_t)n * VP + v];

			ck_assert_msg(fabsf(got - want) <= 1e-7f + 1e-5f * fabsf(want),
				      "row %d column %d: dlogit %.8g over the slices, %.8g whole", n, v,
				      got, want);
			if (v >= V)
				ck_assert(got == 0.0f);
		}
	}
}
END_TEST

/*
 * residual + LayerNorm fused gives the bits of residual_forward then
 * layernorm_forward, also when the sum overwrites one of its inputs (the
 * model writes res2 over the projection's output).
 */
START_TEST(test_fused_residual_layernorm_equals_the_two_kernels)
{
	enum { N = 45, C = 200 };
	float *x = frand(N * C, 1.0f), *y = frand(N * C, 1.0f), *w = frand(C, 1.0f);
	float *bias = frand(C, 1.0f), *res = fzero(N * C), *out = fzero(N * C);
	float *res2 = fzero(N * C), *out2 = fzero(N * C), *y2 = track(malloc(N * C * sizeof(float)));
	float mean[N], rstd[N], mean2[N], rstd2[N];

	ops_cpu.residual_forward(res, x, y, (size_t)N * C);
	ops_cpu.layernorm_forward(out, mean, rstd, res, w, bias, N, C);
	ops_cpu.residual_layernorm_forward(res2, out2, mean2, rstd2, x, y, w, bias, N, C);
	ck_assert(!memcmp(res, res2, N * C * sizeof(float)));
	ck_assert(!memcmp(out, out2, N * C * sizeof(float)));
	ck_assert(!memcmp(mean, mean2, sizeof mean) && !memcmp(rstd, rstd2, sizeof rstd));
	memcpy(y2, y, N * C * sizeof(float));
	memset(out2, 0, N * C * sizeof(float));
	ops_cpu.residual_layernorm_forward(y2, out2, mean2, rstd2, x, y2, w, bias, N, C);
	ck_assert(!memcmp(res, y2, N * C * sizeof(float)));
	ck_assert(!memcmp(out, out2, N * C * sizeof(float)));
}
END_TEST

/*
 * ops_cpu.adamw against AdamW written here in double precision (the
 * conventions of kernels/ops.h and daemon/engine/model/optimizer.h): m and v move
 * towards g and g^2, the bias corrections 1 - beta^t divide them, eps is
 * added to the square root, and the decoupled decay takes lr * wd of the
 * parameter as it was before the update. Step t = 3 from moments already
 * under way, gradients from 1 down to 1e-8 (where sqrt(vhat) is as small as
 * eps, so eps's place shows), over enough elements for several threads.
 *
 * Tolerance: the kernel rounds about eight times in float (2^-24 each)
 * along p - lr (mhat / (sqrt(vhat) + eps) + wd p); 8 * 2^-24 relative to
 * the sizes of its terms. Moments: two roundings of their two terms.
 */
START_TEST(test_adamw_matches_a_double_reference)
{
	enum { N = 10007, STEP = 3 };
	const float lr = 0.05f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
	const double bc1 = 1.0 - pow(b1, STEP), bc2 = 1.0 - pow(b2, STEP), u = 0x1p-24;
	float *p = fzero(N), *g = fzero(N), *m = fzero(N), *v = fzero(N);
	double *p0 = track(malloc(N * sizeof(double) * 4)), *g0 = p0 + N, *m0 = g0 + N,
	       *v0 = m0 + N;

	for (int i = 0; i < N; i++) {
		float scale = powf(10.0f, -(float)rng_below(&rng, 9));

		p[i] = rng_normal(&rng, 0.0f, 1.0f);
		g[i] = rng_normal(&rng, 0.0f, scale);
		m[i] = rng_normal(&rng, 0.0f, 0.5f * scale);
		v[i] = scale * scale * (0.5f + rng_f32(&rng));
		p0[i] = p[i], g0[i] = g[i], m0[i] = m[i], v0[i] = v[i];
	}
	ops_cpu.adamw(p, g, m, v, N, lr, b1, b2, eps, wd, (float)bc1, (float)bc2);
	for (int i = 0; i < N; i++) {
		double mt = (double)b1 * m0[i] + (1.0 - b1) * g0[i];
		double vt = (double)b2 * v0[i] + (1.0 - b2) * g0[i] * g0[i];
		double dir = (mt / bc1) / (sqrt(vt / bc2) + (double)eps);
		double want = p0[i] - (double)lr * (dir + (double)wd * p0[i]);
		double tol = 8 * u * (fabs(p0[i]) + lr * (fabs(dir) + wd * fabs(p0[i])));

		ck_assert_msg(fabs(m[i] - mt) <= 2 * u * (b1 * fabs(m0[i]) + (1 - b1) * fabs(g0[i])),
			      "m[%d] = %.9g, want %.9g", i, (double)m[i], mt);
		ck_assert_msg(fabs(v[i] - vt) <= 3 * u * (b2 * v0[i] + (1 - b2) * g0[i] * g0[i]),
			      "v[%d] = %.9g, want %.9g", i, (double)v[i], vt);
		ck_assert_msg(fabs(p[i] - want) <= tol, "p[%d] = %.9g, want %.9g (g %.3g): off by %.3g, "
			      "tolerance %.3g", i, (double)p[i], want, g0[i], fabs(p[i] - want), tol);
	}
}
END_TEST

/* ------------------------------------------------------------ math.h */

/*
 * math_exp: range reduction exact to ~1e-12, a degree-7 polynomial exact to
 * 1e-8, then about eight float roundings of 6e-8 relative that partly
 * cancel: the bound 2.4e-7 (2^-22) is two float ulps, far below what a
 * wrong coefficient or a wrong power of two would give (>= 1e-3).
 */
START_TEST(test_math_exp_is_within_two_ulps)
{
	double worst = 0.0;

	for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
		double want = exp((double)x), err = fabs(math_exp(x) - want) / want;

		worst = err > worst ? err : worst;
	}
	ck_assert_msg(worst <= 2.4e-7, "math_exp: worst relative error %g", worst);
	/* clamped, never 0, denormal or infinite */
	ck_assert(math_exp(-200.0f) > 0.0f && math_exp(-200.0f) < 2e-38f);
	ck_assert(isfinite(math_exp(200.0f)) && math_exp(200.0f) > 1e38f);
}
END_TEST

/* math_tanh = 1 - 2/(e+1): absolute error of 1 - (a value within 2 ulps of 1) <= 3e-7. */
START_TEST(test_math_tanh_is_within_3e7_absolute)
{
	double worst = 0.0;

	for (float x = -12.0f; x <= 12.0f; x += 0.00137f) {
		double err = fabs(math_tanh(x) - tanh((double)x));

		worst = err > worst ? err : worst;
	}
	ck_assert_msg(worst <= 3e-7, "math_tanh: worst absolute error %g", worst);
	ck_assert(math_tanh(50.0f) == 1.0f && math_tanh(-50.0f) == -1.0f);
	ck_assert(math_tanh(0.0f) == 0.0f);
}
END_TEST

/* ------------------------------------------------------------ zero, scale, sumsq */

/* The bits of a float, and the float of some bits. */
static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof u);
	return u;
}

static float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof f);
	return f;
}

/*
 * bf16 rounding, to nearest with ties to even, on the cases that tell it
 * from truncation or from ties away from zero: 1 + 2^-8 is halfway between
 * 1 and 1 + 2^-7 (even: down), 1 + 3 * 2^-8 halfway between 1 + 2^-7 and
 * 1 + 2^-6 (even: up); a carry out of the mantissa bumps the exponent;
 * the largest float rounds to infinity; NaN stays NaN.
 */
START_TEST(test_bf16_rounds_to_nearest_even)
{
	static const struct {
		uint32_t in;
		uint16_t out;
	} cases[] = {
		{ 0x3f800000u, 0x3f80 }, /* 1 */
		{ 0x3f808000u, 0x3f80 }, /* 1 + 2^-8: a tie, to even (down) */
		{ 0x3f808001u, 0x3f81 }, /* just above the tie: up */
		{ 0x3f818000u, 0x3f82 }, /* 1 + 3 * 2^-8: a tie, to even (up) */
		{ 0x3f817fffu, 0x3f81 }, /* just below: down */
		{ 0xbf808001u, 0xbf81 }, /* the sign does not change the magnitude's rounding */
		{ 0x3fffffffu, 0x4000 }, /* carry into the exponent: 2 */
		{ 0x7f7fffffu, 0x7f80 }, /* the largest float: infinity */
		{ 0x7f800000u, 0x7f80 }, /* infinity */
		{ 0x00000001u, 0x0000 }, /* the smallest denormal: 0 */
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint16_t got = math_bf16_bits(float_of(cases[i].in));

		ck_assert_msg(got == cases[i].out, "bf16 of 0x%08x: 0x%04x, want 0x%04x", cases[i].in,
			      got, cases[i].out);
		ck_assert_uint_eq(bits_of(math_bf16_round(float_of(cases[i].in))),
				  (uint32_t)cases[i].out << 16);
	}
	ck_assert(isnan(math_bf16_round(NAN)));
	ck_assert(isnan(math_bf16_round(float_of(0x7f800001u)))); /* a NaN that would carry to inf */
	/* every value within half a bf16 ulp (2^-8 relative) of its bf16 */
	for (int i = 0; i < 10000; i++) {
		float x = rng_normal(&rng, 0.0f, 100.0f);

		ck_assert(fabsf(math_bf16_round(x) - x) <= ldexpf(fabsf(x), -8));
	}
}
END_TEST

/* round_bf16 (bf16 activations) is math_bf16_round in place, on every element of an odd length, special values too. */
START_TEST(test_round_bf16_rounds_in_place)
{
	enum { N = 100003 };
	float *p = frand(N, 100.0f), *want = malloc(N * sizeof(float));

	ck_assert_ptr_nonnull(want);
	p[0] = float_of(0x3f808000u); /* a tie */
	p[1] = NAN;
	p[2] = float_of(0x7f7fffffu);
	p[N - 1] = float_of(0x3f818000u);
	for (size_t i = 0; i < N; i++)
		want[i] = math_bf16_round(p[i]);
	ops_cpu.round_bf16(p, N);
	ck_assert(isnan(p[1]));
	p[1] = want[1] = 0.0f;
	ck_assert(!memcmp(p, want, N * sizeof(float)));
	ck_assert_uint_eq(bits_of(p[0]), 0x3f800000u);
	ck_assert_uint_eq(bits_of(p[N - 1]), 0x3f820000u);
	free(want);
}
END_TEST

/*
 * The CPU's bf16 products are sgemm on bf16-rounded operands, exactly:
 * under OPS_BF16, matmul_forward and matmul_backward give the bits of the
 * fp32 kernels run on math_bf16_round'ed copies, except dbias, which sums
 * the unrounded dout. They differ from fp32 (the setting is honoured), by
 * bf16's relative precision.
 */
START_TEST(test_bf16_matmul_is_sgemm_of_rounded_operands)
{
	enum { N = 24, C = 40, OC = 56 };
	float *inp = frand(N * C, 1.0f), *w = frand(OC * C, 0.5f), *bias = frand(OC, 0.1f);
	float *dout = frand(N * OC, 1.0f);
	float *ri = fzero(N * C), *rw = fzero(OC * C), *rd = fzero(N * OC);
	float *out16 = fzero(N * OC), *out32 = fzero(N * OC), *ref = fzero(N * OC);
	float *di16 = fzero(N * C), *dw16 = fzero(OC * C), *db16 = fzero(OC);
	float *di_ref = fzero(N * C), *dw_ref = fzero(OC * C);
	float *db32 = fzero(OC), *di32 = fzero(N * C), *dw32 = fzero(OC * C);
	double worst = 0.0;

	for (int i = 0; i < N * C; i++)
		ri[i] = math_bf16_round(inp[i]);
	for (int i = 0; i < OC * C; i++)
		rw[i] = math_bf16_round(w[i]);
	for (int i = 0; i < N * OC; i++)
		rd[i] = math_bf16_round(dout[i]);
	ops_cpu.matmul_forward(ref, ri, rw, bias, N, C, OC);
	ops_cpu.matmul_backward(di_ref, dw_ref, NULL, rd, ri, rw, N, C, OC);
	ops_cpu.matmul_forward(out32, inp, w, bias, N, C, OC);
	ops_cpu.matmul_backward(di32, dw32, db32, dout, inp, w, N, C, OC);
	ops_cpu.set_precision(OPS_BF16);
	ops_cpu.matmul_forward(out16, inp, w, bias, N, C, OC);
	ops_cpu.matmul_backward(di16, dw16, db16, dout, inp, w, N, C, OC);
	ops_cpu.set_precision(OPS_FP32);
	ck_assert(!memcmp(out16, ref, N * OC * sizeof(float)));
	ck_assert(!memcmp(di16, di_ref, N * C * sizeof(float)));
	ck_assert(!memcmp(dw16, dw_ref, OC * C * sizeof(float)));
	ck_assert(!memcmp(db16, db32, OC * sizeof(float)));
	for (int i = 0; i < N * OC; i++) {
		double d = fabs((double)out16[i] - out32[i]) / (fabs(out32[i]) + 1.0);

		worst = d > worst ? d : worst;
	}
	ck_assert_msg(worst > 1e-5 && worst < 3e-2, "bf16 against fp32: %g", worst);
	/* and back to fp32: the fp32 bits again */
	memset(out16, 0, N * OC * sizeof(float));
	ops_cpu.matmul_forward(out16, inp, w, bias, N, C, OC);
	ck_assert(!memcmp(out16, out32, N * OC * sizeof(float)));
}
END_TEST

START_TEST(test_zero_scale_sumsq_match_reference)
{
	/* more than one 65536-element chunk of sumsq, and a ragged end */
	size_t n = 3 * 65536 + 1234;
	float *x = frand(n, 1);
	double want = 0.0;

	for (size_t i = 0; i < n; i++)
		want += (double)x[i] * x[i];
	ck_assert_msg(fabs(ops_cpu.sumsq(x, n) - want) <= 1e-9 * want, "sumsq %.17g, want %.17g",
		      ops_cpu.sumsq(x, n), want);
	ops_cpu.scale(x, n, 0.5f);
	ck_assert_msg(fabs(ops_cpu.sumsq(x, n) - want / 4) <= 1e-9 * want, "scaled sumsq");
	ops_cpu.zero(x, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(x[i] == 0.0f, "x[%zu] = %g after zero", i, (double)x[i]);
}
END_TEST

/* ------------------------------------------------------------ thread counts */

/*
 * Every kernel gives the same bits for any thread count: work is cut into
 * blocks that depend on the sizes only (sgemm column blocks included), each
 * computed by one thread; sums over rows are cut by channel, long sums use
 * fixed partial sums. Sizes are above the threshold where work is split.
 */
enum { TB = 4, TT = 64, TC = 768, TN = TB * TT, TV = 1000, TVP = 1024 };

struct thr_out {
	float *enc, *dwte, *dwpe, *ln, *mean, *rstd, *dln, *dlnw, *dlnb, *gelu, *dgelu, *probs,
		*losses, *p, *mm, *dmm, *dmmw, *dmmb;
	double sumsq;
};

static void thr_run(int threads, struct thr_out *o)
{
	uint64_t st = 7;
	size_t big = (size_t)TN * 4 * TC;
	int tok[TN];
	float *wte = malloc((size_t)TVP * TC * sizeof(float)), *wpe = malloc((size_t)TT * TC * 4);
	float *x = malloc(big * 4), *d = malloc(big * 4), *w = malloc(TC * 4), *b = malloc(TC * 4);
	float *g = malloc(big * 4), *m = calloc(big, 4), *v = calloc(big, 4);
	float *mmw = malloc((size_t)TC * TC * 4);

	for (size_t i = 0; i < (size_t)TVP * TC; i++)
		wte[i] = rng_normal(&st, 0, 1);
	for (size_t i = 0; i < (size_t)TT * TC; i++)
		wpe[i] = rng_normal(&st, 0, 1);
	for (size_t i = 0; i < big; i++) {
		x[i] = rng_normal(&st, 0, 2);
		d[i] = rng_normal(&st, 0, 1);
		g[i] = rng_normal(&st, 0, 1);
	}
	for (int i = 0; i < TC; i++) {
		w[i] = rng_normal(&st, 1, 0.1f);
		b[i] = rng_normal(&st, 0, 0.1f);
	}
	for (size_t i = 0; i < (size_t)TC * TC; i++)
		mmw[i] = rng_normal(&st, 0, 0.05f);
	for (int i = 0; i < TN; i++)
		tok[i] = (int)rng_below(&st, 16); /* repeated tokens share rows of dwte */

	ops_cpu_set_threads(threads);
	*o = (struct thr_out){
		.enc = malloc((size_t)TN * TC * 4), .dwte = calloc((size_t)TVP * TC, 4),
		.dwpe = calloc((size_t)TT * TC, 4), .ln = malloc((size_t)TN * TC * 4),
		.mean = malloc(TN * 4), .rstd = malloc(TN * 4), .dln = calloc((size_t)TN * TC, 4),
		.dlnw = calloc(TC, 4), .dlnb = calloc(TC, 4), .gelu = malloc(big * 4),
		.dgelu = calloc(big, 4), .probs = malloc((size_t)TN * TVP * 4),
		.losses = malloc(TN * 4), .p = malloc(big * 4), .mm = malloc((size_t)TN * TC * 4),
		.dmm = calloc((size_t)TN * TC, 4), .dmmw = calloc((size_t)TC * TC, 4),
		.dmmb = calloc(TC, 4),
	};
	ops_cpu.encoder_forward(o->enc, tok, wte, wpe, TB, TT, TC);
	ops_cpu.encoder_backward(o->dwte, o->dwpe, d, tok, TB, TT, TC);
	ops_cpu.layernorm_forward(o->ln, o->mean, o->rstd, x, w, b, TN, TC);
	ops_cpu.layernorm_backward(o->dln, o->dlnw, o->dlnb, d, x, w, o->mean, o->rstd, TN, TC);
	ops_cpu.gelu_forward(o->gelu, x, big);
	ops_cpu.gelu_backward(o->dgelu, x, d, big);
	memcpy(o->probs, x, (size_t)TN * TVP * 4);
	ops_cpu.softmax_xent_forward(o->losses, o->probs, tok, TN, TV, TVP);
	ops_cpu.softmax_xent_backward(o->probs, tok, 1.0f / TN, TN, TV, TVP);
	memcpy(o->p, x, big * 4);
	ops_cpu.adamw(o->p, g, m, v, big, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
	o->sumsq = ops_cpu.sumsq(g, big);
	/* a product with bias, forward and backward */
	ops_cpu.matmul_forward(o->mm, x, mmw, b, TN, TC, TC);
	ops_cpu.matmul_backward(o->dmm, o->dmmw, o->dmmb, d, x, mmw, TN, TC, TC);
	free(wte), free(wpe), free(x), free(d), free(w), free(b), free(g), free(m), free(v);
	free(mmw);
}

static void thr_free(struct thr_out *o)
{
	float **f[] = { &o->enc, &o->dwte, &o->dwpe, &o->ln, &o->mean, &o->rstd, &o->dln,
			&o->dlnw, &o->dlnb, &o->gelu, &o->dgelu, &o->probs, &o->losses, &o->p,
			&o->mm, &o->dmm, &o->dmmw, &o->dmmb };

	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		free(*f[i]);
}

#define SAME_BITS(a, b, field, n)                                                          \
	ck_assert_msg(!memcmp((a)->field, (b)->field, (size_t)(n) * sizeof(float)),          \
		      #field " differs between thread counts")

START_TEST(test_kernels_give_the_same_bits_for_any_thread_count)
{
	struct thr_out one, two, three;

	thr_run(1, &one);
	thr_run(2, &two);
	thr_run(3, &three);
	for (struct thr_out *o = &two; o; o = o == &two ? &three : NULL) {
		SAME_BITS(&one, o, enc, TN * TC);
		SAME_BITS(&one, o, dwte, TVP * TC);
		SAME_BITS(&one, o, dwpe, TT * TC);
		SAME_BITS(&one, o, ln, TN * TC);
		SAME_BITS(&one, o, mean, TN);
		SAME_BITS(&one, o, rstd, TN);
		SAME_BITS(&one, o, dln, TN * TC);
		SAME_BITS(&one, o, dlnw, TC);
		SAME_BITS(&one, o, dlnb, TC);
		SAME_BITS(&one, o, gelu, TN * 4 * TC);
		SAME_BITS(&one, o, dgelu, TN * 4 * TC);
		SAME_BITS(&one, o, losses, TN);
		SAME_BITS(&one, o, probs, TN * TVP);
		SAME_BITS(&one, o, p, TN * 4 * TC);
		SAME_BITS(&one, o, mm, TN * TC);
		SAME_BITS(&one, o, dmm, TN * TC);
		SAME_BITS(&one, o, dmmw, TC * TC);
		SAME_BITS(&one, o, dmmb, TC);
		ck_assert_msg(one.sumsq == o->sumsq, "sumsq differs between thread counts");
	}
	thr_free(&one);
	thr_free(&two);
	thr_free(&three);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *kernels_suite(void)
{
	Suite *s = suite_create("kernels");
	TCase *tc = tcase_create("cpu");

	tcase_add_test(tc, test_encoder_matches_reference);
	tcase_add_test(tc, test_layernorm_matches_reference);
	tcase_add_test(tc, test_matmul_matches_reference);
	tcase_add_test(tc, test_matmul_split_over_threads_matches_reference);
	tcase_add_test(tc, test_attention_matches_reference);
	tcase_add_test(tc, test_attention_blocks_of_rows_match_reference);
	tcase_add_test(tc, test_attention_never_looks_ahead);
	tcase_add_test(tc, test_gelu_matches_reference);
	tcase_add_test(tc, test_residual_adds_and_passes_gradients);
	tcase_add_test(tc, test_softmax_xent_excludes_padding);
	tcase_add_test(tc, test_adamw_matches_a_double_reference);
	tcase_add_test(tc, test_math_exp_is_within_two_ulps);
	tcase_add_test(tc, test_math_tanh_is_within_3e7_absolute);
	tcase_add_test(tc, test_fused_classifier_equals_forward_then_backward);
	tcase_add_test(tc, test_fused_residual_layernorm_equals_the_two_kernels);
	tcase_add_test(tc, test_vocab_slices_give_the_whole_vocabulary);
	tcase_add_test(tc, test_bf16_rounds_to_nearest_even);
	tcase_add_test(tc, test_round_bf16_rounds_in_place);
	tcase_add_test(tc, test_bf16_matmul_is_sgemm_of_rounded_operands);
	tcase_add_test(tc, test_zero_scale_sumsq_match_reference);
	tcase_add_test(tc, test_kernels_give_the_same_bits_for_any_thread_count);
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, NULL, free_bufs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kernels_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
