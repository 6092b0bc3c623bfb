/*
 * lib/formats/hf_config.c - see hf_config.h.
 *
 * Each architecture is a function that reads its keys through four typed
 * getters (integer, number, boolean, string); a getter knows whether the
 * key is required and what its default is, and says "PATH: KEY: what" when
 * the value is missing or of another type. JSON null counts as absent, as
 * transformers' Python defaults (None) do.
 */
#include "config.h"
#include "lib/formats/hf_config.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/formats/stork_json.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX (1u << 20) /* config.json files are a few KB */

static const char *const arch_names[] = { [HF_GPT2] = "gpt2", [HF_LLAMA] = "llama" };

const char *hf_arch_name(enum hf_arch arch)
{
	return arch_names[arch];
}

int hf_arch_from_name(const char *name, enum hf_arch *arch)
{
	for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++)
		if (!strcmp(name, arch_names[i])) {
			*arch = (enum hf_arch)i;
			return 0;
		}
	return -1;
}

/* What the getters share: the file's name, its object, where errors go. */
struct reader {
	const char *path;
	json_t *obj;
	char *err;
	size_t errlen;
};

/* v when present and not null, else NULL. */
static json_t *member(const struct reader *r, const char *key)
{
	json_t *v = json_object_get(r->obj, key);

	return json_is_null(v) ? NULL : v;
}

static int missing(const struct reader *r, const char *key, const char *what)
{
	return msg_fail(r->err, r->errlen, -1, "%s: %s: %s", r->path, key, what);
}

/* An integer in [1, INT_MAX]; dflt when absent, or an error when dflt < 0. */
static int get_int(const struct reader *r, const char *key, int dflt, int *out)
{
	json_t *v = member(r, key);

	if (!v) {
		if (dflt < 0)
			return missing(r, key, "missing (a size transformers would have written)");
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v))
		return missing(r, key, "not an integer");
	if (json_integer_value(v) < 1 || json_integer_value(v) > INT_MAX)
		return msg_fail(r->err, r->errlen, -1, "%s: %s: %lld is not a size from 1 to %d",
				r->path, key, (long long)json_integer_value(v), INT_MAX);
	*out = (int)json_integer_value(v);
	return 0;
}

/* A finite number > 0 (an integer too); dflt when absent. */
static int get_real(const struct reader *r, const char *key, double dflt, double *out)
{
	json_t *v = member(r, key);

	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!json_is_number(v))
		return missing(r, key, "not a number");
	if (!(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
		return msg_fail(r->err, r->errlen, -1, "%s: %s: %g is not a number > 0", r->path, key,
				json_number_value(v));
	*out = json_number_value(v);
	return 0;
}

static int get_bool(const struct reader *r, const char *key, bool dflt, bool *out)
{
	json_t *v = member(r, key);

	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!json_is_boolean(v))
		return missing(r, key, "not true or false");
	*out = json_is_true(v);
	return 0;
}

/* A string, or dflt (NULL: none) when absent. */
static int get_str(const struct reader *r, const char *key, const char *dflt, const char **out)
{
	json_t *v = member(r, key);

	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!json_is_string(v))
		return missing(r, key, "not a string");
	*out = json_string_value(v);
	return 0;
}

/* key, when present, must be want (or also2 when not NULL). */
static int require_str(const struct reader *r, const char *key, const char *want,
		       const char *also2, const char *why)
{
	const char *s;

	if (get_str(r, key, want, &s) < 0)
		return -1;
	if (strcmp(s, want) && (!also2 || strcmp(s, also2)))
		return msg_fail(r->err, r->errlen, -1, "%s: %s: \"%.64s\" is not supported (%s)",
				r->path, key, s, why);
	return 0;
}

/* key, when present, must be false. */
static int require_false(const struct reader *r, const char *key, const char *why)
{
	bool b = false;

	if (get_bool(r, key, false, &b) < 0)
		return -1;
	if (b)
		return msg_fail(r->err, r->errlen, -1, "%s: %s: true is not supported (%s)", r->path,
				key, why);
	return 0;
}

