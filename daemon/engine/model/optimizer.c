/*
 * daemon/engine/model/optimizer.c - AdamW, learning-rate schedule, gradient clipping
 * (see optimizer.h). The per-element update is math_adamw of
 * kernels/math.h, run by the backend's adamw kernel.
 */
#include "config.h"
#include "daemon/engine/model/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int adamw_init(struct adamw_state *s, size_t n)
{
	return adamw_init_on(s, n, &ops_cpu);
}

/*
 * The moments in o's memory (the host's: cache-line aligned, large ones on
 * huge pages), zeroed by o's kernel: on the rank's threads or its GPU, whose
 * first touch of a 1B model's two moments is 10 GB.
 */
int adamw_init_on(struct adamw_state *s, size_t n, const struct ops *o)
{
	size_t bytes = (n ? n : 1) * sizeof(float);

	memset(s, 0, sizeof *s);
	s->m = o->alloc(bytes);
	s->v = o->alloc(bytes);
	s->mem = o;
	if (!s->m || !s->v) {
		adamw_free(s);
		return -2;
	}
	o->zero(s->m, n);
	o->zero(s->v, n);
	s->n = n;
	return 0;
}

int adamw_move(struct adamw_state *s, const struct ops *o)
{
	size_t bytes = (s->n ? s->n : 1) * sizeof(float);
	float *m, *v;

	if (o->alloc == s->mem->alloc)
		return 0;
	m = o->alloc(bytes);
	v = o->alloc(bytes);
	if (!m || !v) {
		if (m)
			o->free(m);
		if (v)
			o->free(v);
		return -2;
	}
	o->upload(m, s->m, s->n * sizeof(float));
	o->upload(v, s->v, s->n * sizeof(float));
	s->mem->free(s->m);
	s->mem->free(s->v);
	s->m = m;
	s->v = v;
	s->mem = o;
	return 0;
}

void adamw_to_host(const struct adamw_state *s, float *m, float *v)
{
	s->mem->download(m, s->m, s->n * sizeof(float));
	s->mem->download(v, s->v, s->n * sizeof(float));
}

void adamw_free(struct adamw_state *s)
{
	if (s->mem) {
		s->mem->free(s->m);
		s->mem->free(s->v);
	} else {
		free(s->m);
		free(s->v);
	}
	memset(s, 0, sizeof *s);
}

void adamw_update(const struct ops *o, struct adamw_state *s, const struct adamw_params *h,
		  float lr, int decay, float *params, const float *grads, size_t off, size_t n)
{
	double t = (double)(s->step + 1);
	float bc1 = (float)(1.0 - pow(h->beta1, t));
	float bc2 = (float)(1.0 - pow(h->beta2, t));

	o->adamw(params, grads, s->m + off, s->v + off, n, lr, h->beta1, h->beta2, h->eps,
		 decay ? h->weight_decay : 0.0f, bc1, bc2);
}

void adamw_step_done(struct adamw_state *s)
{
	s->step++;
}

void adamw_step_model(struct adamw_state *s, const struct adamw_params *h, float lr,
		      struct gpt2 *m)
{
	size_t off = 0;

	for (int t = 0; t < GPT2_NUM_TENSORS; t++) {
		adamw_update(m->ops, s, h, lr, gpt2_tensor_decays(t), m->tensors[t],
			     m->grad_tensors[t], off, m->sizes[t]);
		off += m->sizes[t];
	}
	adamw_step_done(s);
}

float lr_at(const struct lr_schedule *s, int64_t step)
{
	double r, span;

	if (s->kind == LR_CONSTANT)
		return s->lr;
	if (step < s->warmup)
		return (float)((double)s->lr * (double)(step + 1) / (double)s->warmup);
	span = (double)(s->total - 1 - s->warmup);
	r = span > 0 ? (double)(step - s->warmup) / span : 1.0;
	if (r > 1.0)
		r = 1.0;
	return (float)(s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * r)));
}

double grad_sumsq(const struct ops *o, const float *g, size_t n)
{
	return o->sumsq(g, n);
}

float grad_clip_scale(float norm, float clip)
{
	if (clip > 0.0f && norm > clip)
		return clip / norm;
	return 1.0f;
}

void grad_scale(const struct ops *o, float *g, size_t n, float scale)
{
	if (scale != 1.0f)
		o->scale(g, n, scale);
}
