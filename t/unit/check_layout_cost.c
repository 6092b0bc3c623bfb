/*
 * t/unit/check_layout_cost.c - what a layout costs (daemon/engine/parallel/layout_cost.c):
 * memory as storkd allocates it, FLOPs as bench train counts them, the
 * bytes each kind of link carries, the 1F1B bubble, and the step of a
 * machine whose ranks share its cores.
 *
 * The model is the test suite's small GPT-2 (4 layers, 4 heads, 64
 * channels, vocabulary 257 padded to 384); the machines are made up, with
 * round figures, so that every expected value is a formula of the sizes.
 */
#include "config.h"
#include "daemon/engine/bench/bench_train.h"
#include "daemon/engine/parallel/layout_cost.h"

#include <check.h>
#include <math.h>
#include <string.h>

static const struct gpt2_config tiny = { .max_seq_len = 64, .vocab_size = 257,
					 .padded_vocab_size = 384, .num_layers = 4,
					 .num_heads = 4, .channels = 64 };

enum { B = 2, T = 32 };

/* A machine of free links and 1 GFLOP/s per rank (GPU-like: no shared cores). */
static struct cost_machine machine(int nodes, int per_node)
{
	return (struct cost_machine){ .nodes = nodes, .ranks_per_node = per_node, .gpu = 1,
				      .nodes_per_machine = 1, .threads_per_rank = 1,
				      .flops_per_s = 1e9, .update_s_per_param = 0,
				      .intra = { 0, 1e30 }, .inter = { 0, 1e30 } };
}

static struct cost_layout layout(int tp, int pp, int dp, int micro)
{
	return (struct cost_layout){ .tp = tp, .pp = pp, .dp = dp, .B = B, .T = T,
				     .micro = micro, .recompute = GPT2_RECOMPUTE_NONE };
}

static size_t whole_params(void)
{
	struct gpt2_shard s;
	size_t sizes[GPT2_NUM_TENSORS];

	gpt2_shard_whole(&tiny, &s);
	return gpt2_shard_sizes(&tiny, &s, sizes);
}

static void estimate(const struct cost_layout *l, const struct cost_machine *x,
		     struct cost_estimate *e)
{
	char err[256];

	ck_assert_msg(layout_estimate(&tiny, l, x, e, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_memory_is_what_storkd_allocates)
{
	struct par_layout pl;
	struct rank_memory m;
	struct gpt2_shard s;
	size_t n = whole_params();
	char err[256];

	ck_assert_int_eq(layout_make(&pl, &tiny, 1, 1, 1, 0, NULL, T, 0, err, sizeof err), 0);
	layout_rank_memory(&tiny, &pl, B, T, 4, 0, GPT2_RECOMPUTE_NONE, &m);
	gpt2_shard_whole(&tiny, &s);
	ck_assert_uint_eq(m.params, n);
	ck_assert_uint_eq(m.grads, n);
	ck_assert_uint_eq(m.optimizer, 2 * n);
	ck_assert_uint_eq(m.activations, gpt2_activation_floats(&tiny, &s, B, T, GPT2_RECOMPUTE_NONE));
	ck_assert_uint_eq(layout_memory_floats(&m), 4 * n + m.activations);
	/* ZeRO-1 over 4 replicas: a quarter of the moments (rounded up per segment), padded gradients */
	ck_assert_int_eq(layout_make(&pl, &tiny, 4, 1, 1, 1, NULL, T, 0, err, sizeof err), 0);
	layout_rank_memory(&tiny, &pl, B, T, 1, 0, GPT2_RECOMPUTE_NONE, &m);
	ck_assert_uint_le(m.optimizer, 2 * (n / 4 + 2));
	ck_assert_uint_ge(m.optimizer, 2 * (n / 4 - 2));
	/* padded gradients, and the reduce-scatter's receive buffer of a part */
	ck_assert_uint_gt(m.grads, n + 4);
	ck_assert_uint_le(m.grads, n + 4 + n / 4 + 2);
	/* ZeRO-3: what a rank keeps of the parameters and gradients, less than the whole */
	ck_assert_int_eq(layout_make(&pl, &tiny, 4, 1, 1, 3, NULL, T, 0, err, sizeof err), 0);
	layout_rank_memory(&tiny, &pl, B, T, 1, 0, GPT2_RECOMPUTE_NONE, &m);
	ck_assert_uint_eq(m.params, m.grads);
	ck_assert_uint_lt(m.params, n);
	ck_assert_uint_gt(m.params, n / 4);
	/* 1F1B: stage 0 of 2 keeps 2 micro-batches' activations, the last stage one */
	ck_assert_int_eq(layout_make(&pl, &tiny, 2, 1, 2, 0, NULL, T, 0, err, sizeof err), 0);
	layout_rank_memory(&tiny, &pl, B, T, 8, 0, GPT2_RECOMPUTE_NONE, &m);
	layout_shard(&pl, &s);
	ck_assert_uint_eq(m.activations,
			  2 * gpt2_activation_floats(&tiny, &s, B, T, GPT2_RECOMPUTE_NONE));
}
END_TEST

START_TEST(test_flops_are_bench_trains_and_recompute_adds_a_forward_pass)
{
	struct gpt2_shard s, half;
	double C = tiny.channels, L = tiny.num_layers, block = 12 * C * C + 13 * C;

	gpt2_shard_whole(&tiny, &s);
	ck_assert_double_eq_tol(layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_NONE),
				bench_flops_per_token(&tiny, whole_params(), T), 1e-6);
	ck_assert_double_eq_tol(layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_BLOCK) -
					layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_NONE),
				2 * L * block + 4 * L * C * T, 1e-6);
	ck_assert_double_eq(layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_GELU),
			    layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_NONE));
	/* a tensor-parallel half: half of the split products and of the attention */
	half = s;
	half.tp_size = 2;
	ck_assert_double_lt(layout_shard_flops(&tiny, &half, T, GPT2_RECOMPUTE_NONE),
			    0.55 * layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_NONE));
	/* a first stage of a tied model holds the token embedding but never multiplies by it */
	half = s;
	half.last_layer = 2;
	ck_assert_double_eq_tol(layout_shard_flops(&tiny, &half, T, GPT2_RECOMPUTE_NONE),
				6 * 2 * block + 12 * 2 * C * T, 1e-6);
}
END_TEST

