/*
 * daemon/bench_train.c - time training steps of a GPT-2 model and say how
 * close they come to the machine's fp32 peak.
 *
 * The matrix products are timed on their own: the benchmark runs the model
 * on a copy of the CPU backend whose matmul entries wrap the real ones with
 * a clock and a FLOP count (2 N C OC forward, 4 N C OC backward), so it can
 * report the BLAS share and throughput without touching the model code.
 */
#include "config.h"
#include "daemon/bench_train.h"
#include "daemon/optimizer.h"
#include "lib/rng.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Matrix products of the timed steps: seconds and FLOPs (one benchmark at a time). */
static double mm_seconds, mm_flops;

static void timed_matmul_forward(float *out, const float *inp, const float *weight,
				 const float *bias, int N, int C, int OC)
{
	double t0 = now();

	ops_cpu.matmul_forward(out, inp, weight, bias, N, C, OC);
	mm_seconds += now() - t0;
	mm_flops += 2.0 * N * C * OC;
}

static void timed_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
				  const float *inp, const float *weight, int N, int C, int OC)
{
	double t0 = now();

	ops_cpu.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
	mm_seconds += now() - t0;
	mm_flops += (dinp ? 4.0 : 2.0) * N * C * OC;
}

double bench_flops_per_token(const struct gpt2_config *c, size_t num_params, int T)
{
	double n = (double)num_params - (double)c->max_seq_len * c->channels;

	return 6.0 * n + 12.0 * c->num_layers * c->channels * (double)T;
}

/* Clock of the calling core in GHz: 1e8 dependent adds take 1e8 cycles. */
static double measure_ghz(void)
{
#if defined(__x86_64__)
	double best = 0.0;

	for (int r = 0; r < 3; r++) {
		uint64_t x = 0, n = 100000000ULL;
		double t0 = now(), dt;

		for (uint64_t i = 0; i < n; i += 8)
			__asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\t"
					 "add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0"
					 : "+r"(x));
		dt = now() - t0;
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

static int train_step(struct gpt2 *m, struct adamw_state *s, const int *tok, int B, int T,
		      struct phase *ph)
{
	const struct adamw_params h = { 0.9f, 0.95f, 1e-8f, 0.1f };
	double t0 = now(), t1, t2;
	float loss;

	gpt2_zero_grad(m);
	loss = gpt2_forward(m, tok, tok + 1, B, T);
	t1 = now();
	if (loss != loss || gpt2_backward(m, 1.0f))
		return -1;
	t2 = now();
	adamw_step_model(s, &h, 1e-4f, m);
	ph->fwd += t1 - t0;
	ph->bwd += t2 - t1;
	ph->upd += now() - t2;
	return 0;
}

int bench_train(const struct gpt2_config *c, int B, int T, int steps, FILE *out)
{
	struct ops timed = ops_cpu;
	struct gpt2 m;
	struct adamw_state s = { 0 };
	struct phase ph = { 0 };
	uint64_t st = rng_seed(1337, 99);
	int *tok = malloc(((size_t)B * T + 1) * sizeof(int));
	char peak_how[256];
	double peak, fpt, step_s, tps;
	int rc = -1;

	if (gpt2_build(&m, c, 1337)) {
		fprintf(out, "bench train: %s\n", m.err);
		free(tok);
		return -1;
	}
	timed.matmul_forward = timed_matmul_forward;
	timed.matmul_backward = timed_matmul_backward;
	m.ops = &timed;
	if (!tok || adamw_init(&s, m.num_params) || gpt2_zero_grad(&m)) {
		fprintf(out, "bench train: out of memory\n");
		goto fail;
	}
	for (size_t i = 0; i < (size_t)B * T + 1; i++)
		tok[i] = (int)rng_below(&st, (uint32_t)c->vocab_size);
	for (int i = 0; i < 2; i++)
		if (train_step(&m, &s, tok, B, T, &ph))
			goto step_fail;
	memset(&ph, 0, sizeof ph);
	mm_seconds = mm_flops = 0.0;
	for (int i = 0; i < steps; i++)
		if (train_step(&m, &s, tok, B, T, &ph))
			goto step_fail;

	peak = bench_fp32_peak(ops_cpu_threads(), peak_how, sizeof peak_how);
	fpt = bench_flops_per_token(c, m.num_params, T);
	step_s = (ph.fwd + ph.bwd + ph.upd) / steps;
	tps = (double)B * T / step_s;
	fprintf(out, "model: L=%d H=%d C=%d V=%d Vp=%d maxT=%d, %zu parameters; B=%d T=%d\n",
		c->num_layers, c->num_heads, c->channels, c->vocab_size, c->padded_vocab_size,
		c->max_seq_len, m.num_params, B, T);
	fprintf(out, "backend: %s, %d thread(s)\n", ops_cpu.name, ops_cpu_threads());
	fprintf(out, "step: %.1f ms (forward %.1f, backward %.1f, adamw %.1f), %d steps\n",
		1e3 * step_s, 1e3 * ph.fwd / steps, 1e3 * ph.bwd / steps, 1e3 * ph.upd / steps,
		steps);
	fprintf(out, "throughput: %.0f tokens/s\n", tps);
	fprintf(out, "model FLOPs/token: %.3g (6 x %zu params without wpe + 12 L C T)\n", fpt,
		m.num_params - (size_t)c->max_seq_len * c->channels);
	fprintf(out, "fp32 peak: %.1f GFLOP/s = %s\n", peak / 1e9, peak_how);
	fprintf(out, "MFU: %.1f%% (%.1f GFLOP/s of model FLOPs)\n", 100.0 * fpt * tps / peak,
		fpt * tps / 1e9);
	fprintf(out, "matrix products: %.1f ms/step (%.0f%% of the step), %.1f GFLOP/s = %.1f%% "
		     "of peak\n",
		1e3 * mm_seconds / steps, 100.0 * mm_seconds / steps / step_s,
		mm_flops / mm_seconds / 1e9, 100.0 * mm_flops / mm_seconds / peak);
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