static int read_gpt2(const struct reader *r, struct hf_config *c)
{
	if (get_int(r, "n_embd", -1, &c->hidden_size) < 0 ||
	    get_int(r, "n_layer", -1, &c->num_layers) < 0 ||
	    get_int(r, "n_head", -1, &c->num_heads) < 0 ||
	    get_int(r, "n_positions", -1, &c->max_position_embeddings) < 0 ||
	    get_int(r, "vocab_size", -1, &c->vocab_size) < 0 ||
	    get_real(r, "layer_norm_epsilon", 1e-5, &c->norm_eps) < 0 ||
	    get_bool(r, "tie_word_embeddings", true, &c->tie_word_embeddings) < 0 ||
	    require_str(r, "activation_function", "gelu_new", "gelu_pytorch_tanh",
			"GPT-2's MLP is the tanh approximation of GELU") < 0 ||
	    require_false(r, "scale_attn_by_inverse_layer_idx", "attention scores are scaled by "
			  "1/sqrt(head size) only") < 0 ||
	    require_false(r, "reorder_and_upcast_attn", "attention is computed in fp32 anyway") < 0)
		return -1;
	if (c->hidden_size % c->num_heads)
		return msg_fail(r->err, r->errlen, -1, "%s: n_head: %d heads do not divide n_embd %d",
				r->path, c->num_heads, c->hidden_size);
	if (c->hidden_size > INT_MAX / 4)
		return missing(r, "n_embd", "too large");
	if (get_int(r, "n_inner", 4 * c->hidden_size, &c->intermediate_size) < 0)
		return -1;
	c->num_kv_heads = c->num_heads;
	c->head_dim = c->hidden_size / c->num_heads;
	return 0;
}

/* Llama 3.1's rope_scaling, when there is one. */
static int read_rope_scaling(const struct reader *r, struct hf_config *c)
{
	struct reader s = { .obj = member(r, "rope_scaling"), .err = r->err, .errlen = r->errlen };
	char name[PATH_MAX + 32];
	const char *type, *key = "rope_type";

	if (!s.obj)
		return 0;
	snprintf(name, sizeof name, "%s: rope_scaling", r->path);
	s.path = name;
	if (!json_is_object(s.obj))
		return missing(r, "rope_scaling", "not an object or null");
	/* transformers before 4.43 called it "type" */
	if (get_str(&s, key, NULL, &type) < 0)
		return -1;
	if (!type) {
		key = "type";
		if (get_str(&s, key, NULL, &type) < 0)
			return -1;
	}
	if (!type)
		return missing(&s, "rope_type", "missing");
	if (!strcmp(type, "default"))
		return 0;
	if (strcmp(type, "llama3"))
		return msg_fail(r->err, r->errlen, -1, "%s: %s: \"%.64s\" is not supported "
				"(Stork's rotary positions know Llama 3.1's \"llama3\" scaling only)",
				name, key, type);
	c->rope_scaling = true;
	if (get_real(&s, "factor", -1, &c->rope_factor) < 0 ||
	    get_real(&s, "low_freq_factor", -1, &c->rope_low_freq_factor) < 0 ||
	    get_real(&s, "high_freq_factor", -1, &c->rope_high_freq_factor) < 0 ||
	    get_int(&s, "original_max_position_embeddings", -1,
		    &c->rope_original_max_position_embeddings) < 0)
		return -1;
	if (c->rope_factor < 0)
		return missing(&s, "factor", "missing");
	if (c->rope_low_freq_factor < 0)
		return missing(&s, "low_freq_factor", "missing");
	if (c->rope_high_freq_factor < 0)
		return missing(&s, "high_freq_factor", "missing");
	if (c->rope_factor < 1)
		return msg_fail(r->err, r->errlen, -1, "%s: factor: %g is below 1", name,
				c->rope_factor);
	if (c->rope_high_freq_factor <= c->rope_low_freq_factor)
		return msg_fail(r->err, r->errlen, -1, "%s: high_freq_factor %g is not above "
				"low_freq_factor %g", name, c->rope_high_freq_factor,
				c->rope_low_freq_factor);
	return 0;
}

