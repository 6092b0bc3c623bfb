/*
 * t/gpu/check_train_cuda.c - training on a GPU against training on the CPU.
 *
 * The model code (daemon/engine/model/model.c, daemon/engine/model/optimizer.c) is the same for both
 * backends; these tests run it on ops_cuda with every array in device
 * memory and compare with ops_cpu:
 *   - 20 optimizer steps of a small model: the losses agree within 1e-4
 *     relative (TF32 off: both compute in fp32, only the summation orders
 *     differ, a few ulps per layer);
 *   - bf16 matrix products (train.precision: bf16) track fp32 within 2%
 *     over 200 steps on a learnable stream, and are not fp32; with bf16
 *     activations too (gpt2_set_bf16_activations), GPT-2 and the Llama;
 *   - train.recompute gelu and block give the losses and parameters of
 *     keeping every activation, bit for bit, on the GPU too (its kernels
 *     have no atomics: the same inputs give the same bits);
 *   - a GPU run's state (parameters and moments) continued on the CPU, and
 *     a CPU run's continued on the GPU, track an uninterrupted run;
 *   - 2 and 4 data-parallel ranks sharing the one GPU, gradients averaged
 *     through the host-staged device communicator (lib/comm/device.c), track
 *     the same ranks on the CPU; overlapped with the backward pass
 *     (daemon/engine/parallel/grad_sync.c), the all-reduce gives the same bits;
 *   - 2 tensor-parallel ranks on the one GPU (staged) track the whole model.
 * Exits 77 (skipped) when no GPU is visible. Needs only the kernels, the
 * model, the optimizer and lib/comm's in-process backend, so t/gpu/run
 * builds it on a GPU machine with nvcc and a C compiler alone.
 */
#include "config.h"
#include "daemon/engine/parallel/grad_sync.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "kernels/device.h"
#include "kernels/ops.h"
#include "lib/comm/comm.h"
#include "lib/rng.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 20
#define REL_TOL 1e-4

static const struct gpt2_config small = {
	.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
	.num_layers = 2, .num_heads = 4, .channels = 40,
};
/* The same sizes as a Llama: 2 key-value heads, SwiGLU, rope scaling on, untied. */
static const struct gpt2_config small_llama = {
	.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
	.num_layers = 2, .num_heads = 4, .channels = 40, .arch = MODEL_LLAMA, .kv_heads = 2,
	.intermediate = 96, .untied = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
	.rope_factor = 8.0f, .rope_low_freq_factor = 1.0f, .rope_high_freq_factor = 4.0f,
	.rope_original_max_positions = 16,
};
/* The model make() builds. */
static const struct gpt2_config *model_cfg = &small;
static const struct adamw_params hp = { 0.9f, 0.95f, 1e-8f, 0.1f };
enum { B = 3, T = 17 };

/* batch() draws a learnable stream (each token a function of the one before) instead of noise. */
static int learnable;

/* The tokens of step s of data-parallel rank r: B*T + 1 ids, the same on every backend. */
static void batch(int *tok, int step, int rank)
{
	uint64_t st = rng_seed(1234, (uint64_t)(step * 16 + rank));

	tok[0] = (int)rng_below(&st, (uint32_t)small.vocab_size);
	for (int i = 1; i < B * T + 1; i++)
		tok[i] = learnable ? (5 * tok[i - 1] + 3) % small.vocab_size :
				     (int)rng_below(&st, (uint32_t)small.vocab_size);
}

static void use_gpu(void)
{
	char desc[160], err[256];

	ck_assert_msg(kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err) == 0, "%s",
		      err);
	ops_cuda.set_precision(OPS_FP32);
}

/* make() turns the fused kernels (train.fused) on: the GPU's fused attention among them. */
static int fused;

/* A model and its optimizer on backend o, built from the seed on the host first. */
static void make(struct gpt2 *m, struct adamw_state *s, const struct ops *o)
{
	ck_assert_int_eq(gpt2_build(m, model_cfg, 1337), 0);
	ck_assert_int_eq(adamw_init(s, m->num_params), 0);
	ck_assert_msg(gpt2_set_backend(m, o) == 0, "%s", m->err);
	ck_assert_int_eq(adamw_move(s, o), 0);
	gpt2_set_fused(m, fused, 1.0f);
}

