/*
 * kernels/math.h - the element-wise math of the training engine, written once.
 *
 * Every formula that acts on one element (or one row reduced to a few
 * scalars) lives here as a static inline function. The CPU backend
 * (kernels/cpu) calls them in plain loops; the CUDA backend (kernels/cuda)
 * calls the very same functions from __global__ kernels, because under nvcc
 * they are marked __host__ __device__. The CPU unit tests therefore exercise
 * the formulas the GPU runs.
 *
 * Only float arithmetic and sqrtf are used. The exponential (and tanh, built
 * on it) is math_exp below rather than the C library's expf/tanhf: glibc's
 * tanhf is scalar and slow (it went through expm1f, about 20 ns a call),
 * and no libm call vectorises without -ffast-math, whereas plain float
 * arithmetic does, and gives the same bits on every CPU (kernels/local.mk
 * forbids contracting a * b + c into a fused multiply-add). nvcc does
 * contract, so the GPU agrees with the CPU to rounding, not to the bit.
 */
#ifndef STORK_KERNELS_MATH_H
#define STORK_KERNELS_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MATH_HD __host__ __device__
#else
#define MATH_HD
#endif

/*
 * exp(x) for float x, to about 1 ulp: x = k ln2 + r with |r| <= ln2/2 (ln2
 * split in two parts so k ln2 is exact), exp(r) by its Taylor polynomial of
 * degree 7 (truncation < 1e-8 relative), times 2^k built in the exponent
 * bits. x is clamped to [-87, 88], so the result is a normal float: exp of
 * anything below -87 gives 1.6e-38 instead of a denormal or 0.
 */
static inline MATH_HD float math_exp(float x)
{
	const float shift = 12582912.0f; /* 1.5 * 2^23: x + shift - shift rounds x */
	float kf, r, p;
	union {
		uint32_t u;
		float f;
	} two_k;

	x = x < -87.0f ? -87.0f : x;
	x = x > 88.0f ? 88.0f : x;
	kf = (x * 1.44269504f + shift) - shift;
	r = x - kf * 0.693145752f;
	r = r - kf * 1.42860677e-6f;
	p = 1.0f / 5040.0f;
	p = p * r + 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	two_k.u = (uint32_t)((int32_t)kf + 127) << 23;
	return p * two_k.f;
}

/*
 * tanh(x) = 1 - 2 / (exp(2x) + 1): exact limits +-1, absolute error about
 * 1e-7 (relative error grows near 0, where GELU adds it to 1 anyway).
 */
static inline MATH_HD float math_tanh(float x)
{
	return 1.0f - 2.0f / (math_exp(2.0f * x) + 1.0f);
}

/* sqrt(2/pi), the constant of the tanh approximation of GELU. */
#define MATH_GELU_SCALE 0.7978845608028654f
#define MATH_GELU_CUBE 0.044715f

/* GELU, tanh approximation (as GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline MATH_HD float math_gelu_forward(float x)
{
	float cube = MATH_GELU_CUBE * x * x * x;

	return 0.5f * x * (1.0f + math_tanh(MATH_GELU_SCALE * (x + cube)));
}

/* d GELU(x) / dx times the upstream gradient dout (sech^2 = 1 - tanh^2). */
static inline MATH_HD float math_gelu_backward(float x, float dout)
{
	float cube = MATH_GELU_CUBE * x * x * x;
	float u = MATH_GELU_SCALE * (x + cube);
	float th = math_tanh(u);
	float sech2 = 1.0f - th * th;
	float local = 0.5f * (1.0f + th) +
		      x * 0.5f * sech2 * MATH_GELU_SCALE * (1.0f + 3.0f * MATH_GELU_CUBE * x * x);

	return local * dout;
}

/* LayerNorm: reciprocal standard deviation from the (biased) variance. */
static inline MATH_HD float math_ln_rstd(float var, float eps)
{
	return 1.0f / sqrtf(var + eps);
}

/* LayerNorm of one element: (x - mean) * rstd * weight + bias. */
static inline MATH_HD float math_ln_apply(float x, float mean, float rstd, float w, float b)
{
	return (x - mean) * rstd * w + b;
}

/*
 * LayerNorm backward of one element, given the row sums
 *   mean_dnorm   = mean over the row of dout * w
 *   mean_dnorm_x = mean over the row of dout * w * xhat
 * returns dx = rstd * (dout*w - mean_dnorm - xhat * mean_dnorm_x).
 */
static inline MATH_HD float math_ln_dx(float dout, float w, float xhat, float rstd, float mean_dnorm,
				       float mean_dnorm_x)
{
	return rstd * (dout * w - mean_dnorm - xhat * mean_dnorm_x);
}

/* RMSNorm: reciprocal root mean square of a row from its mean square. */
static inline MATH_HD float math_rms_rstd(float mean_sq, float eps)
{
	return 1.0f / sqrtf(mean_sq + eps);
}

/*
 * RMSNorm backward of one element, given mean_dnorm_x = mean over the row
 * of dout * w * xhat (xhat = x * rstd): LayerNorm's formula with the mean
 * term gone, since RMSNorm subtracts no mean.
 */
