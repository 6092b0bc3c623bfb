/*
 * t/unit/check_attention_mma.cc - the register-tile bf16 attention kernels
 * (kernels/cuda/flash_attention_mma.cu) run on the CPU by
 * t/unit/warp_emulation.h, against the attention computed in double:
 * forward (the output and the rows' max and exp-sum) and backward (dq, dk,
 * dv added into what dqkv held), at sizes that cross every edge of the
 * tiles: one row, rows that end inside a warp's 16 and a block's 64, heads
 * narrower than their tile (6, 8 and 48 wide in tiles of 32 and 64; 6 is
 * loaded a float at a time, the others in float4s), several key tiles,
 * batches and heads. bf16 rounds q, k, v, the weights and the
 * score gradients to 8 significant bits and the sums are fp32: within 3%
 * of the largest value; a wrong fragment, mask or offset is off by tens of
 * percent.
 *
 * This checks the kernels' arithmetic as the PTX ISA describes the mma
 * fragments; t/gpu/check_ops_cuda.c runs the same kernels on a GPU.
 */
#include "config.h"
#include "t/unit/warp_emulation.h"
#include "kernels/cuda/flash_attention_mma.cu"

#include <check.h>
#include <cstdio>
#include <vector>

struct att_size {
	int B, T, NH, HS;
};
static const att_size sizes[] = {
	{ 2, 1, 3, 8 }, { 1, 17, 2, 8 }, { 2, 64, 2, 32 }, { 1, 130, 1, 64 }, { 1, 200, 1, 48 },
	{ 1, 33, 2, 6 }, /* rows of 6 floats: not whole float4s, the loads one float at a time */
};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Uniform in [-1, 1) from a fixed sequence: the same inputs every run. */
static float next_uniform(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)(*s >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

struct attention_case {
	int B, T, NH, HS;
	size_t C;
	std::vector<float> qkv, dout, out, stats, rowdot, dqkv;
	std::vector<double> want_out, want_max, want_sum, want_dqkv;
};

/* One (batch, head) of the reference: softmax(q k^T / sqrt(HS), causal) v and its gradients. */
static void reference_head(attention_case &a, int b, int h)
{
	size_t C = a.C;
	double scale = 1.0 / sqrt((double)a.HS);
	auto at = [&](int t, int part, int d) { return ((size_t)b * a.T + t) * 3 * C + part * C + (size_t)h * a.HS + d; };
	auto at_out = [&](int t, int d) { return ((size_t)b * a.T + t) * C + (size_t)h * a.HS + d; };

	for (int i = 0; i < a.T; i++) {
		std::vector<double> p(i + 1), dp(i + 1);
		double mx = -1e300, sum = 0.0, rowdot = 0.0;

		for (int j = 0; j <= i; j++) {
			double s = 0.0;

			for (int d = 0; d < a.HS; d++)
				s += (double)a.qkv[at(i, 0, d)] * a.qkv[at(j, 1, d)];
			p[j] = s * scale;
			mx = std::max(mx, p[j]);
		}
		for (int j = 0; j <= i; j++)
			sum += p[j] = exp(p[j] - mx);
		a.want_max[((size_t)b * a.NH + h) * a.T + i] = mx;
		a.want_sum[((size_t)b * a.NH + h) * a.T + i] = sum;
		for (int j = 0; j <= i; j++) {
			double s = 0.0;

			p[j] /= sum;
			for (int d = 0; d < a.HS; d++)
				s += (double)a.dout[at_out(i, d)] * a.qkv[at(j, 2, d)];
			dp[j] = s;
			rowdot += p[j] * s;
		}
		for (int d = 0; d < a.HS; d++) {
			double o = 0.0;

			for (int j = 0; j <= i; j++)
				o += p[j] * a.qkv[at(j, 2, d)];
			a.want_out[at_out(i, d)] = o;
		}
		for (int j = 0; j <= i; j++) {
			double ds = p[j] * (dp[j] - rowdot) * scale;

			for (int d = 0; d < a.HS; d++) {
				a.want_dqkv[at(i, 0, d)] += ds * a.qkv[at(j, 1, d)];
				a.want_dqkv[at(j, 1, d)] += ds * a.qkv[at(i, 0, d)];
				a.want_dqkv[at(j, 2, d)] += p[j] * a.dout[at_out(i, d)];
			}
		}
	}
}

/* Random q, k, v, dout and a dqkv that already holds something; the reference in double. */
static attention_case make_case(const att_size &z)
{
	attention_case a;
	uint64_t seed = 42;
	size_t rows = (size_t)z.B * z.NH * z.T;

	a.B = z.B, a.T = z.T, a.NH = z.NH, a.HS = z.HS, a.C = (size_t)z.NH * z.HS;
	a.qkv.resize((size_t)z.B * z.T * 3 * a.C);
	a.dout.resize((size_t)z.B * z.T * a.C);
	a.dqkv.resize(a.qkv.size());
	for (auto &x : a.qkv)
		x = next_uniform(&seed);
	for (auto &x : a.dout)
		x = next_uniform(&seed);
	for (auto &x : a.dqkv)
		x = 0.5f * next_uniform(&seed);
	a.out.assign(a.dout.size(), 0.0f);
	a.stats.assign(rows * OPS_ATT_STATS, 0.0f);
	a.rowdot.assign(rows, 0.0f);
	a.want_out.assign(a.out.size(), 0.0);
	a.want_max.assign(rows, 0.0);
	a.want_sum.assign(rows, 0.0);
	a.want_dqkv.assign(a.dqkv.begin(), a.dqkv.end());
	for (int b = 0; b < z.B; b++)
		for (int h = 0; h < z.NH; h++)
			reference_head(a, b, h);
	return a;
}

/* The worst |got - want| over the largest |want|, and checks it is below 3%. */
template <typename G>
static double check_close(const G &got, const std::vector<double> &want, const char *what,
			  const att_size &z)
{
	double worst = 0.0, largest = 1e-30;

	for (size_t i = 0; i < want.size(); i++) {
		worst = std::max(worst, fabs((double)got[i] - want[i]));
		largest = std::max(largest, fabs(want[i]));
	}
	ck_assert_msg(worst / largest < 3e-2, "%s B=%d T=%d NH=%d HS=%d: off by %.3g of %.3g", what,
		      z.B, z.T, z.NH, z.HS, worst, largest);
	return worst / largest;
}

template <int D>
static void run_kernels(attention_case &a)
{
	unsigned gx = (a.T + MR - 1) / MR, gy = a.B * a.NH;
	float scale = 1.0f / sqrtf((float)a.HS);

	warp_emulated_launch(gx, gy, MT, forward_bytes<D>(), [&] {
		mma_forward_kernel<D>(a.out.data(), a.stats.data(), a.qkv.data(), a.T, a.NH, a.HS, scale);
	});
	/* rowsum(dout * out), as flash_attention.cu's rowdot kernel gives it */
	for (int b = 0; b < a.B; b++)
		for (int t = 0; t < a.T; t++)
			for (int h = 0; h < a.NH; h++) {
				size_t at = ((size_t)b * a.T + t) * a.C + (size_t)h * a.HS;
				float s = 0.0f;

				for (int d = 0; d < a.HS; d++)
					s += a.dout[at + d] * a.out[at + d];
				a.rowdot[((size_t)b * a.NH + h) * a.T + t] = s;
			}
	warp_emulated_launch(gx, gy, MT, backward_kv_bytes<D>(), [&] {
		mma_backward_kv_kernel<D>(a.dqkv.data(), a.dout.data(), a.qkv.data(), a.stats.data(),
					  a.rowdot.data(), a.T, a.NH, a.HS, scale);
	});
	warp_emulated_launch(gx, gy, MT, backward_q_bytes<D>(), [&] {
		mma_backward_q_kernel<D>(a.dqkv.data(), a.dout.data(), a.qkv.data(), a.stats.data(),
					 a.rowdot.data(), a.T, a.NH, a.HS, scale);
	});
}

START_TEST(test_mma_attention_equals_the_reference)
{
	const att_size &z = sizes[_i];
	attention_case a = make_case(z);
	std::vector<double> got_max(a.want_max.size()), got_sum(a.want_sum.size());
	double worst_out, worst_dqkv;

	if (z.HS <= 32)
		run_kernels<32>(a);
	else
		run_kernels<64>(a);
	for (size_t r = 0; r < got_max.size(); r++) {
		got_max[r] = a.stats[r * OPS_ATT_STATS];
		got_sum[r] = a.stats[r * OPS_ATT_STATS + 1];
	}
	worst_out = check_close(a.out, a.want_out, "out", z);
	check_close(got_max, a.want_max, "rows' max", z);
	check_close(got_sum, a.want_sum, "rows' exp-sum", z);
	worst_dqkv = check_close(a.dqkv, a.want_dqkv, "dqkv", z);
	printf("mma attention (emulated) B=%d T=%d NH=%d HS=%d: out within %.2g, dqkv within %.2g\n",
	       z.B, z.T, z.NH, z.HS, worst_out, worst_dqkv);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("attention_mma");
	TCase *tc = tcase_create("emulated");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_mma_attention_equals_the_reference, 0, NSIZES);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