/* The rest of an overlapped all-reduce: the tensors of no layer, then wait for all. */
static int finish_overlap(struct grad_sync *g, struct gpt2 *m)
{
	double busy, wait;

	grad_sync_push_rest(g, m);
	return grad_sync_wait(g, &busy, &wait);
}

/*
 * One optimizer step on one rank; grads averaged over c when not NULL,
 * overlapped with the backward pass through g when not NULL. Returns the
 * loss.
 */
static float step(struct gpt2 *m, struct adamw_state *s, struct comm *c, struct grad_sync *g,
		  int k, int rank)
{
	int tok[B * T + 1];
	float loss;
	double sumsq;

	batch(tok, k, rank);
	ck_assert_int_eq(gpt2_zero_grad(m), 0);
	loss = gpt2_forward(m, tok, tok + 1, B, T);
	ck_assert_msg(!isnan(loss), "%s", m->err);
	gpt2_set_layer_hook(m, g ? grad_sync_layer_done : NULL, g);
	ck_assert_msg(gpt2_backward(m, 1.0f) == 0, "%s", m->err);
	gpt2_set_layer_hook(m, NULL, NULL);
	if (c) {
		if (g)
			ck_assert_int_eq(finish_overlap(g, m), 0);
		else
			ck_assert_int_eq(comm_allreduce(c, m->grads, m->num_params, COMM_FLOAT32,
							COMM_SUM),
					 0);
		grad_scale(m->ops, m->grads, m->num_params, 1.0f / (float)comm_size(c));
	}
	sumsq = grad_sumsq(m->ops, m->grads, m->num_params);
	grad_scale(m->ops, m->grads, m->num_params, grad_clip_scale((float)sqrt(sumsq), 1.0f));
	adamw_step_model(s, &hp, 1e-3f, m);
	return loss;
}

static void assert_close(float a, float b, const char *what, int k)
{
	ck_assert_msg(fabsf(a - b) <= REL_TOL * fabsf(b), "%s step %d: gpu %.8f cpu %.8f (rel %.2e)",
		      what, k, a, b, fabsf(a - b) / fabsf(b));
}

/*
 * _i bit 0: 0 the unfused kernels, 1 the fused ones (the GPU's fused
 * attention against the CPU's); bit 1: GPT-2, or a Llama (RMSNorm, rope,
 * SwiGLU, grouped-query attention, untied head).
 */
START_TEST(test_twenty_steps_match_the_cpu)
{
	struct gpt2 g, c;
	struct adamw_state gs, cs;

	use_gpu();
	fused = _i & 1;
	model_cfg = _i & 2 ? &small_llama : &small;
	kernels_cuda_fused_attention_everywhere(fused); /* fp32: its own kernels, not cuBLAS's */
	make(&g, &gs, &ops_cuda);
	make(&c, &cs, &ops_cpu);
	for (int k = 0; k < STEPS; k++) {
		float lg = step(&g, &gs, NULL, NULL, k, 0), lc = step(&c, &cs, NULL, NULL, k, 0);

		assert_close(lg, lc, _i == 3 ? "llama loss (fused)" : _i == 2 ? "llama loss" :
				     fused ? "loss (fused)" : "loss", k);
	}
	fused = 0;
	model_cfg = &small;
	kernels_cuda_fused_attention_everywhere(0);
	gpt2_free(&g);
	gpt2_free(&c);
	adamw_free(&gs);
	adamw_free(&cs);
}
END_TEST

/*
 * Per-step losses of this small batch (51 tokens) are noisy once the model
 * has learnt the stream (loss ~0.2): rounding moves single steps by a few
 * percent in either direction. Tracking is judged on the mean of each
 * WINDOW steps, the loss curve a user reads; the single-step worst is
 * printed beside it.
 */
