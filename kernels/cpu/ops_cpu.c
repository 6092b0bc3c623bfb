/*
 * kernels/cpu/ops_cpu.c - the CPU backend of kernels/ops.h: the table of the
 * layer files beside it (encoder.c, layernorm.c, rmsnorm.c, matmul.c,
 * attention.c, rope.c, swiglu.c, softmax_xent.c, vocab_parallel.c,
 * elementwise.c, reduce.c, memory.c; threads.c splits the work).
 *
 * Each layer is a forward/backward pair of plain loops over plain arrays, as
 * in llm.c's train_gpt2.c; the element-wise formulas come from
 * kernels/math.h so that the CUDA backend computes the same thing.
 *
 * Where the time goes: matrix products (about 6 FLOPs per parameter and
 * token) are CBLAS sgemm calls; attention is written as small per-head
 * sgemm calls too (Q K^T, att V and their transposes), which beats a naive
 * dot-product loop by an order of magnitude because gcc does not vectorise
 * float reductions without -ffast-math. Bias, softmax and LayerNorm stay in
 * C; long float sums use a fixed number of partial sums (SUM_LANES) so that
 * they vectorise and still do not depend on the thread count.
 *
 * Threads: OpenBLAS's thread count is process-wide, and storkd runs one
 * worker thread per rank in one process, so OpenBLAS is kept at one thread
 * and this file splits work itself: a matrix product is cut into column
 * blocks (at least 6, about 512 columns each), each a single-threaded sgemm
 * call; every other kernel cuts its rows, channels or elements into blocks
 * (reductions over rows, such as bias and LayerNorm weight gradients, are
 * cut by channel so each sum keeps the serial order). The blocks depend on
 * the problem's sizes only, and the threads take them in turn until none is
 * left, so a thread slowed down by another process on its core does less
 * of the work instead of holding everyone up. The helper threads are
 * created by the calling (rank) thread and inherit its CPU affinity, so a
 * rank only ever runs on its own cores. Each block is computed by one
 * thread the same way whichever thread it is, so results depend neither on
 * scheduling nor on the thread count: runs are bit-reproducible.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

const struct ops ops_cpu = {
	.name = "cpu",
	.set_precision = cpu_set_precision,
	.encoder_forward = cpu_encoder_forward,
	.encoder_backward = cpu_encoder_backward,
	.layernorm_forward = cpu_layernorm_forward,
	.layernorm_backward = cpu_layernorm_backward,
	.matmul_forward = cpu_matmul_forward,
	.matmul_backward = cpu_matmul_backward,
	.attention_forward = cpu_attention_forward,
	.attention_backward = cpu_attention_backward,
	.rmsnorm_forward = cpu_rmsnorm_forward,
	.rmsnorm_backward = cpu_rmsnorm_backward,
	.rope_forward = cpu_rope_forward,
	.rope_backward = cpu_rope_backward,
	.swiglu_forward = cpu_swiglu_forward,
	.swiglu_backward = cpu_swiglu_backward,
	.gelu_forward = cpu_gelu_forward,
	.gelu_backward = cpu_gelu_backward,
	.residual_forward = cpu_residual_forward,
	.residual_layernorm_forward = cpu_residual_layernorm_forward,
	.residual_backward = cpu_residual_backward,
	.softmax_xent_forward = cpu_softmax_xent_forward,
	.softmax_xent_backward = cpu_softmax_xent_backward,
	.softmax_xent_fused = cpu_softmax_xent_fused,
	.vocab_encoder_forward = cpu_vocab_encoder_forward,
	.vocab_encoder_backward = cpu_vocab_encoder_backward,
	.vocab_softmax_max = cpu_vocab_softmax_max,
	.vocab_softmax_exp = cpu_vocab_softmax_exp,
	.vocab_softmax_finish = cpu_vocab_softmax_finish,
	.vocab_xent_backward = cpu_vocab_xent_backward,
	.adamw = cpu_adamw,
	.zero = cpu_zero,
	.scale = cpu_scale,
	.round_bf16 = cpu_round_bf16,
	.sumsq = cpu_sumsq,
	.alloc = cpu_host_alloc,
	.free = cpu_host_free,
	.upload = cpu_host_copy,
	.download = cpu_host_copy,
	.copy = cpu_host_copy,
	.host_alloc = cpu_host_alloc,
	.host_free = cpu_host_free,
	.sync = cpu_host_sync,
	.mem_info = cpu_host_mem_info,
};
