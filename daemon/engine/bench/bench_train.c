/*
 * daemon/engine/bench/bench_train.c - time training steps of a GPT-2 model and say how
 * close they come to the machine's fp32 peak.
 *
 * The matrix products are timed on their own: the benchmark runs the model
 * on a copy of the CPU backend whose matmul entries wrap the real ones with
 * a clock and a FLOP count (2 N C OC forward, 4 N C OC backward), so it can
 * report the BLAS share and throughput without touching the model code.
 */
#include "config.h"
#include "daemon/engine/bench/bench_train.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "daemon/engine/model/optimizer.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "kernels/device.h"
#include "lib/rng.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Time and FLOPs of each kernel during the timed steps (one benchmark at a
 * time): every entry of the backend is wrapped by a function that adds its
 * wall time to its slot. Matrix products also count FLOPs (2 N C OC
 * forward, 4 N C OC backward, 2 N C OC without dinp).
 */
enum bench_kernel {
	K_ENCODER, K_LAYERNORM, K_MATMUL, K_ATTENTION, K_GELU, K_RESIDUAL, K_XENT, K_ADAMW,
	K_OTHER, K_RMSNORM, K_ROPE, K_SWIGLU, K_NUM
};
static const char *const kernel_names[K_NUM] = {
	"encoder", "layernorm", "matmul", "attention", "gelu", "residual", "softmax+xent", "adamw",
	"zero", "rmsnorm", "rope", "swiglu",
};
static double k_seconds[K_NUM], mm_flops;
/* The backend the wrappers time; a GPU's kernels are waited for in each (base->sync). */
static const struct ops *base = &ops_cpu;

#define TIMED(kind, call)                        \
	do {                                     \
		double t0_ = clock_monotonic();              \
		call;                            \
		base->sync();                    \
		k_seconds[kind] += clock_monotonic() - t0_;  \
	} while (0)

static void t_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
			      int B, int T, int C)
{
	TIMED(K_ENCODER, base->encoder_forward(out, inp, wte, wpe, B, T, C));
}

static void t_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
			       int B, int T, int C)
{
	TIMED(K_ENCODER, base->encoder_backward(dwte, dwpe, dout, inp, B, T, C));
}

static void t_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
				const float *weight, const float *bias, int N, int C)
{
	TIMED(K_LAYERNORM, base->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C));
}

static void t_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
				 const float *inp, const float *weight, const float *mean,
				 const float *rstd, int N, int C)
{
	TIMED(K_LAYERNORM, base->layernorm_backward(dinp, dweight, dbias, dout, inp, weight,
						      mean, rstd, N, C));
}

static void t_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			     int N, int C, int OC)
{
	TIMED(K_MATMUL, base->matmul_forward(out, inp, weight, bias, N, C, OC));
	mm_flops += 2.0 * N * C * OC;
}

static void t_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			      const float *inp, const float *weight, int N, int C, int OC)
{
	TIMED(K_MATMUL,
	      base->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC));
	mm_flops += (dinp ? 4.0 : 2.0) * N * C * OC;
}

static void t_attention_forward(float *out, float *stats, const float *qkv, int B, int T, int NH,
				int HS)
{
	TIMED(K_ATTENTION, base->attention_forward(out, stats, qkv, B, T, NH, HS));
}

static void t_attention_backward(float *dqkv, const float *dout, const float *qkv,
				 const float *stats, int B, int T, int NH, int HS)
{
	TIMED(K_ATTENTION, base->attention_backward(dqkv, dout, qkv, stats, B, T, NH, HS));
}

static void t_attention_fused_forward(float *out, float *stats, const float *qkv, int B, int T,
				      int NH, int HS)
{
	TIMED(K_ATTENTION, base->attention_fused_forward(out, stats, qkv, B, T, NH, HS));
}

static void t_attention_fused_backward(float *dqkv, const float *dout, const float *out,
				       const float *qkv, const float *stats, int B, int T, int NH,
				       int HS)
{
	TIMED(K_ATTENTION,
	      base->attention_fused_backward(dqkv, dout, out, qkv, stats, B, T, NH, HS));
}

static void t_gelu_forward(float *out, const float *inp, size_t n)
{
	TIMED(K_GELU, base->gelu_forward(out, inp, n));
}

static void t_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	TIMED(K_GELU, base->gelu_backward(dinp, inp, dout, n));
}

static void t_residual_forward(float *out, const float *a, const float *b, size_t n)
{
	TIMED(K_RESIDUAL, base->residual_forward(out, a, b, n));
}

static void t_residual_backward(float *da, float *db, const float *dout, size_t n)
{
	TIMED(K_RESIDUAL, base->residual_backward(da, db, dout, n));
}