#define WINDOW 10
/* _i: bit 0 bf16 activations too (gpt2_set_bf16_activations), bit 1 the Llama. */
START_TEST(test_bf16_tracks_fp32_over_200_steps)
{
	enum { N = 200 };
	float l[2][N], worst = 0.0f, worst_window = 0.0f;
	int differ = 0, acts = _i & 1;
	const char *what = _i == 0 ? "bf16" : _i == 1 ? "bf16 activations" :
		           _i == 2 ? "llama bf16" : "llama bf16 activations";

	use_gpu();
	learnable = 1;
	fused = 1;
	model_cfg = _i & 2 ? &small_llama : &small;
	for (int p = 0; p < 2; p++) {
		struct gpt2 g;
		struct adamw_state gs;

		make(&g, &gs, &ops_cuda);
		ops_cuda.set_precision(p ? OPS_BF16 : OPS_FP32);
		gpt2_set_bf16_activations(&g, p && acts);
		for (int k = 0; k < N; k++)
			l[p][k] = step(&g, &gs, NULL, NULL, k, 0);
		ops_cuda.set_precision(OPS_FP32);
		gpt2_free(&g);
		adamw_free(&gs);
	}
	learnable = 0;
	fused = 0;
	model_cfg = &small;
	for (int k = 0; k < N; k++) {
		float r = fabsf(l[1][k] - l[0][k]) / l[0][k];

		worst = r > worst ? r : worst;
		differ += l[1][k] != l[0][k];
	}
	for (int k0 = 0; k0 < N; k0 += WINDOW) {
		float a = 0.0f, b = 0.0f, r;

		for (int k = k0; k < k0 + WINDOW; k++)
			a += l[1][k], b += l[0][k];
		r = fabsf(a - b) / b;
		ck_assert_msg(r <= 0.02f, "steps %d-%d: %s mean loss %.6f, fp32 %.6f", k0,
			      k0 + WINDOW - 1, what, a / WINDOW, b / WINDOW);
		worst_window = r > worst_window ? r : worst_window;
	}
	printf("gpu %s against fp32 over %d steps (fused kernels): worst relative difference %.3g "
	       "of %d-step means, %.3g of single steps, loss %.3f -> %.3f\n",
	       what, N, worst_window, WINDOW, worst, l[0][0], l[0][N - 1]);
	ck_assert_msg(differ > N / 2, "only %d of %d %s losses differ from fp32", differ, N, what);
	ck_assert_msg(l[0][N - 1] < 0.5f * l[0][0], "the model did not learn: %.3f -> %.3f", l[0][0],
		      l[0][N - 1]);
}
END_TEST

START_TEST(test_recompute_is_bit_exact_on_the_gpu)
{
	float losses[3][STEPS];
	double sums[3] = { 0 };

	use_gpu();
	fused = 1; /* the fused attention's backward too repeats its bits */
	kernels_cuda_fused_attention_everywhere(1);
	for (int r = GPT2_RECOMPUTE_NONE; r <= GPT2_RECOMPUTE_BLOCK; r++) {
		struct gpt2 g;
		struct adamw_state gs;
		float *params;

		make(&g, &gs, &ops_cuda);
		gpt2_set_recompute(&g, r);
		for (int k = 0; k < STEPS; k++)
			losses[r][k] = step(&g, &gs, NULL, NULL, k, 0);
		params = malloc(g.num_params * sizeof(float));
		ck_assert_ptr_nonnull(params);
		gpt2_params_to_host(&g, params);
		for (size_t i = 0; i < g.num_params; i++)
			sums[r] += params[i];
		free(params);
		gpt2_free(&g);
		adamw_free(&gs);
	}
	for (int r = GPT2_RECOMPUTE_GELU; r <= GPT2_RECOMPUTE_BLOCK; r++) {
		for (int k = 0; k < STEPS; k++)
			ck_assert_msg(losses[r][k] == losses[0][k],
				      "recompute %s step %d: loss %.9g, %.9g without", gpt2_recompute_name(r),
				      k, losses[r][k], losses[0][k]);
		ck_assert_msg(sums[r] == sums[0], "recompute %s: parameters differ",
			      gpt2_recompute_name(r));
	}
	fused = 0;
	kernels_cuda_fused_attention_everywhere(0);
}
END_TEST

/*
 * A fresh optimizer state made on the GPU (adamw_init_on: zeroed there,
 * nothing copied) trains as the host's zeros moved up do, bit for bit.
 */