static inline MATH_HD float math_rms_dx(float dout, float w, float xhat, float rstd,
					float mean_dnorm_x)
{
	return rstd * (dout * w - xhat * mean_dnorm_x);
}

/* The logistic sigmoid 1 / (1 + exp(-x)). */
static inline MATH_HD float math_sigmoid(float x)
{
	return 1.0f / (1.0f + math_exp(-x));
}

/* SwiGLU of one element: silu(gate) * up, silu(g) = g * sigmoid(g). */
static inline MATH_HD float math_swiglu_forward(float gate, float up)
{
	return gate * math_sigmoid(gate) * up;
}

/*
 * SwiGLU backward of one element: the gradients of gate and up given dout.
 * silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g).
 */
static inline MATH_HD void math_swiglu_backward(float gate, float up, float dout, float *dgate,
						float *dup)
{
	float s = math_sigmoid(gate);

	*dgate = dout * up * (s * (1.0f + gate * (1.0f - s)));
	*dup = dout * (gate * s);
}

/*
 * Rotary position embedding of one pair (x1, x2) = (dimension i,
 * dimension i + HS/2) of a head, by the angle whose cosine and sine are
 * c and s; the backward pass turns the gradient by the opposite angle
 * (s negated): the rotation is orthogonal.
 */
static inline MATH_HD void math_rope(float x1, float x2, float c, float s, float *y1, float *y2)
{
	*y1 = x1 * c - x2 * s;
	*y2 = x2 * c + x1 * s;
}

/* Softmax numerator: exp(x - max) with max the row maximum (keeps exp <= 1). */
static inline MATH_HD float math_softmax_exp(float x, float max)
{
	return math_exp(x - max);
}

/*
 * Attention keeps no T x T matrix between its passes: each row of scores
 * is summarised by two numbers, its max and the sum of exp(score - max)
 * over the row's visible columns, and both passes turn a score into its
 * softmax weight with this one formula, so the backward pass sees the
 * very weights the forward pass used.
 */
static inline MATH_HD float math_attention_weight(float score, float max, float sum)
{
	return math_softmax_exp(score, max) / sum;
}

/*
 * Softmax backward of one attention weight p, given the gradient dp of that
 * weight and rowdot = sum over the row of p * dp; scale is the 1/sqrt(HS)
 * the scores were multiplied by, so this is the gradient of q.k itself.
 */
static inline MATH_HD float math_attention_dscore(float p, float dp, float rowdot, float scale)
{
	return p * (dp - rowdot) * scale;
}

/*
 * Softmax + cross-entropy backward of one logit: (p - [i == target]) * dloss,
 * where p is the probability of that logit and dloss the loss gradient.
 */
static inline MATH_HD float math_xent_dlogit(float p, int is_target, float dloss)
{
	return (p - (is_target ? 1.0f : 0.0f)) * dloss;
}

/*
 * bfloat16: the upper 16 bits of an fp32 (sign, the same 8 exponent bits,
 * 7 of the 23 mantissa bits). math_bf16_bits rounds to nearest, ties to
 * even (as CUDA's __float2bfloat16): adding 0x7fff plus the lowest kept
 * bit carries into the kept bits exactly when the dropped half is above a
 * half, or a half with an odd kept part. A carry out of the mantissa
 * bumps the exponent, which is the right rounding too (up to infinity
 * past the largest bf16). NaN is kept a quiet NaN (the carry could turn
 * it into infinity).
 */
static inline MATH_HD uint16_t math_bf16_bits(float x)
{
	union {
		float f;
		uint32_t u;
	} v;

	v.f = x;
	if ((v.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((v.u >> 16) | 0x40u);
	v.u += 0x7fffu + ((v.u >> 16) & 1u);
	return (uint16_t)(v.u >> 16);
}

/* The float a bf16 stands for (exact: the low mantissa bits are 0). */
static inline MATH_HD float math_bf16_float(uint16_t b)
{
	union {
		uint32_t u;
		float f;
	} v;

	v.u = (uint32_t)b << 16;
	return v.f;
}

/*
 * x rounded to the nearest bf16, as a float: what a bf16 matrix product
 * reads. A product of two bf16 values has at most 16 significant bits, so
 * it is exact in fp32; a sum of such products in fp32 is therefore what
 * the tensor cores compute from bf16 inputs, up to the order of the sum.
 */
static inline MATH_HD float math_bf16_round(float x)
{
	return math_bf16_float(math_bf16_bits(x));
}

/*
 * AdamW update of one parameter. m and v are the first and second moment
 * estimates (updated in place); bc1 = 1 - beta1^t and bc2 = 1 - beta2^t are
 * the bias corrections of step t (t counts from 1); weight decay is decoupled
 * (applied to the parameter, not added to the gradient). Returns the new
 * parameter value.
 */
static inline MATH_HD float math_adamw(float param, float grad, float *m, float *v, float lr,
				       float beta1, float beta2, float eps, float weight_decay,
				       float bc1, float bc2)
{
	float mt = beta1 * *m + (1.0f - beta1) * grad;
	float vt = beta2 * *v + (1.0f - beta2) * grad * grad;
	float mhat = mt / bc1;
	float vhat = vt / bc2;

	*m = mt;
	*v = vt;
	return param - lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param);
}

#endif