static void t_softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V,
				   int Vp)
{
	TIMED(K_XENT, base->softmax_xent_forward(losses, logits, targets, N, V, Vp));
}

static void t_softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				    int Vp)
{
	TIMED(K_XENT, base->softmax_xent_backward(probs, targets, dloss, N, V, Vp));
}

static void t_softmax_xent_fused(float *losses, float *logits, const int *targets, float dloss,
				 int N, int V, int Vp)
{
	TIMED(K_XENT, base->softmax_xent_fused(losses, logits, targets, dloss, N, V, Vp));
}

/* counted as LayerNorm: the residual add is the smaller part of its pass */
static void t_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
					 const float *x, const float *y, const float *weight,
					 const float *bias, int N, int C)
{
	TIMED(K_LAYERNORM,
	      base->residual_layernorm_forward(res, out, mean, rstd, x, y, weight, bias, N, C));
}

static void t_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		    float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2)
{
	TIMED(K_ADAMW, base->adamw(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
				     bc1, bc2));
}

static void t_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
			      int N, int C, float eps)
{
	TIMED(K_RMSNORM, base->rmsnorm_forward(out, rstd, inp, weight, N, C, eps));
}

static void t_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
			       const float *weight, const float *rstd, int N, int C)
{
	TIMED(K_RMSNORM, base->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C));
}

static void t_rope_forward(float *qkv, const float *raw, const float *rope, int B, int T, int NH,
			   int KV, int HS)
{
	TIMED(K_ROPE, base->rope_forward(qkv, raw, rope, B, T, NH, KV, HS));
}

static void t_rope_backward(float *draw, const float *dqkv, const float *rope, int B, int T,
			    int NH, int KV, int HS)
{
	TIMED(K_ROPE, base->rope_backward(draw, dqkv, rope, B, T, NH, KV, HS));
}

static void t_swiglu_forward(float *out, const float *inp, int N, int I)
{
	TIMED(K_SWIGLU, base->swiglu_forward(out, inp, N, I));
}

static void t_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int I)
{
	TIMED(K_SWIGLU, base->swiglu_backward(dinp, inp, dout, N, I));
}

static void t_zero(float *p, size_t n)
{
	TIMED(K_OTHER, base->zero(p, n));
}

/* Backend b with every entry timed. */
static struct ops timed_ops(const struct ops *b)
{
	struct ops o = *b;

	base = b;
	o.encoder_forward = t_encoder_forward;
	o.encoder_backward = t_encoder_backward;
	o.layernorm_forward = t_layernorm_forward;
	o.layernorm_backward = t_layernorm_backward;
	o.matmul_forward = t_matmul_forward;
	o.matmul_backward = t_matmul_backward;
	o.attention_forward = t_attention_forward;
	o.attention_backward = t_attention_backward;
	o.rmsnorm_forward = b->rmsnorm_forward ? t_rmsnorm_forward : NULL;
	o.rmsnorm_backward = b->rmsnorm_backward ? t_rmsnorm_backward : NULL;
	o.rope_forward = b->rope_forward ? t_rope_forward : NULL;
	o.rope_backward = b->rope_backward ? t_rope_backward : NULL;
	o.swiglu_forward = b->swiglu_forward ? t_swiglu_forward : NULL;
	o.swiglu_backward = b->swiglu_backward ? t_swiglu_backward : NULL;
	o.gelu_forward = t_gelu_forward;
	o.gelu_backward = t_gelu_backward;
	o.residual_forward = t_residual_forward;
	o.residual_backward = t_residual_backward;
	o.softmax_xent_forward = t_softmax_xent_forward;
	o.softmax_xent_backward = t_softmax_xent_backward;
	o.softmax_xent_fused = b->softmax_xent_fused ? t_softmax_xent_fused : NULL;
	o.residual_layernorm_forward =
		b->residual_layernorm_forward ? t_residual_layernorm_forward : NULL;
	o.attention_fused_forward = b->attention_fused_forward ? t_attention_fused_forward : NULL;
	o.attention_fused_backward = b->attention_fused_backward ? t_attention_fused_backward : NULL;
	o.adamw = t_adamw;
	o.zero = t_zero;
	return o;
}

/*
 * Parameters that take part in matrix products: all but the lookup
 * tables, the position embedding and (when the LM head is a tensor of its
 * own) the token embedding. GQA's smaller k and v projections and
 * SwiGLU's three matrices are in the parameter count already.
 */