START_TEST(test_fresh_state_made_on_the_gpu_equals_one_moved_there)
{
	struct gpt2 a, b;
	struct adamw_state as, bs;
	float *pa, *pb;

	use_gpu();
	make(&a, &as, &ops_cuda);
	ck_assert_int_eq(gpt2_build(&b, model_cfg, 1337), 0);
	ck_assert_msg(gpt2_set_backend(&b, &ops_cuda) == 0, "%s", b.err);
	ck_assert_int_eq(adamw_init_on(&bs, b.num_params, &ops_cuda), 0);
	ck_assert_ptr_eq(bs.mem, &ops_cuda);
	ck_assert(kernels_cuda_is_device_ptr(bs.m) && kernels_cuda_is_device_ptr(bs.v));
	for (int k = 0; k < 5; k++) {
		float la = step(&a, &as, NULL, NULL, k, 0), lb = step(&b, &bs, NULL, NULL, k, 0);

		ck_assert_msg(la == lb, "step %d: loss %.9g, moved state %.9g", k, lb, la);
	}
	pa = malloc(a.num_params * sizeof(float));
	pb = malloc(b.num_params * sizeof(float));
	ck_assert(pa && pb);
	gpt2_params_to_host(&a, pa);
	gpt2_params_to_host(&b, pb);
	ck_assert_msg(!memcmp(pa, pb, a.num_params * sizeof(float)), "parameters differ");
	free(pa), free(pb);
	gpt2_free(&a), gpt2_free(&b);
	adamw_free(&as), adamw_free(&bs);
}
END_TEST

/* Move a trained model and its moments to backend o through host copies, as a checkpoint does. */
static void transfer(struct gpt2 *from, struct adamw_state *fs, struct gpt2 *to,
		     struct adamw_state *ts, const struct ops *o)
{
	float *p = malloc(from->num_params * sizeof(float));
	float *mv = malloc(2 * fs->n * sizeof(float));

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(mv);
	gpt2_params_to_host(from, p);
	adamw_to_host(fs, mv, mv + fs->n);
	ck_assert_int_eq(gpt2_shard_from_full(to, &small, NULL, p), 0);
	ck_assert_int_eq(adamw_init(ts, to->num_params), 0);
	memcpy(ts->m, mv, fs->n * sizeof(float));
	memcpy(ts->v, mv + fs->n, fs->n * sizeof(float));
	ts->step = fs->step;
	ck_assert_msg(gpt2_set_backend(to, o) == 0, "%s", to->err);
	ck_assert_int_eq(adamw_move(ts, o), 0);
	free(p);
	free(mv);
}

START_TEST(test_state_moves_between_gpu_and_cpu)
{
	struct gpt2 ref, g, c, g2;
	struct adamw_state rs, gs, cs, g2s;
	float lr_, lc;

	use_gpu();
	make(&ref, &rs, &ops_cpu);
	make(&g, &gs, &ops_cuda);
	for (int k = 0; k < 5; k++) {
		step(&ref, &rs, NULL, NULL, k, 0);
		step(&g, &gs, NULL, NULL, k, 0);
	}
	transfer(&g, &gs, &c, &cs, &ops_cpu); /* GPU checkpoint, resumed on the CPU */
	for (int k = 5; k < 10; k++) {
		lr_ = step(&ref, &rs, NULL, NULL, k, 0);
		lc = step(&c, &cs, NULL, NULL, k, 0);
		assert_close(lc, lr_, "gpu->cpu loss", k);
	}
	transfer(&c, &cs, &g2, &g2s, &ops_cuda); /* and back onto the GPU */
	for (int k = 10; k < 15; k++) {
		lr_ = step(&ref, &rs, NULL, NULL, k, 0);
		lc = step(&g2, &g2s, NULL, NULL, k, 0);
		assert_close(lc, lr_, "cpu->gpu loss", k);
	}
	ck_assert_int_eq((int)g2s.step, 15);
	gpt2_free(&ref);
	gpt2_free(&g);
	gpt2_free(&c);
	gpt2_free(&g2);
	adamw_free(&rs);
	adamw_free(&gs);
	adamw_free(&cs);
	adamw_free(&g2s);
}
END_TEST

/* ------------------------------------------------ ranks sharing the GPU */

struct rank_arg {
	struct comm *comm;
	const struct ops *ops;
	int overlap;           /* all-reduce overlapped with the backward pass (grad_sync) */
	struct grad_sync *sync;
	float losses[STEPS];   /* this rank's own loss of each step */
	double param_sum;      /* sum of the parameters after the last step */
	char err[256];
};

