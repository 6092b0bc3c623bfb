/*
 * kernels/cuda/ops_cuda.cu - the CUDA backend of kernels/ops.h: the table
 * of the layer files beside it (device arrays everywhere).
 *
 *   encoder.cu       token + position embedding (deterministic backward)
 *   layernorm.cu     LayerNorm, a warp per row (and fused with the residual before it)
 *   rmsnorm.cu       RMSNorm, a warp per row (Llama)
 *   matmul.cu        linear layers on cuBLAS, bias and its gradient
 *   attention.cu     causal self-attention on batched cuBLAS products
 *   flash_attention.cu  the same fused: tiles in shared memory, online softmax
 *   rope.cu          rotary positions and grouped-query heads (Llama's attention input)
 *   swiglu.cu        SwiGLU, Llama's MLP activation
 *   softmax_xent.cu  softmax + cross-entropy over the padded vocabulary (and fused with its backward)
 *   vocab_parallel.cu  the softmax of a rank holding a slice of the vocabulary (tensor parallelism)
 *   elementwise.cu   GELU, residual, AdamW, zero, scale
 *   reduce.cu        sum of squares and column sums, without atomics
 *   memory.cu        device and pinned host memory, per-thread state
 *
 * Element-wise and per-row formulas are kernels/math.h's, shared with the
 * CPU backend (kernels/cpu), which t/gpu/check_ops_cuda compares with.
 */
#include "config.h"
#include "kernels/cuda/common.cuh"
#include "kernels/ops.h"

static struct ops make_ops_cuda(void)
{
	struct ops o = {};

	o.name = "cuda";
	o.set_precision = cuda_set_precision;
	o.encoder_forward = cuda_encoder_forward;
	o.encoder_backward = cuda_encoder_backward;
	o.layernorm_forward = cuda_layernorm_forward;
	o.layernorm_backward = cuda_layernorm_backward;
	o.matmul_forward = cuda_matmul_forward;
	o.matmul_backward = cuda_matmul_backward;
	o.attention_forward = cuda_attention_forward;
	o.attention_backward = cuda_attention_backward;
	o.attention_fused_forward = cuda_attention_fused_forward;
	o.attention_fused_backward = cuda_attention_fused_backward;
	o.rmsnorm_forward = cuda_rmsnorm_forward;
	o.rmsnorm_backward = cuda_rmsnorm_backward;
	o.rope_forward = cuda_rope_forward;
	o.rope_backward = cuda_rope_backward;
	o.swiglu_forward = cuda_swiglu_forward;
	o.swiglu_backward = cuda_swiglu_backward;
	o.gelu_forward = cuda_gelu_forward;
	o.gelu_backward = cuda_gelu_backward;
	o.residual_forward = cuda_residual_forward;
	o.residual_layernorm_forward = cuda_residual_layernorm_forward;
	o.residual_backward = cuda_residual_backward;
	o.softmax_xent_forward = cuda_softmax_xent_forward;
	o.softmax_xent_backward = cuda_softmax_xent_backward;
	o.softmax_xent_fused = cuda_softmax_xent_fused;
	o.vocab_encoder_forward = cuda_vocab_encoder_forward;
	o.vocab_encoder_backward = cuda_vocab_encoder_backward;
	o.vocab_softmax_max = cuda_vocab_softmax_max;
	o.vocab_softmax_exp = cuda_vocab_softmax_exp;
	o.vocab_softmax_finish = cuda_vocab_softmax_finish;
	o.vocab_xent_backward = cuda_vocab_xent_backward;
	o.adamw = cuda_adamw;
	o.zero = cuda_zero;
	o.scale = cuda_scale;
	o.round_bf16 = cuda_round_bf16;
	o.sumsq = cuda_sumsq;
	o.alloc = cuda_alloc;
	o.free = cuda_free;
	o.upload = cuda_upload;
	o.download = cuda_download;
	o.copy = cuda_copy;
	o.host_alloc = cuda_host_alloc;
	o.host_free = cuda_host_free;
	o.sync = cuda_sync;
	o.mem_info = cuda_mem_info;
	return o;
}

extern "C" const struct ops ops_cuda = make_ops_cuda();