static double product_params(const struct gpt2_config *c, size_t num_params)
{
	double n = (double)num_params - (double)gpt2_chunk_floats(c, GPT2_WPE);

	if (!model_tied(c))
		n -= (double)gpt2_chunk_floats(c, GPT2_WTE);
	return n;
}

double bench_flops_per_token(const struct gpt2_config *c, size_t num_params, int T)
{
	/* 6 per product parameter, and attention's q.k and att.v over T positions of C */
	return 6.0 * product_params(c, num_params) + 12.0 * c->num_layers * c->channels * (double)T;
}

/*
 * Clock of the calling core in GHz: n dependent adds take n cycles. The
 * adds are register to register: recent x86 cores fold a chain of
 * add-immediates in the renamer, several per cycle, which measured a
 * 3.9 GHz core at 21 GHz. The best of 20 short runs (5 ms each), so that on
 * a shared machine one of them runs undisturbed.
 */
static double measure_ghz(void)
{
#if defined(__x86_64__)
	double best = 0.0;

	for (int r = 0; r < 20; r++) {
		uint64_t x = 0, one = 1, n = 20000000ULL;
		double t0 = clock_monotonic(), dt;

		for (uint64_t i = 0; i < n; i += 8)
			__asm__ volatile("add %1,%0\n\tadd %1,%0\n\tadd %1,%0\n\tadd %1,%0\n\t"
					 "add %1,%0\n\tadd %1,%0\n\tadd %1,%0\n\tadd %1,%0"
					 : "+r"(x)
					 : "r"(one));
		dt = clock_monotonic() - t0;
		if (n / dt / 1e9 > best)
			best = n / dt / 1e9;
	}
	return best;
#else
	return 0.0;
#endif
}

double bench_fp32_peak(int cores, char *describe, size_t len)
{
	double ghz = measure_ghz();
	int lanes = 4;
	const char *isa = "SSE";

#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		lanes = 16;
		isa = "AVX-512";
	} else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		lanes = 8;
		isa = "AVX2";
	}
#endif
	if (describe)
		snprintf(describe, len,
			 "%d cores x %.2f GHz (measured) x %d FLOPs/cycle (%s: %d fp32 lanes x 2 "
			 "for FMA x 2 FMA units per core, assumed)",
			 cores, ghz, lanes * 4, isa, lanes);
	return cores * ghz * 1e9 * lanes * 4;
}

struct phase {
	double fwd, bwd, upd;
};

/* The timed wrappers' totals per step; the rest of the step is the model's own code. */
static void print_by_kernel(FILE *out, const char *title, double total, int steps)
{
	fprintf(out, "%s", title);
	for (int k = 0; k < K_NUM; k++) {
		total -= k_seconds[k];
		if (k_seconds[k] > 0.0)
			fprintf(out, " %s %.1f,", kernel_names[k], 1e3 * k_seconds[k] / steps);
	}
	fprintf(out, " model code %.1f\n", 1e3 * total / steps);
}

/* The benchmark's tokens: B*T + 1 ids drawn from the vocabulary, the same every run. */
static void random_tokens(int *tok, size_t n, int V)
{
	uint64_t st = rng_seed(1337, 99);

	for (size_t i = 0; i < n; i++)
		tok[i] = (int)rng_below(&st, (uint32_t)V);
}

/* n training steps on the same batch, their phases' times in *ph (reset first). */
static int train_steps(struct gpt2 *m, struct adamw_state *s, const int *tok, int B, int T, int n,
		       struct phase *ph);

/* The lines every backend prints: the model, then (after its backend line) the step. */
static void print_model(FILE *out, const struct gpt2_config *c, const struct gpt2 *m, int B, int T)
{
	fprintf(out, "model: L=%d H=%d C=%d V=%d Vp=%d maxT=%d, %zu parameters; B=%d T=%d\n",
		c->num_layers, c->num_heads, c->channels, c->vocab_size, c->padded_vocab_size,
		c->max_seq_len, m->num_params, B, T);
}

/*
 * The activation memory of the run (what ensure_acts allocates for its
 * recomputation mode) beside keeping every activation, and the fused kernels.
 */
static void print_memory_and_kernels(FILE *out, const struct gpt2_config *c, const struct gpt2 *m,
			      int B, int T)
{
	double all = (double)gpt2_activation_floats(c, &m->shard, B, T, GPT2_RECOMPUTE_NONE);
	double kept = (double)gpt2_activation_floats(c, &m->shard, B, T, m->recompute);

	fprintf(out, "activations: %.2f MiB with recompute %s (none: %.2f MiB, %.2f MiB saved)\n",
		kept * sizeof(float) / (1 << 20), gpt2_recompute_name(m->recompute),
		all * sizeof(float) / (1 << 20), (all - kept) * sizeof(float) / (1 << 20));
	fprintf(out, "fused kernels: %s%s\n",
		!m->fused ? "none (train.fused: false)" :
		m->config.arch == MODEL_LLAMA ? "classifier" : "classifier, residual + LayerNorm",
		m->fused && m->ops->attention_fused_forward ?
			", attention (its own tiles in bf16; cuBLAS products in fp32/tf32)" :
			"");
}