/* The all-reduce thread of a rank on the GPU works on the GPU too. */
static int sync_on_gpu(void *arg)
{
	char desc[160], err[256];

	(void)arg;
	return kernels_cuda_use_device(0, desc, sizeof desc, err, sizeof err);
}

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	struct comm *c = a->comm, *w = NULL;
	struct gpt2 m;
	struct adamw_state s;

	if (a->ops != &ops_cpu) {
		struct comm_device_memory mem = {
			.is_device = kernels_cuda_is_device_ptr,
			.to_host = a->ops->download, .to_device = a->ops->upload,
			.host_alloc = a->ops->host_alloc, .host_free = a->ops->host_free,
			.device_id = "this machine/gpu 0",
		};

		use_gpu();
		if (comm_device_wrap(c, &mem, COMM_DEVICE_AUTO, &w, a->err, sizeof a->err))
			return NULL;
		/* every rank names the same GPU: NCCL is out, the host stages */
		if (strncmp(comm_device_describe(w), "host-staged", 11)) {
			snprintf(a->err, sizeof a->err, "chose %s", comm_device_describe(w));
			return NULL;
		}
		c = w;
	}
	make(&m, &s, a->ops);
	if (a->overlap)
		ck_assert_int_eq(grad_sync_start(&a->sync, c, a->ops, gpt2_grad_pieces(&m),
						 a->ops != &ops_cpu ? sync_on_gpu : NULL, NULL),
				 0);
	for (int k = 0; k < STEPS; k++)
		a->losses[k] = step(&m, &s, c, a->sync, k, comm_rank(c));
	{
		float *params = malloc(m.num_params * sizeof(float));

		ck_assert_ptr_nonnull(params);
		gpt2_params_to_host(&m, params);
		for (size_t i = 0; i < m.num_params; i++)
			a->param_sum += params[i];
		free(params);
	}
	grad_sync_stop(a->sync);
	gpt2_free(&m);
	adamw_free(&s);
	if (w)
		comm_free(w);
	return NULL;
}

static void run_ranks(int n, const struct ops *o, int overlap, struct rank_arg *args)
{
	struct comm_world *world = comm_world_create(n);
	pthread_t th[8];

	ck_assert_ptr_nonnull(world);
	for (int r = 0; r < n; r++) {
		memset(&args[r], 0, sizeof args[r]);
		args[r].comm = comm_world_rank(world, r);
		args[r].ops = o;
		args[r].overlap = overlap;
		ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
	}
	for (int r = 0; r < n; r++) {
		pthread_join(th[r], NULL);
		ck_assert_msg(!args[r].err[0], "rank %d: %s", r, args[r].err);
	}
	comm_world_destroy(world);
}

static void ranks_match_cpu(int n)
{
	struct rank_arg g[8], c[8];

	run_ranks(n, &ops_cuda, 0, g);
	run_ranks(n, &ops_cpu, 0, c);
	for (int r = 0; r < n; r++)
		for (int k = 0; k < STEPS; k++)
			assert_close(g[r].losses[k], c[r].losses[k], "rank loss", k);
	/* every replica applied the same averaged gradient: identical bits */
	for (int r = 1; r < n; r++) {
		ck_assert_msg(g[r].param_sum == g[0].param_sum, "gpu replica %d drifted", r);
		ck_assert_msg(c[r].param_sum == c[0].param_sum, "cpu replica %d drifted", r);
	}
}

START_TEST(test_two_ranks_on_one_gpu_match_the_cpu)
{
	ranks_match_cpu(2);
}
END_TEST

START_TEST(test_four_ranks_on_one_gpu_match_the_cpu)
{
	ranks_match_cpu(4);
}
END_TEST

/*
 * parallel.overlap on GPU ranks: two ranks on the one GPU, each layer's
 * gradients all-reduced by a thread of the rank (host-staged) while the
 * backward pass goes on, give the bits of the all-reduce after it.
 */
