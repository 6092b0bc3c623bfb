/*
 * daemon/engine/model/model_config.c - what every part of the model and
 * every architecture asks of its configuration: names, widths, whether the
 * head is tied, which tensors decay; and the one out-of-memory message
 * they all give. The lowest file of the model: it calls none of the others.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "kernels/ops.h"

#include <stdio.h>


static const char *const tensor_names[GPT2_NUM_TENSORS] = {
	"wte",  "wpe", "ln1w",	"ln1b",	 "qkvw",    "qkvb",    "attprojw", "attprojb",
	"ln2w", "ln2b", "fcw",	"fcb",	 "fcprojw", "fcprojb", "lnfw",	   "lnfb",
	"lmhead",
};

const char *model_arch_name(enum model_arch a)
{
	return a == MODEL_LLAMA ? "llama" : "gpt2";
}

int model_kv_heads(const struct gpt2_config *c)
{
	return c->arch == MODEL_LLAMA && c->kv_heads > 0 ? c->kv_heads : c->num_heads;
}

int model_mlp_width(const struct gpt2_config *c)
{
	return c->arch == MODEL_LLAMA ? c->intermediate : 4 * c->channels;
}

int model_tied(const struct gpt2_config *c)
{
	return c->arch != MODEL_LLAMA || !c->untied;
}

const char *gpt2_tensor_name(enum gpt2_tensor t)
{
	return t >= 0 && t < GPT2_NUM_TENSORS ? tensor_names[t] : "?";
}

int gpt2_tensor_decays(enum gpt2_tensor t)
{
	return t == GPT2_WTE || t == GPT2_WPE || t == GPT2_QKVW || t == GPT2_ATTPROJW ||
	       t == GPT2_FCW || t == GPT2_FCPROJW || t == GPT2_LMHEAD;
}


void gpt2_oom_message(const struct ops *o, const char *what, size_t bytes, char *err,
		      size_t errlen)
{
	size_t free_b = 0, total_b = 0;
	char free_s[48] = "";

	/* a GPU says how much it has left; the host does not */
	o->mem_info(&free_b, &total_b);
	if (total_b)
		snprintf(free_s, sizeof free_s, ", %zu MiB free", free_b >> 20);
	snprintf(err, errlen, "out of %s memory for %s: %zu MiB asked%s", o->name, what,
		 bytes >> 20, free_s);
}