static void print_step(FILE *out, const struct gpt2_config *c, const struct gpt2 *m,
		       const struct phase *ph, int steps, double step_s, double tps, double fpt)
{
	fprintf(out, "step: %.1f ms (forward %.1f, backward %.1f, adamw %.1f), %d steps\n",
		1e3 * step_s, 1e3 * ph->fwd / steps, 1e3 * ph->bwd / steps, 1e3 * ph->upd / steps,
		steps);
	fprintf(out, "throughput: %.0f tokens/s\n", tps);
	fprintf(out, "model FLOPs/token: %.3g (6 x %.0f params in matrix products + 12 L C T; %s)\n",
		fpt, product_params(c, m->num_params), model_arch_name(c->arch));
}

/* A model of c (seed 1337) as o asks: its recompute mode and fused kernels. 0, or -1 (m->err). */
static int build_model(struct gpt2 *m, const struct gpt2_config *c, const struct bench_train_opts *o)
{
	if (gpt2_build(m, c, 1337))
		return -1;
	gpt2_set_recompute(m, o->recompute);
	gpt2_set_fused(m, o->fused, 1.0f);
	return 0;
}

static int train_step(struct gpt2 *m, struct adamw_state *s, const int *tok, int B, int T,
		      struct phase *ph)
{
	const struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	double t0 = clock_monotonic(), t1, t2;
	float loss;

	/* kernels may run asynchronously (GPU): each phase ends in a sync */
	gpt2_zero_grad(m);
	loss = gpt2_forward(m, tok, tok + 1, B, T);
	m->ops->sync();
	t1 = clock_monotonic();
	if (loss != loss || gpt2_backward(m, 1.0f))
		return -1;
	m->ops->sync();
	t2 = clock_monotonic();
	adamw_step_model(s, &h, 1e-4f, m);
	m->ops->sync();
	ph->fwd += t1 - t0;
	ph->bwd += t2 - t1;
	ph->upd += clock_monotonic() - t2;
	return 0;
}

static int train_steps(struct gpt2 *m, struct adamw_state *s, const int *tok, int B, int T, int n,
		       struct phase *ph)
{
	memset(ph, 0, sizeof *ph);
	for (int i = 0; i < n; i++)
		if (train_step(m, s, tok, B, T, ph))
			return -1;
	return 0;
}

/* What o->result asks for, from n timed steps' phases. */
static void keep_result(const struct bench_train_opts *o, const struct gpt2 *m,
			const struct phase *ph, int n, int threads, const char *device)
{
	if (!o->result)
		return;
	*o->result = (struct bench_train_result){ .fwd_bwd_s = (ph->fwd + ph->bwd) / n,
						  .update_s = ph->upd / n,
						  .num_params = m->num_params, .B = o->B, .T = o->T,
						  .threads = threads };
	snprintf(o->result->device, sizeof o->result->device, "%s", device);
}

#ifdef HAVE_CUDA
/*
 * The GPU benchmark: the same steps on ops_cuda, every array in device
 * memory. Kernels run asynchronously, so each phase ends with a sync
 * before the clock is read; there is no per-kernel breakdown (timing each
 * kernel would need a sync after each).
 */
