/*
 * daemon/engine/model/model_internal.h - what the model's own files share
 * and nothing outside daemon/engine/model/ may call: the walk over a
 * shard's chunks (model_shape.c), the parameter and activation buffers
 * (model.c) that files and passes fill.
 */
#ifndef STORK_MODEL_INTERNAL_H
#define STORK_MODEL_INTERNAL_H

#include "daemon/engine/model/model.h"

/* model_shape.c: a tensor's full size; one chunk (tensor t of layer l)
 * copied between the full tensor and a shard's slice of it; every chunk a
 * shard holds, in file order, with its offsets in the full parameters and
 * in the shard's (fn's non-zero return stops the walk and is returned). */
size_t model_full_chunk(const struct gpt2_config *c, int t);
void model_copy_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, int t, float *full,
		      float *local, int to_local);
typedef int model_chunk_fn(void *arg, int t, int l, size_t full_off, size_t local_off);
int model_for_each_chunk(const struct gpt2_config *c, const struct gpt2_shard *s, model_chunk_fn *fn,
			 void *arg);

/* model.c: a model's buffers for a shard (host memory, zeroed state); a
 * float buffer aligned for the kernels; the tensor pointers into a
 * parameter buffer; the largest chunk of any tensor; the activations and
 * the working memory a new batch shape or backend lets go of. */
int gpt2_alloc(struct gpt2 *m, const struct gpt2_config *c, const struct gpt2_shard *s);
float *model_alloc_floats(size_t n);
void model_point_tensors(float *tensors[GPT2_NUM_TENSORS], float *buf,
			 const size_t sizes[GPT2_NUM_TENSORS]);
size_t model_max_chunk(const struct gpt2_config *c);
void model_forget_acts(struct gpt2 *m);
void model_drop_work_memory(struct gpt2 *m);

#endif