static int read_llama(const struct reader *r, struct hf_config *c)
{
	if (get_int(r, "hidden_size", -1, &c->hidden_size) < 0 ||
	    get_int(r, "num_hidden_layers", -1, &c->num_layers) < 0 ||
	    get_int(r, "num_attention_heads", -1, &c->num_heads) < 0 ||
	    get_int(r, "intermediate_size", -1, &c->intermediate_size) < 0 ||
	    get_int(r, "vocab_size", -1, &c->vocab_size) < 0 ||
	    get_int(r, "max_position_embeddings", -1, &c->max_position_embeddings) < 0 ||
	    get_int(r, "num_key_value_heads", c->num_heads, &c->num_kv_heads) < 0 ||
	    get_real(r, "rms_norm_eps", 1e-6, &c->norm_eps) < 0 ||
	    get_real(r, "rope_theta", 10000.0, &c->rope_theta) < 0 ||
	    get_bool(r, "tie_word_embeddings", false, &c->tie_word_embeddings) < 0 ||
	    require_str(r, "hidden_act", "silu", NULL, "Llama's MLP is SwiGLU") < 0 ||
	    require_false(r, "attention_bias", "Llama's attention projections have no bias") < 0 ||
	    require_false(r, "mlp_bias", "Llama's MLP projections have no bias") < 0)
		return -1;
	if (c->num_heads % c->num_kv_heads)
		return msg_fail(r->err, r->errlen, -1, "%s: num_key_value_heads: %d does not divide "
				"num_attention_heads %d", r->path, c->num_kv_heads, c->num_heads);
	if (!member(r, "head_dim") && c->hidden_size % c->num_heads)
		return msg_fail(r->err, r->errlen, -1, "%s: num_attention_heads: %d heads do not "
				"divide hidden_size %d (and there is no head_dim)", r->path,
				c->num_heads, c->hidden_size);
	if (get_int(r, "head_dim", c->hidden_size / c->num_heads, &c->head_dim) < 0)
		return -1;
	if ((long long)c->head_dim * c->num_heads > INT_MAX)
		return missing(r, "head_dim", "times num_attention_heads is too large");
	return read_rope_scaling(r, c);
}

/* bos_token_id and eos_token_id when both are ids (a model may lack them,
 * or give a list: then they are not kept). */
static void read_token_ids(const struct reader *r, struct hf_config *c)
{
	json_t *bos = member(r, "bos_token_id"), *eos = member(r, "eos_token_id");

	c->has_token_ids = json_is_integer(bos) && json_is_integer(eos) &&
			   json_integer_value(bos) >= 0 && json_integer_value(bos) <= INT_MAX &&
			   json_integer_value(eos) >= 0 && json_integer_value(eos) <= INT_MAX;
	c->bos_token_id = c->has_token_ids ? (int)json_integer_value(bos) : 0;
	c->eos_token_id = c->has_token_ids ? (int)json_integer_value(eos) : 0;
}

int hf_config_read(const char *path, struct hf_config *c, char *err, size_t errlen)
{
	struct reader r = { .path = path, .err = err, .errlen = errlen };
	const char *type, *dtype;
	int rc = -1;

	memset(c, 0, sizeof *c);
	if (!(r.obj = sj_load_file_strict(path, CONFIG_MAX, err, errlen)))
		return -1;
	if (!json_is_object(r.obj)) {
		msg_format(err, errlen, "%s: not a JSON object", path);
		goto out;
	}
	if (get_str(&r, "model_type", NULL, &type) < 0)
		goto out;
	if (!type) {
		missing(&r, "model_type", "missing (which architecture is this?)");
		goto out;
	}
	if (hf_arch_from_name(type, &c->arch) < 0) {
		msg_format(err, errlen, "%s: model_type: \"%.64s\" is not one Stork knows (gpt2, "
			   "llama)", path, type);
		goto out;
	}
	if ((c->arch == HF_GPT2 ? read_gpt2(&r, c) : read_llama(&r, c)) < 0)
		goto out;
	if (get_str(&r, "torch_dtype", NULL, &dtype) < 0 ||
	    (!dtype && get_str(&r, "dtype", NULL, &dtype) < 0))
		goto out;
	if (dtype && strlen(dtype) >= sizeof c->torch_dtype) {
		missing(&r, "torch_dtype", "not a dtype name");
		goto out;
	}
	snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dtype ? dtype : "");
	read_token_ids(&r, c);
	rc = 0;