int bench_train_cuda(const struct gpt2_config *c, const struct bench_train_opts *o, FILE *out)
{
	int B = o->B, T = o->T, steps = o->steps;
	struct ops timed; /* the model points at it until gpt2_free */
	struct gpt2 m;
	struct adamw_state s = { 0 };
	struct phase ph = { 0 };
	int *tok = malloc(((size_t)B * T + 1) * sizeof(int));
	const char *prec = ops_precision_name(o->precision);
	char desc[160], err[256];
	size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
	double peak, fpt, step_s, tps;
	int rc = -1;

	if (kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) < 0) {
		fprintf(out, "bench train: run.device cuda: %s\n", err);
		free(tok);
		return -1;
	}
	if (kernels_cuda_check_precision(o->precision, err, sizeof err) < 0) {
		fprintf(out, "bench train: %s (%s)\n", err, desc);
		free(tok);
		return -1;
	}
	ops_cuda.set_precision(o->precision);
	ops_cuda.mem_info(&free0, &total);
	if (build_model(&m, c, o)) {
		fprintf(out, "bench train: %s\n", m.err);
		free(tok);
		return -1;
	}
	if (!tok || gpt2_set_backend(&m, &ops_cuda) || adamw_init_on(&s, m.num_params, &ops_cuda) ||
	    gpt2_zero_grad(&m)) {
		fprintf(out, "bench train: %s\n", m.err[0] ? m.err : "out of memory");
		goto fail;
	}
	ops_cuda.mem_info(&free1, &total);
	random_tokens(tok, (size_t)B * T + 1, c->vocab_size);
	if (train_steps(&m, &s, tok, B, T, 2, &ph)) /* warm-up */
		goto step_fail;
	ops_cuda.mem_info(&free2, &total);
	if (train_steps(&m, &s, tok, B, T, steps, &ph))
		goto step_fail;

	keep_result(o, &m, &ph, steps, 1, desc);
	peak = kernels_cuda_peak_flops(prec);
	fpt = bench_flops_per_token(c, m.num_params, T);
	step_s = (ph.fwd + ph.bwd + ph.upd) / steps;
	tps = (double)B * T / step_s;
	print_model(out, c, &m, B, T);
	fprintf(out, "backend: cuda, %s (%s), %s matrix products\n", desc, kernels_cuda_versions(),
		prec);
	print_step(out, c, &m, &ph, steps, step_s, tps, fpt);
	print_memory_and_kernels(out, c, &m, B, T);
	if (peak > 0)
		fprintf(out, "MFU: %.1f%% of the GPU's dense %s peak %.1f TFLOP/s (%.1f TFLOP/s of model FLOPs)\n",
			100.0 * fpt * tps / peak, prec, peak / 1e12, fpt * tps / 1e12);
	fprintf(out, "memory: %.0f MiB parameters and moments, %.0f MiB gradients and activations, "
		     "%.0f of %.0f MiB in use\n",
		(double)(free0 - free1) / (1 << 20), (double)(free1 - free2) / (1 << 20),
		(double)(total - free2) / (1 << 20), (double)total / (1 << 20));
	{
		/* a second run with every kernel waited for: where the time goes
		 * (slower in total than the run above, which overlaps launches) */
		timed = timed_ops(&ops_cuda);
		memset(k_seconds, 0, sizeof k_seconds);
		if (gpt2_set_backend(&m, &timed) || train_steps(&m, &s, tok, B, T, steps, &ph))
			goto step_fail;
		print_by_kernel(out, "by kernel (ms/step, each waited for):",
				ph.fwd + ph.bwd + ph.upd, steps);
	}
	rc = 0;
	goto fail;
step_fail:
	fprintf(out, "bench train: %s\n", m.err);
fail:
	adamw_free(&s);
	gpt2_free(&m);
	free(tok);
	return rc;
}
#else
int bench_train_cuda(const struct gpt2_config *c, const struct bench_train_opts *o, FILE *out)
{
	(void)c, (void)o;
	fprintf(out, "bench train: run.device cuda: this build has no CUDA backend\n");
	return -1;
}
#endif

