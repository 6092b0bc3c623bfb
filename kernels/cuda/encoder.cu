/*
 * kernels/cuda/encoder.cu - token + position embedding and its backward
 * (no position embedding when wpe is NULL: Llama's positions are rotary).
 *
 * The backward adds each position's gradient row into its token's row of
 * dwte. Tokens repeat, so threads would collide on rows; atomicAdd would
 * make the sum's order (and its bits) depend on timing. Instead the B*T
 * token ids (a few KiB) come to the host once, a counting sort groups the
 * positions by token in position order, and one block per distinct token
 * adds its positions' rows in that order: the same sequence of additions
 * as the CPU backend's, so the same bits.
 *
 * The vocabulary-parallel pair (tensor parallelism: this rank holds rows
 * [v0, v0 + vn) of wte) gathers only its own rows, zeros elsewhere, and
 * sorts only the positions whose token is its own.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"

#include <climits>
#include <cstdlib>
#include <vector>

/*
 * out (N, C) = wte[inp[n]] + wpe[n % T]: one thread per element. Without
 * wpe the token's row is copied as is, not added to 0 (which would turn
 * -0 into +0): the CPU's bits.
 */
__global__ static void encoder_forward_kernel(float *out, const int *inp, const float *wte,
					      const float *wpe, int N, int T, int C)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * C) {
		int n = (int)(i / C), c = (int)(i % C);
		float te = wte[(size_t)inp[n] * C + c];

		out[i] = wpe ? te + wpe[(size_t)(n % T) * C + c] : te;
	}
}

void cuda_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B,
			  int T, int C)
{
	size_t n = (size_t)B * T * C;

	if (!n)
		return;
	encoder_forward_kernel<<<grid_for(n), BLOCK>>>(out, inp, wte, wpe, B * T, T, C);
	LAUNCHED("encoder_forward");
}

/* dwpe[t][c] += sum over b of dout[b][t][c], b in order: one thread per (t, c). */
__global__ static void wpe_backward_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)T * C) {
		float acc = dwpe[i];

		for (int b = 0; b < B; b++)
			acc += dout[(size_t)b * T * C + i];
		dwpe[i] = acc;
	}
}

/*
 * Block k owns distinct token tokens[k], whose positions are
 * pos[start[k] .. start[k+1]); its threads stride over the channels.
 */
__global__ static void wte_backward_kernel(float *dwte, const float *dout, const int *tokens,
					   const int *start, const int *pos, int C)
{
	int k = blockIdx.x;
	float *row = dwte + (size_t)tokens[k] * C;

	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float acc = row[c];

		for (int j = start[k]; j < start[k + 1]; j++)
			acc += dout[(size_t)pos[j] * C + c];
		row[c] = acc;
	}
}

/*
 * dwte (rows of the tokens in [v0, v0 + vn), row tok - v0) and dwpe: the
 * whole vocabulary is v0 = 0, vn = INT_MAX.
 */
static void encoder_backward_rows(float *dwte, float *dwpe, const float *dout, const int *inp,
				  int B, int T, int C, int v0, int vn)
{
	int N = B * T, distinct = 0, kept = 0;
	std::vector<int> tok(N), order, tokens, start;
	int *dev;

	if (N <= 0 || C <= 0)
		return;
	if (dwpe) {
		wpe_backward_kernel<<<grid_for((size_t)T * C), BLOCK>>>(dwpe, dout, B, T, C);
		LAUNCHED("encoder_backward wpe");
	}

	/* counting sort of the positions by row, stable (position order kept) */
	cuda_download(tok.data(), inp, (size_t)N * sizeof(int));
	int vmax = -1;
	for (int n = 0; n < N; n++) {
		tok[n] = tok[n] >= v0 && tok[n] - v0 < vn ? tok[n] - v0 : -1;
		vmax = tok[n] > vmax ? tok[n] : vmax;
		kept += tok[n] >= 0;
	}
	if (!kept)
		return;
	std::vector<int> count((size_t)vmax + 2, 0);
	for (int n = 0; n < N; n++)
		if (tok[n] >= 0)
			count[(size_t)tok[n] + 1]++;
	for (int v = 0; v <= vmax; v++) {
		if (count[(size_t)v + 1]) {
			tokens.push_back(v);
			start.push_back(count[(size_t)v]);
			distinct++;
		}
		count[(size_t)v + 1] += count[(size_t)v];
	}
	start.push_back(kept);
	order.resize((size_t)kept);
	for (int n = 0; n < N; n++)
		if (tok[n] >= 0)
			order[(size_t)count[(size_t)tok[n]]++] = n;

	/* one upload: tokens, start (distinct + 1), positions */
	std::vector<int> packed;
	packed.reserve((size_t)2 * distinct + 1 + kept);
	packed.insert(packed.end(), tokens.begin(), tokens.end());
	packed.insert(packed.end(), start.begin(), start.end());
	packed.insert(packed.end(), order.begin(), order.end());
	/*
	 * The most the slot can need, 3N + 1 (distinct <= N), not this batch's
	 * size: sized once, in the first step, it never grows (cudaFree waits for
	 * the whole device) while parallel.overlap's thread has NCCL kernels in
	 * flight.
	 */
	dev = (int *)cuda_scratch(SCRATCH_TOKENS, ((size_t)3 * N + 1) * sizeof(int));
	cuda_upload(dev, packed.data(), packed.size() * sizeof(int));
	wte_backward_kernel<<<distinct, 128>>>(dwte, dout, dev, dev + distinct,
					       dev + 2 * distinct + 1, C);
	LAUNCHED("encoder_backward wte");
}

void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			   int T, int C)
{
	encoder_backward_rows(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX);
}

/* out (N, C) = wte[inp[n] - v0] where the token is this rank's, else 0. */
__global__ static void vocab_encoder_forward_kernel(float *out, const int *inp, const float *wte,
						    int N, int C, int v0, int vn)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)N * C) {
		int n = (int)(i / C), c = (int)(i % C), v = inp[n] - v0;

		out[i] = v >= 0 && v < vn ? wte[(size_t)v * C + c] : 0.0f;
	}
}

void cuda_vocab_encoder_forward(float *out, const int *inp, const float *wte, int N, int C,
				int v0, int vn)
{
	size_t n = (size_t)N * C;

	if (!n)
		return;
	vocab_encoder_forward_kernel<<<grid_for(n), BLOCK>>>(out, inp, wte, N, C, v0, vn);
	LAUNCHED("vocab_encoder_forward");
}

void cuda_vocab_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
				 int B, int T, int C, int v0, int vn)
{
	encoder_backward_rows(dwte, dwpe, dout, inp, B, T, C, v0, vn);
}