START_TEST(test_data_parallel_bytes_by_link)
{
	struct cost_machine one = machine(1, 4), two = machine(2, 2);
	struct cost_layout l = layout(1, 1, 4, 1);
	struct cost_estimate e;
	double n = (double)whole_params();

	estimate(&l, &one, &e);
	ck_assert_double_eq_tol(e.intra_bytes, 2.0 * 3 / 4 * 4 * n, 1);
	ck_assert_double_eq(e.inter_bytes, 0);
	estimate(&l, &two, &e);
	ck_assert_double_eq_tol(e.intra_bytes, 4 * n, 1);  /* 2 (j-1)/j, j = 2 */
	ck_assert_double_eq_tol(e.inter_bytes, 4 * n, 1);  /* 2 (k-1)/k, k = 2 */
}
END_TEST

/*
 * A node's ranks that move bytes between nodes at once share its link:
 * DP4 on 2 nodes x 2 all-reduces through one leader per node; TP2xDP2
 * has both tensor slices of a node all-reduce with the other node; in
 * PP2xDP2 both replicas of a stage send their activations at once.
 */
START_TEST(test_ranks_of_a_node_share_its_link)
{
	struct cost_machine x = machine(2, 2);
	struct cost_layout dp4 = layout(1, 1, 4, 1), tp2dp2 = layout(2, 1, 2, 1);
	struct cost_layout pp2dp2 = layout(1, 2, 2, 2);
	struct cost_estimate e;
	double btc = 4.0 * B * T * tiny.channels;

	x.inter = (struct link_figure){ 0, 1e9 };
	estimate(&dp4, &x, &e);
	ck_assert_double_gt(e.inter_bytes, 0);
	ck_assert_double_eq_tol(e.dp_s, e.inter_bytes / 1e9, 1e-12);
	estimate(&tp2dp2, &x, &e);
	ck_assert_double_gt(e.inter_bytes, 0);
	ck_assert_double_eq_tol(e.dp_s, 2 * e.inter_bytes / 1e9, 1e-12);
	estimate(&pp2dp2, &x, &e);
	ck_assert_double_eq_tol(e.pipe_comm_s, 2 * 2 * btc / 1e9, 1e-12);
}
END_TEST

START_TEST(test_tensor_parallel_all_reduces_counted_per_layer)
{
	struct cost_machine x = machine(1, 4);
	struct cost_layout l = layout(2, 1, 2, 3);
	struct cost_estimate e;

	x.intra = (struct link_figure){ 1e-3, 1e30 };
	estimate(&l, &x, &e);
	/* per micro-batch: 4 per layer, the embedding's, the head's input's, 3 of the softmax */
	ck_assert_double_eq_tol(e.pipe_comm_s, 3 * (4 * 4 + 2 + 3) * 1e-3, 1e-9);
	ck_assert_double_eq_tol(e.dp_s, 1e-3, 1e-9);
	ck_assert_double_eq_tol(e.small_s, 4e-3, 1e-9);
	l.recompute = GPT2_RECOMPUTE_BLOCK; /* the blocks' forward again: 2 more per layer */
	estimate(&l, &x, &e);
	ck_assert_double_eq_tol(e.pipe_comm_s, 3 * (6 * 4 + 2 + 3) * 1e-3, 1e-9);
}
END_TEST