int bench_train(const struct gpt2_config *c, const struct bench_train_opts *o, FILE *out)
{
	int B = o->B, T = o->T, steps = o->steps;
	struct ops timed = timed_ops(&ops_cpu);
	struct gpt2 m;
	struct adamw_state s = { 0 };
	struct phase ph = { 0 };
	int *tok = malloc(((size_t)B * T + 1) * sizeof(int));
	char peak_how[256];
	double peak, fpt, step_s, tps, rest;
	int rc = -1;

	if (build_model(&m, c, o)) {
		fprintf(out, "bench train: %s\n", m.err);
		free(tok);
		return -1;
	}
	ops_cpu.set_precision(o->precision);
	if (gpt2_set_backend(&m, &timed)) {
		fprintf(out, "bench train: %s\n", m.err);
		goto fail;
	}
	if (!tok || adamw_init(&s, m.num_params) || gpt2_zero_grad(&m)) {
		fprintf(out, "bench train: out of memory\n");
		goto fail;
	}
	random_tokens(tok, (size_t)B * T + 1, c->vocab_size);
	if (train_steps(&m, &s, tok, B, T, 2, &ph)) /* warm-up */
		goto step_fail;
	memset(k_seconds, 0, sizeof k_seconds);
	mm_flops = 0.0;
	if (train_steps(&m, &s, tok, B, T, steps, &ph))
		goto step_fail;

	keep_result(o, &m, &ph, steps, ops_cpu_threads(), "cpu");
	peak = bench_fp32_peak(ops_cpu_threads(), peak_how, sizeof peak_how);
	fpt = bench_flops_per_token(c, m.num_params, T);
	step_s = (ph.fwd + ph.bwd + ph.upd) / steps;
	tps = (double)B * T / step_s;
	rest = ph.fwd + ph.bwd + ph.upd;
	print_model(out, c, &m, B, T);
	fprintf(out, "backend: %s, %d thread(s), %s matrix products%s\n", kernels_cpu_backend_name(),
		ops_cpu_threads(), o->precision == OPS_BF16 ? "bf16" : "fp32",
		o->precision == OPS_BF16 ? " (emulated: inputs rounded to bf16, fp32 sums)" : "");
	if (ops_cpu_blas_coretype_hint())
		fprintf(out,
			"note: OpenBLAS runs AVX2 kernels (OPENBLAS_CORETYPE=%s) on this AVX-512 CPU: "
			"matrix products are capped at 50%% of peak; OPENBLAS_CORETYPE=%s "
			"is about twice as fast\n",
			getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset",
			ops_cpu_blas_coretype_hint());
	print_step(out, c, &m, &ph, steps, step_s, tps, fpt);
	print_memory_and_kernels(out, c, &m, B, T);
	fprintf(out, "fp32 peak: %.1f GFLOP/s = %s\n", peak / 1e9, peak_how);
	fprintf(out, "MFU: %.1f%% (%.1f GFLOP/s of model FLOPs)\n", 100.0 * fpt * tps / peak,
		fpt * tps / 1e9);
	fprintf(out, "matrix products: %.1f ms/step (%.0f%% of the step), %.1f GFLOP/s = %.1f%% "
		     "of peak\n",
		1e3 * k_seconds[K_MATMUL] / steps, 100.0 * k_seconds[K_MATMUL] / steps / step_s,
		mm_flops / k_seconds[K_MATMUL] / 1e9,
		100.0 * mm_flops / k_seconds[K_MATMUL] / peak);
	print_by_kernel(out, "by kernel (ms/step):", rest, steps);
	rc = 0;
	goto fail;
step_fail:
	fprintf(out, "bench train: %s\n", m.err);
fail:
	adamw_free(&s);
	gpt2_free(&m);
	free(tok);
	return rc;
}

/* ------------------------------------------------------------ probe */

#ifdef HAVE_CUDA
/* The probe's model on the first GPU, and a fresh optimizer state made there. */
static int probe_use_gpu(struct gpt2 *m, struct adamw_state *s, const struct bench_train_opts *o,
			 char *desc, size_t dlen, char *err, size_t errlen)
{
	if (kernels_cuda_use_device(0, desc, dlen, err, errlen) < 0 ||
	    kernels_cuda_check_precision(o->precision, err, errlen) < 0)
		return -1;
	ops_cuda.set_precision(o->precision);
	if (gpt2_set_backend(m, &ops_cuda) || adamw_init_on(s, m->num_params, &ops_cuda)) {
		snprintf(err, errlen, "%s", m->err[0] ? m->err : "out of GPU memory");
		return -1;
	}
	return 0;
}
#else
static int probe_use_gpu(struct gpt2 *m, struct adamw_state *s, const struct bench_train_opts *o,
			 char *desc, size_t dlen, char *err, size_t errlen)
{
	(void)m, (void)s, (void)o, (void)desc, (void)dlen;
	snprintf(err, errlen, "this build has no CUDA backend");
	return -1;
}
#endif