START_TEST(test_overlapped_all_reduce_on_the_gpu_is_bit_exact)
{
	struct rank_arg after[2], over[2];

	run_ranks(2, &ops_cuda, 0, after);
	run_ranks(2, &ops_cuda, 1, over);
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < STEPS; k++)
			ck_assert_msg(after[r].losses[k] == over[r].losses[k],
				      "rank %d step %d: loss %.9g overlapped, %.9g after", r, k,
				      over[r].losses[k], after[r].losses[k]);
		ck_assert_msg(after[r].param_sum == over[r].param_sum, "rank %d: parameters differ", r);
	}
}
END_TEST

/*
 * NCCL itself on this machine's one GPU: a world of one rank (NCCL refuses
 * two ranks on one GPU) still runs every NCCL call the device communicator
 * makes, on device buffers, with its results checked; host buffers on the
 * same communicator still go to the host backend.
 */
START_TEST(test_nccl_collectives_on_one_gpu)
{
	struct comm_world *world = comm_world_create(1);
	struct comm_device_memory mem = {
		.is_device = kernels_cuda_is_device_ptr,
		.to_host = ops_cuda.download, .to_device = ops_cuda.upload,
		.host_alloc = ops_cuda.host_alloc, .host_free = ops_cuda.host_free,
		.device_id = "this machine/gpu 0",
	};
	float h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, back[8], *d, *d2;
	struct comm *w, *half;
	char err[256] = "";
	int32_t flag = 3;

	use_gpu();
	ck_assert_int_eq(comm_device_wrap(comm_world_rank(world, 0), &mem, COMM_DEVICE_NCCL, &w, err,
					  sizeof err), 0);
	ck_assert_msg(!strncmp(comm_device_describe(w), "nccl", 4), "%s", comm_device_describe(w));
	d = ops_cuda.alloc(sizeof h);
	d2 = ops_cuda.alloc(sizeof h);
	ops_cuda.upload(d, h, sizeof h);
	ck_assert_int_eq(comm_allreduce(w, d, 8, COMM_FLOAT32, COMM_SUM), 0);
	ck_assert_int_eq(comm_broadcast(w, d, 8, COMM_FLOAT32, 0), 0);
	ck_assert_int_eq(comm_reduce_scatter(w, d, d2, 8, COMM_FLOAT32, COMM_SUM), 0);
	ck_assert_int_eq(comm_allgather(w, d2, d, 8, COMM_FLOAT32), 0);
	ops_cuda.download(back, d, sizeof back);
	ck_assert(!memcmp(h, back, sizeof h)); /* one rank: every collective is the identity */
	ck_assert_int_eq(comm_allreduce(w, &flag, 1, COMM_INT32, COMM_MAX), 0); /* a host scalar */
	ck_assert_int_eq(flag, 3);
	/* a group split from it gets its own NCCL communicator */
	ck_assert_int_eq(comm_split(w, 0, 0, &half), 0);
	ck_assert_ptr_nonnull(half);
	ck_assert_int_eq(comm_allreduce(half, d, 8, COMM_FLOAT32, COMM_SUM), 0);
	ops_cuda.download(back, d, sizeof back);
	ck_assert(!memcmp(h, back, sizeof h));
	comm_free(half);
	comm_free(w);
	ops_cuda.free(d);
	ops_cuda.free(d2);
	comm_world_destroy(world);
}
END_TEST

/* ------------------------------------------- tensor parallelism on the GPU */

struct tp_arg {
	struct comm *comm;
	int k;                 /* slice k of 2 */
	float losses[STEPS];
	char err[320];         /* room for the model's 256 and where */
};

/* One step without clipping (the norm would need the group): zero, forward, backward, AdamW. */
static float plain_step(struct gpt2 *m, struct adamw_state *s, int k)
{
	int tok[B * T + 1];
	float loss;

	batch(tok, k, 0);
	ck_assert_int_eq(gpt2_zero_grad(m), 0);
	loss = gpt2_forward(m, tok, tok + 1, B, T);
	if (isnan(loss) || gpt2_backward(m, 1.0f))
		return NAN;
	adamw_step_model(s, &hp, 1e-3f, m);
	return loss;
}