START_TEST(test_step_of_plain_data_parallelism)
{
	struct cost_machine x = machine(1, 4);
	struct cost_layout l = layout(1, 1, 4, 2);
	struct cost_estimate e;
	double flops = bench_flops_per_token(&tiny, whole_params(), T) * B * T * 2;

	x.update_s_per_param = 1e-9;
	estimate(&l, &x, &e);
	ck_assert_double_eq_tol(e.flops, flops, 1);
	ck_assert_double_eq_tol(e.compute_s, flops / 1e9, 1e-12);
	ck_assert_double_eq_tol(e.update_s, whole_params() * 1e-9, 1e-12);
	ck_assert_double_eq_tol(e.step_s, e.compute_s + e.update_s, 1e-12);
	ck_assert_double_eq_tol(e.tokens_per_s, 4.0 * 2 * B * T / e.step_s, 1e-6);
	ck_assert_double_eq(e.bubble, 0);
}
END_TEST

START_TEST(test_pipeline_bubble_follows_1f1b)
{
	struct cost_machine x = machine(1, 2);
	struct cost_layout l = layout(1, 2, 1, 2);
	struct cost_estimate e2, e8;

	l.split = "compute";
	estimate(&l, &x, &e2);
	l.micro = 8;
	estimate(&l, &x, &e8);
	/* (P-1)/(m+P-1) for equal stages; a little more for unequal ones */
	ck_assert_double_ge(e2.bubble, 1.0 / 3 - 1e-9);
	ck_assert_double_lt(e2.bubble, 1.0 / 3 + 0.1);
	ck_assert_double_ge(e8.bubble, 1.0 / 9 - 1e-9);
	ck_assert_double_lt(e8.bubble, e2.bubble);
	/* the time a stage computes, on average: between the cheaper stage's and the dearer's */
	ck_assert_double_le(e8.compute_s * (1 - e8.bubble), e8.flops / 1e9 + 1e-12);
	ck_assert_double_gt(e8.compute_s * (1 - e8.bubble), 0.8 * e8.flops / 1e9);
}
END_TEST

START_TEST(test_ranks_sharing_cores_take_the_machines_work)
{
	struct cost_machine x = machine(1, 4), two = machine(2, 2);
	struct cost_layout l = layout(1, 2, 2, 2);
	struct cost_estimate alone, shared, apart;
	double work = 0;
	char err[256];

	for (int stage = 0; stage < 2; stage++) { /* ranks 0, 1: stage 0; 2, 3: stage 1 */
		struct par_layout pl;
		struct gpt2_shard s;

		ck_assert_int_eq(layout_make(&pl, &tiny, 4, 1, 2, 0, NULL, T, 2 * stage, err,
					     sizeof err), 0);
		layout_shard(&pl, &s);
		work += 2 * layout_shard_flops(&tiny, &s, T, GPT2_RECOMPUTE_NONE) * B * T * 2 / 1e9;
	}
	estimate(&l, &x, &alone);
	x.gpu = 0;
	x.cores = 2;
	estimate(&l, &x, &shared);
	/* 4 ranks on 2 cores: the cores are the limit, and they idle through
	 * the pipeline's fill and drain as the stages do (GPT-2 124M on the
	 * test cluster: PP2xDP2 took 1.6 times DP4's step, the same work) */
	ck_assert_double_gt(shared.step_s, alone.step_s);
	ck_assert_double_gt(shared.bubble, 0.1);
	ck_assert_double_eq_tol(shared.floor_s, work / 2 / (1 - shared.bubble), 1e-12);
	ck_assert_double_eq(shared.step_s, shared.floor_s);
	/* two nodes of one machine (a test cluster) share its 2 cores like one node */
	two.gpu = 0;
	two.cores = 2;
	two.nodes_per_machine = 2;
	estimate(&l, &two, &apart);
	ck_assert_double_eq_tol(apart.floor_s, shared.floor_s, 1e-9);
	two.nodes_per_machine = 1;
	estimate(&l, &two, &apart);
	ck_assert_double_eq(apart.floor_s, 0);
}
END_TEST

START_TEST(test_impossible_layouts_are_refused)
{
	struct cost_machine x = machine(1, 4);
	struct cost_layout l = layout(3, 1, 1, 1);
	struct cost_estimate e;
	char err[256];

	ck_assert_int_eq(layout_estimate(&tiny, &l, &x, &e, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "dp 1 x tp 3 x pp 1"));
	l = layout(4, 1, 1, 1);
	x = machine(1, 4);
	l.tp = 8, l.dp = 1;
	x.ranks_per_node = 8;
	ck_assert_int_eq(layout_estimate(&tiny, &l, &x, &e, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "parallel.tensor (8)"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("layout_cost");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_memory_is_what_storkd_allocates);
	tcase_add_test(tc, test_flops_are_bench_trains_and_recompute_adds_a_forward_pass);
	tcase_add_test(tc, test_data_parallel_bytes_by_link);
	tcase_add_test(tc, test_ranks_of_a_node_share_its_link);
	tcase_add_test(tc, test_tensor_parallel_all_reduces_counted_per_layer);
	tcase_add_test(tc, test_step_of_plain_data_parallelism);
	tcase_add_test(tc, test_pipeline_bubble_follows_1f1b);
	tcase_add_test(tc, test_ranks_sharing_cores_take_the_machines_work);
	tcase_add_test(tc, test_impossible_layouts_are_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