int bench_train_probe(const struct gpt2_config *c, const struct bench_train_opts *o, int cuda,
		      int (*each)(const struct bench_train_result *step, void *arg), void *arg,
		      char *err, size_t errlen)
{
	int B = o->B, T = o->T, rc = -1;
	struct gpt2 m;
	struct adamw_state s = { 0 };
	struct phase one;
	struct bench_train_result r;
	struct bench_train_opts ro = *o;
	int *tok = malloc(((size_t)B * T + 1) * sizeof(int));
	char desc[160] = "cpu";

	if (!tok || build_model(&m, c, o)) {
		snprintf(err, errlen, "%s", tok ? m.err : "out of memory");
		free(tok);
		return -1;
	}
	ops_cpu.set_precision(o->precision);
	if (cuda && probe_use_gpu(&m, &s, o, desc, sizeof desc, err, errlen) < 0)
		goto out;
	if (!cuda && adamw_init(&s, m.num_params)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	random_tokens(tok, (size_t)B * T + 1, c->vocab_size);
	if (gpt2_zero_grad(&m) || train_steps(&m, &s, tok, B, T, 1, &one)) /* warm-up */
		goto step_fail;
	ro.result = &r;
	do {
		if (train_steps(&m, &s, tok, B, T, 1, &one))
			goto step_fail;
		keep_result(&ro, &m, &one, 1, cuda ? 1 : ops_cpu_threads(), desc);
	} while (each(&r, arg));
	rc = 0;
	goto out;
step_fail:
	snprintf(err, errlen, "%s", m.err);
out:
	adamw_free(&s);
	gpt2_free(&m);
	free(tok);
	return rc;
}

/* ------------------------------------------------------------ overlap */

/* One rank of the overlap benchmark (a thread of this process). */
struct ov_rank {
	const struct gpt2_config *c;
	const struct bench_train_opts *o;
	const struct ops *ops;
	struct comm *comm;            /* the rank's world communicator (device-wrapped on a GPU) */
	struct grad_sync *sync;
	/* seconds per mode (0: all-reduce after the backward pass, 1: overlapped) */
	double step_s[2], bwd_s[2], busy_s[2], wait_s[2];
	char err[256];
};

/*
 * One data-parallel step: zero, forward, backward (overlapped: each layer
 * handed over as it finishes), the rest of the all-reduce, the average and
 * AdamW; the phases' times added to those of the mode.
 */
static int ov_step(struct ov_rank *r, struct gpt2 *m, struct adamw_state *s, const int *tok,
		   int overlap)
{
	const struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	double t0 = clock_monotonic(), t1, busy, wait;
	int rc;

	gpt2_zero_grad(m);
	if (isnan(gpt2_forward(m, tok, tok + 1, r->o->B, r->o->T)))
		return -1;
	gpt2_set_layer_hook(m, overlap ? grad_sync_layer_done : NULL, r->sync);
	rc = gpt2_backward(m, 1.0f);
	gpt2_set_layer_hook(m, NULL, NULL);
	if (rc)
		return -1;
	m->ops->sync();
	t1 = clock_monotonic();
	if (overlap) {
		grad_sync_push_rest(r->sync, m);
		rc = grad_sync_wait(r->sync, &busy, &wait);
	} else {
		rc = comm_allreduce(r->comm, m->grads, m->num_params, COMM_FLOAT32, COMM_SUM);
		busy = wait = clock_monotonic() - t1;
	}
	if (rc < 0) {
		snprintf(m->err, sizeof m->err, "all-reduce: %s", comm_strerror(rc));
		return -1;
	}
	grad_scale(m->ops, m->grads, m->num_params, 1.0f / (float)comm_size(r->comm));
	adamw_step_model(s, &h, 1e-4f, m);
	m->ops->sync();
	r->step_s[overlap] += clock_monotonic() - t0;
	r->bwd_s[overlap] += t1 - t0;
	r->busy_s[overlap] += busy;
	r->wait_s[overlap] += wait;
	return 0;
}

#ifdef HAVE_CUDA
static int ov_gpu(void *arg)
{
	char desc[160], err[256];

	(void)arg;
	return kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) < 0 ? -1 : 0;
}

/* The first GPU for this rank thread, and its communicator wrapped for device buffers. */
static int ov_use_gpu(struct ov_rank *r)
{
	struct comm_device_memory mem = {
		.is_device = kernels_cuda_is_device_ptr,
		.to_host = ops_cuda.download, .to_device = ops_cuda.upload,
		.host_alloc = ops_cuda.host_alloc, .host_free = ops_cuda.host_free,
		.device_id = "this machine/gpu 0",
	};
	struct comm *w;

	if (ov_gpu(NULL) || comm_device_wrap(r->comm, &mem, COMM_DEVICE_AUTO, &w, r->err,
					     sizeof r->err))
		return -1;
	r->comm = w;
	return 0;
}
#else
static int ov_gpu(void *arg)
{
	(void)arg;
	return -1;
}

static int ov_use_gpu(struct ov_rank *r)
{
	snprintf(r->err, sizeof r->err, "this build has no CUDA backend");
	return -1;
}
#endif