/* A tensor-parallel rank on the one GPU: its slice of every layer, the vocabulary's too. */
static void *tp_main(void *p)
{
	struct tp_arg *a = p;
	struct comm_device_memory mem = {
		.is_device = kernels_cuda_is_device_ptr,
		.to_host = ops_cuda.download, .to_device = ops_cuda.upload,
		.host_alloc = ops_cuda.host_alloc, .host_free = ops_cuda.host_free,
		.device_id = "this machine/gpu 0",
	};
	struct comm *w = NULL;
	struct gpt2_shard h;
	struct gpt2 m;
	struct adamw_state s;

	use_gpu();
	if (comm_device_wrap(a->comm, &mem, COMM_DEVICE_AUTO, &w, a->err, sizeof a->err))
		return NULL;
	gpt2_shard_whole(model_cfg, &h);
	h.tp_rank = a->k;
	h.tp_size = 2;
	h.tp = w;
	if (gpt2_build_shard(&m, model_cfg, &h, 1337) || adamw_init(&s, m.num_params) ||
	    gpt2_set_backend(&m, &ops_cuda) || adamw_move(&s, &ops_cuda)) {
		snprintf(a->err, sizeof a->err, "set-up: %s", m.err);
		return NULL;
	}
	for (int k = 0; k < STEPS && !a->err[0]; k++)
		if (isnan(a->losses[k] = plain_step(&m, &s, k)))
			snprintf(a->err, sizeof a->err, "step %d: %s", k, m.err);
	gpt2_free(&m);
	adamw_free(&s);
	comm_free(w);
	return NULL;
}

/*
 * parallel.tensor: 2 on the GPU: two ranks sharing the one GPU (the
 * host-staged communicator carries the activations' all-reduces, each
 * row's softmax maximum and sum, and the losses), GPT-2 (tied embedding:
 * the vocabulary-parallel embedding and head) and the Llama (GQA, untied),
 * track the whole model on the GPU within 1e-4 over 20 steps.
 */
START_TEST(test_tensor_parallel_on_one_gpu_tracks_the_whole_model)
{
	struct comm_world *world = comm_world_create(2);
	struct tp_arg a[2];
	pthread_t th[2];
	struct gpt2 g;
	struct adamw_state gs;

	use_gpu();
	model_cfg = _i ? &small_llama : &small;
	ck_assert_ptr_nonnull(world);
	for (int k = 0; k < 2; k++) {
		memset(&a[k], 0, sizeof a[k]);
		a[k].comm = comm_world_rank(world, k);
		a[k].k = k;
		ck_assert_int_eq(pthread_create(&th[k], NULL, tp_main, &a[k]), 0);
	}
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		ck_assert_msg(!a[k].err[0], "tensor-parallel rank %d: %s", k, a[k].err);
	}
	comm_world_destroy(world);
	make(&g, &gs, &ops_cuda);
	for (int k = 0; k < STEPS; k++) {
		float whole = plain_step(&g, &gs, k);

		ck_assert_msg(a[0].losses[k] == a[1].losses[k], "step %d: the slices' losses differ", k);
		ck_assert_msg(fabsf(a[0].losses[k] - whole) <= REL_TOL * fabsf(whole),
			      "%s step %d: tp 2 %.8f, whole %.8f", _i ? "llama" : "gpt-2", k,
			      a[0].losses[k], whole);
	}
	model_cfg = &small;
	gpt2_free(&g);
	adamw_free(&gs);
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
		printf("check_train_cuda: skipped: no CUDA device visible (%s)\n",
		       kernels_cuda_versions());
		return 77;
	}
	s = suite_create("train_cuda");
	tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_twenty_steps_match_the_cpu, 0, 4);
	tcase_add_loop_test(tc, test_bf16_tracks_fp32_over_200_steps, 0, 4);
	tcase_add_test(tc, test_recompute_is_bit_exact_on_the_gpu);
	tcase_add_test(tc, test_state_moves_between_gpu_and_cpu);
	tcase_add_test(tc, test_fresh_state_made_on_the_gpu_equals_one_moved_there);
	tcase_add_test(tc, test_two_ranks_on_one_gpu_match_the_cpu);
	tcase_add_test(tc, test_four_ranks_on_one_gpu_match_the_cpu);
	tcase_add_test(tc, test_overlapped_all_reduce_on_the_gpu_is_bit_exact);
	tcase_add_test(tc, test_nccl_collectives_on_one_gpu);
	tcase_add_loop_test(tc, test_tensor_parallel_on_one_gpu_tracks_the_whole_model, 0, 2);
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
