/*
 * kernels/cpu/elementwise.c - GELU, residual, zero, scale and AdamW, one
 * kernels/math.h formula per element (CPU backend).
 */
#include "config.h"
#include "kernels/cpu/cpu.h"

/*
 * Element-wise kernels: blocks of about EW_BLOCK elements (split_size); an
 * element's value does not depend on the blocks.
 */
struct ew_args {
	float *out, *out2;
	const float *a, *b;
	size_t n;
	float s;
};

SIMD_CLONES
static void gelu_forward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict out = e->out;
	const float *restrict inp = e->a;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		out[k] = math_gelu_forward(inp[k]);
}

void cpu_gelu_forward(float *out, const float *inp, size_t n)
{
	struct ew_args e = { .out = out, .a = inp, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(30.0 * n), gelu_forward_part, &e);
}

SIMD_CLONES
static void gelu_backward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict dinp = e->out;
	const float *restrict inp = e->a, *restrict dout = e->b;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		dinp[k] += math_gelu_backward(inp[k], dout[k]);
}

void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	struct ew_args e = { .out = dinp, .a = inp, .b = dout, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(40.0 * n), gelu_backward_part, &e);
}

/* out may be a or b (the model adds a projection into the stream in place). */
SIMD_CLONES
static void residual_forward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		e->out[k] = e->a[k] + e->b[k];
}

void cpu_residual_forward(float *out, const float *a, const float *b, size_t n)
{
	struct ew_args e = { .out = out, .a = a, .b = b, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(8.0 * n), residual_forward_part, &e);
}

SIMD_CLONES
static void residual_backward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict da = e->out, *restrict db = e->out2;
	const float *restrict dout = e->a;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++) {
		da[k] += dout[k];
		db[k] += dout[k];
	}
}

void cpu_residual_backward(float *da, float *db, const float *dout, size_t n)
{
	struct ew_args e = { .out = da, .out2 = db, .a = dout, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(12.0 * n), residual_backward_part, &e);
}

static void zero_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	memset(e->out + lo, 0, (hi - lo) * sizeof(float));
}

void cpu_zero(float *p, size_t n)
{
	struct ew_args e = { .out = p, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(4.0 * n), zero_part, &e);
}

SIMD_CLONES
static void scale_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict x = e->out;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		x[k] *= e->s;
}

void cpu_scale(float *p, size_t n, float s)
{
	struct ew_args e = { .out = p, .n = n, .s = s };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(8.0 * n), scale_part, &e);
}

/* ------------------------------------------------------------ AdamW */

struct adamw_args {
	float *params, *m, *v;
	const float *grads;
	size_t n;
	float lr, beta1, beta2, eps, wd, bc1, bc2;
};

SIMD_CLONES
static void adamw_part(void *p, int block, int count)
{
	struct adamw_args *a = p;
	size_t lo, hi;
	float *restrict params = a->params, *restrict m = a->m, *restrict v = a->v;
	const float *restrict grads = a->grads;

	split_size(a->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		params[k] = math_adamw(params[k], grads[k], &m[k], &v[k], a->lr, a->beta1,
				       a->beta2, a->eps, a->wd, a->bc1, a->bc2);
}

void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		  float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2)
{
	struct adamw_args a = { params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, bc1,
				bc2 };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(10.0 * n), adamw_part, &a);
}