static void *ov_rank_main(void *arg)
{
	struct ov_rank *r = arg;
	int gpu = r->ops != &ops_cpu, rank = comm_rank(r->comm), ok = 0;
	struct comm *own = r->comm;
	struct adamw_state s = { 0 };
	struct gpt2 m;
	int *tok = malloc(((size_t)r->o->B * r->o->T + 1) * sizeof(int));

	if (gpu && ov_use_gpu(r))
		goto out_tok;
	r->ops->set_precision(r->o->precision);
	if (!tok || build_model(&m, r->c, r->o)) {
		snprintf(r->err, sizeof r->err, "%s", tok ? m.err : "out of memory");
		goto out_comm;
	}
	if (gpt2_set_backend(&m, r->ops) || adamw_init_on(&s, m.num_params, r->ops) ||
	    grad_sync_start(&r->sync, r->comm, r->ops, gpt2_grad_pieces(&m),
			    gpu ? ov_gpu : NULL, NULL)) {
		snprintf(r->err, sizeof r->err, "%s", m.err[0] ? m.err : "out of memory");
		goto out_model;
	}
	{
		uint64_t st = rng_seed(1337, 100 + (uint64_t)rank);

		for (int i = 0; i < r->o->B * r->o->T + 1; i++)
			tok[i] = (int)rng_below(&st, (uint32_t)r->c->vocab_size);
	}
	for (int mode = 0; mode < 2; mode++) {
		for (int k = 0; k < 2 + r->o->steps; k++) {
			if (k == 2) /* after 2 warm-up steps */
				r->step_s[mode] = r->bwd_s[mode] = r->busy_s[mode] = r->wait_s[mode] = 0;
			if (ov_step(r, &m, &s, tok, mode)) {
				snprintf(r->err, sizeof r->err, "%s", m.err);
				comm_abort(r->comm, r->err);
				goto out_sync;
			}
		}
	}
	ok = 1;
out_sync:
	grad_sync_stop(r->sync);
	r->sync = NULL;
out_model:
	adamw_free(&s);
	gpt2_free(&m);
out_comm:
	if (r->comm != own)
		comm_free(r->comm);
	r->comm = own;
out_tok:
	free(tok);
	if (!ok) { /* wake the other ranks out of their collectives */
		if (!r->err[0])
			snprintf(r->err, sizeof r->err, "failed");
		comm_abort(own, r->err);
	}
	return NULL;
}

int bench_overlap(const struct gpt2_config *c, const struct bench_train_opts *o, int ranks,
		  int cuda, FILE *out)
{
	struct comm_world *w = comm_world_create(ranks);
	struct ov_rank *r = calloc((size_t)ranks, sizeof *r);
	pthread_t *th = calloc((size_t)ranks, sizeof *th);
	const char *mode[2] = { "after the backward", "overlapped" };
	int rc = -1, started = 0;

	if (!w || !r || !th) {
		fprintf(out, "bench overlap: out of memory\n");
		goto out;
	}
	for (; started < ranks; started++) {
		r[started] = (struct ov_rank){ .c = c, .o = o, .comm = comm_world_rank(w, started),
#ifdef HAVE_CUDA
					       .ops = cuda ? &ops_cuda : &ops_cpu,
#else
					       .ops = &ops_cpu,
#endif
		};
		if (pthread_create(&th[started], NULL, ov_rank_main, &r[started]))
			break;
	}
	for (int k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < ranks; k++) {
		if (k >= started || r[k].err[0]) {
			fprintf(out, "bench overlap: rank %d: %s\n", k,
				k >= started ? "cannot start its thread" : r[k].err);
			goto out;
		}
	}
	fprintf(out, "overlap: %d ranks (threads of this process) on %s, model L=%d C=%d, B=%d T=%d, "
		     "%d steps per mode, %s matrix products\n",
		ranks, cuda ? "the first GPU, all-reduce through pinned host memory" : "the CPU",
		c->num_layers, c->channels, o->B, o->T, o->steps, ops_precision_name(o->precision));
	/* waited: the all-reduce the step still waited for after its backward
	 * pass; in all-reduce: the time inside the all-reduce calls, waiting
	 * for the other ranks included */
	fprintf(out, "%-20s %10s %12s %10s %16s   (ms per step, rank 0)\n", "all-reduce", "step",
		"fwd+bwd", "waited", "in all-reduce");
	for (int k = 0; k < 2; k++)
		fprintf(out, "%-20s %10.2f %12.2f %10.2f %16.2f\n", mode[k],
			1e3 * r[0].step_s[k] / o->steps, 1e3 * r[0].bwd_s[k] / o->steps,
			1e3 * r[0].wait_s[k] / o->steps, 1e3 * r[0].busy_s[k] / o->steps);
	{
		double after = 1e3 * r[0].step_s[0] / o->steps, over = 1e3 * r[0].step_s[1] / o->steps;

		fprintf(out, "overlapped against after: step %+.2f ms (%+.1f%%), all-reduce time hidden "
			     "%.2f ms per step (the wait it took off the step)\n",
			over - after, 100.0 * (over - after) / after,
			1e3 * (r[0].wait_s[0] - r[0].wait_s[1]) / o->steps);
	}
	rc = 0;
out:
	free(th);
	free(r);
	if (w)
		comm_world_destroy(w);
	return rc;
}