out:
	json_decref(r.obj);
	return rc;
}

/* ----------------------------------------------------------------- writer */

static json_t *gpt2_json(const struct hf_config *c)
{
	return json_pack("{s:s, s:[s], s:f, s:s, s:i, s:i, s:o, s:i, s:i, s:b, s:i}",
			 "activation_function", "gelu_new",
			 "architectures", "GPT2LMHeadModel",
			 "layer_norm_epsilon", c->norm_eps,
			 "model_type", "gpt2",
			 "n_embd", c->hidden_size,
			 "n_head", c->num_heads,
			 "n_inner", c->intermediate_size == 4 * c->hidden_size ? json_null() :
				    json_integer(c->intermediate_size),
			 "n_layer", c->num_layers,
			 "n_positions", c->max_position_embeddings,
			 "tie_word_embeddings", c->tie_word_embeddings,
			 "vocab_size", c->vocab_size);
}

static json_t *llama_json(const struct hf_config *c)
{
	json_t *scaling = c->rope_scaling ?
		json_pack("{s:f, s:f, s:f, s:i, s:s}", "factor", c->rope_factor,
			  "high_freq_factor", c->rope_high_freq_factor,
			  "low_freq_factor", c->rope_low_freq_factor,
			  "original_max_position_embeddings",
			  c->rope_original_max_position_embeddings, "rope_type", "llama3") :
		json_null();

	return json_pack("{s:[s], s:b, s:i, s:s, s:i, s:i, s:i, s:b, s:s, s:i, s:i, s:i, s:f, "
			 "s:o, s:f, s:b, s:i}",
			 "architectures", "LlamaForCausalLM",
			 "attention_bias", 0,
			 "head_dim", c->head_dim,
			 "hidden_act", "silu",
			 "hidden_size", c->hidden_size,
			 "intermediate_size", c->intermediate_size,
			 "max_position_embeddings", c->max_position_embeddings,
			 "mlp_bias", 0,
			 "model_type", "llama",
			 "num_attention_heads", c->num_heads,
			 "num_hidden_layers", c->num_layers,
			 "num_key_value_heads", c->num_kv_heads,
			 "rms_norm_eps", c->norm_eps,
			 "rope_scaling", scaling,
			 "rope_theta", c->rope_theta,
			 "tie_word_embeddings", c->tie_word_embeddings,
			 "vocab_size", c->vocab_size);
}

/* v indented with sorted keys (as transformers writes), its reals with the
 * fewest digits (15 to 17) that read back to the same doubles: 1e-5, not
 * 1.0000000000000001e-5. */
static char *dump_shortest(const json_t *v)
{
	for (int p = 15; p <= 17; p++) {
		char *text = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(p));
		json_t *back = text ? json_loads(text, 0, NULL) : NULL;
		int same = back && json_equal(v, back);

		json_decref(back);
		if (same || p == 17 || !text)
			return text;
		free(text);
	}
	return NULL;
}

int hf_config_write(const char *path, const struct hf_config *c, char *err, size_t errlen)
{
	json_t *v = c->arch == HF_GPT2 ? gpt2_json(c) : llama_json(c);
	char *text = NULL;
	int rc = -1;

	if (v && c->has_token_ids &&
	    (json_object_set_new(v, "bos_token_id", json_integer(c->bos_token_id)) < 0 ||
	     json_object_set_new(v, "eos_token_id", json_integer(c->eos_token_id)) < 0)) {
		json_decref(v);
		v = NULL;
	}
	if (!v || json_object_set_new(v, "torch_dtype",
				      json_string(*c->torch_dtype ? c->torch_dtype : "float32")) < 0 ||
	    !(text = dump_shortest(v))) {
		msg_format(err, errlen, "cannot write %s: out of memory (or a dtype name that is not "
			   "UTF-8)", path);
		goto out;
	}
	{
		size_t len = strlen(text);
		char *t = realloc(text, len + 2);

		if (!t) {
			msg_format(err, errlen, "cannot write %s: out of memory", path);
			goto out;
		}
		text = t;
		text[len] = '\n';
		text[len + 1] = '\0';
		rc = atomic_write_file(path, text, len + 1, err, errlen);
	}
out:
	free(text);
	json_decref(v);
	return rc;
}
