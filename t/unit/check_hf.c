/*
 * t/unit/check_hf.c - the promises of lib/hf_config and lib/hf_names
 * (issue 25): a GPT-2 or Llama config.json reads into the struct with
 * transformers' defaults where keys are left out, anything the struct
 * cannot say is refused by name (file and key), what is written reads
 * back and is what from_pretrained needs; every weight has its Hugging
 * Face name, layout and shape, found in a file with or without the base
 * model's prefix.
 *
 * The configs of real models (gpt2 on the Hub, Llama 3.1 8B) are quoted
 * here by their keys; t/tools/safetensors_ref.py writes a Llama 3.1 and a
 * GPT-2 config.json that must read value for value, and checks what
 * hf_config_write makes of them.
 */
#include "config.h"
#include "lib/io/atomic_file.h"
#include "lib/formats/hf_config.h"
#include "lib/formats/hf_names.h"
#include "lib/io/io.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REF_PY STORK_TEST_TOOLS "/safetensors_ref.py"

static char dir[PATH_MAX];
static char err[2048];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_hf.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	remove_tree(dir);
}

static const char *in_dir(const char *name)
{
	static char path[4][PATH_MAX + 64];
	static int k;

	k = (k + 1) % 4;
	snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
	return path[k];
}

/* config.json of text in the test directory; its path. */
static const char *config_of(const char *text)
{
	const char *path = in_dir("config.json");
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
	return path;
}

static int run_ref(const char *cmd, const char *a)
{
	char *argv[] = { "/usr/bin/python3", REF_PY, (char *)cmd, (char *)a, NULL };

	return spawn_wait(argv, NULL);
}

/* The gpt2 checkpoint's config.json on the Hub (GPT2LMHeadModel). */
static const char gpt2_hub[] =
	"{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],"
	" \"attn_pdrop\": 0.1, \"bos_token_id\": 50256, \"embd_pdrop\": 0.1,"
	" \"eos_token_id\": 50256, \"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05,"
	" \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12,"
	" \"n_layer\": 12, \"n_positions\": 1024, \"resid_pdrop\": 0.1,"
	" \"summary_activation\": null, \"summary_first_dropout\": 0.1,"
	" \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\","
	" \"summary_use_proj\": true, \"task_specific_params\": {\"text-generation\":"
	" {\"do_sample\": true, \"max_length\": 50}}, \"vocab_size\": 50257}";

/* Llama 3.1 8B's config.json. */
static const char llama31_8b[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false,"
	" \"attention_dropout\": 0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001,"
	" \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02,"
	" \"intermediate_size\": 14336, \"max_position_embeddings\": 131072,"
	" \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32,"
	" \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"pretraining_tp\": 1,"
	" \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 8.0,"
	" \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
	" \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},"
	" \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,"
	" \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.0.dev0\","
	" \"use_cache\": true, \"vocab_size\": 128256}";

/* ------------------------------------------------------------- reading */

START_TEST(gpt2_reads_with_transformers_defaults)
{
	struct hf_config c;

	ck_assert_msg(hf_config_read(config_of(gpt2_hub), &c, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(c.arch, HF_GPT2);
	ck_assert_int_eq(c.hidden_size, 768);
	ck_assert_int_eq(c.num_layers, 12);
	ck_assert_int_eq(c.num_heads, 12);
	ck_assert_int_eq(c.num_kv_heads, 12);
	ck_assert_int_eq(c.head_dim, 64);
	ck_assert_int_eq(c.intermediate_size, 4 * 768); /* n_inner absent */
	ck_assert_int_eq(c.max_position_embeddings, 1024);
	ck_assert_int_eq(c.vocab_size, 50257);
	ck_assert(c.norm_eps == 1e-5);
	ck_assert(c.tie_word_embeddings);                /* absent: tied */
	ck_assert(!c.rope_scaling);
	ck_assert_str_eq(c.torch_dtype, "");
}
END_TEST

START_TEST(llama31_reads_every_key)
{
	struct hf_config c;

	ck_assert_msg(hf_config_read(config_of(llama31_8b), &c, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(c.arch, HF_LLAMA);
	ck_assert_int_eq(c.hidden_size, 4096);
	ck_assert_int_eq(c.num_layers, 32);
	ck_assert_int_eq(c.num_heads, 32);
	ck_assert_int_eq(c.num_kv_heads, 8);
	ck_assert_int_eq(c.head_dim, 128);
	ck_assert_int_eq(c.intermediate_size, 14336);
	ck_assert_int_eq(c.max_position_embeddings, 131072);
	ck_assert_int_eq(c.vocab_size, 128256);          /* above 65535 */
	ck_assert(c.norm_eps == 1e-5);
	ck_assert(c.rope_theta == 500000.0);
	ck_assert(c.rope_scaling);
	ck_assert(c.rope_factor == 8.0);
	ck_assert(c.rope_low_freq_factor == 1.0);
	ck_assert(c.rope_high_freq_factor == 4.0);
	ck_assert_int_eq(c.rope_original_max_position_embeddings, 8192);
	ck_assert(!c.tie_word_embeddings);
	ck_assert_str_eq(c.torch_dtype, "bfloat16");
}
END_TEST

START_TEST(llama_defaults_are_transformers_defaults)
{
	struct hf_config c;

	ck_assert_msg(hf_config_read(config_of(
		"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
		" \"num_attention_heads\": 4, \"intermediate_size\": 172, \"vocab_size\": 70000,"
		" \"max_position_embeddings\": 256, \"num_key_value_heads\": null,"
		" \"rope_scaling\": null, \"dtype\": \"float32\"}"), &c, err, sizeof err) == 0,
		"%s", err);
	ck_assert(c.norm_eps == 1e-6);
	ck_assert(c.rope_theta == 10000.0);
	ck_assert_int_eq(c.num_kv_heads, 4);
	ck_assert_int_eq(c.head_dim, 16);
	ck_assert(!c.tie_word_embeddings);
	ck_assert(!c.rope_scaling);
	ck_assert_str_eq(c.torch_dtype, "float32");       /* transformers' newer key */
	/* rope_scaling of type "default" (and the old key "type") is no scaling */
	ck_assert_int_eq(hf_config_read(config_of(
		"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
		" \"num_attention_heads\": 4, \"intermediate_size\": 172, \"vocab_size\": 100,"
		" \"max_position_embeddings\": 256, \"rope_scaling\": {\"type\": \"default\"},"
		" \"head_dim\": 32}"), &c, err, sizeof err), 0);
	ck_assert(!c.rope_scaling);
	ck_assert_int_eq(c.head_dim, 32);                 /* given, not hidden / heads */
}
END_TEST

/* A config of llama31_8b with one key replaced (or added) by "KEY": VALUE. */
static const char *llama_with(const char *key, const char *value)
{
	static char text[4096];
	char needle[128];
	const char *at;

	snprintf(needle, sizeof needle, "\"%s\": ", key);
	at = strstr(llama31_8b, needle);
	if (!at) {
		snprintf(text, sizeof text, "{\"%s\": %s, %s", key, value, llama31_8b + 1);
	} else {
		const char *end = at + strlen(needle);
		int depth = 0;

		/* the old value ends at the first , or } outside brackets */
		for (; *end && (depth || (*end != ',' && *end != '}')); end++)
			depth += (*end == '{' || *end == '[') - (*end == '}' || *end == ']');
		snprintf(text, sizeof text, "%.*s%s%s%s", (int)(at - llama31_8b), llama31_8b,
			 needle, value, end);
	}
	return text;
}

START_TEST(what_the_struct_cannot_say_is_refused_by_file_and_key)
{
	static const struct {
		const char *key, *value, *want;
	} cases[] = {
		{ "model_type", "\"mistral\"", "model_type: \"mistral\" is not one Stork knows (gpt2, llama)" },
		{ "model_type", "null", "model_type: missing" },
		{ "model_type", "3", "model_type: not a string" },
		{ "num_hidden_layers", "null", "num_hidden_layers: missing" },
		{ "hidden_size", "\"4096\"", "hidden_size: not an integer" },
		{ "hidden_size", "4096.0", "hidden_size: not an integer" },
		{ "intermediate_size", "0", "intermediate_size: 0 is not a size from 1 to" },
		{ "vocab_size", "-5", "vocab_size: -5 is not a size" },
		{ "vocab_size", "4294967296", "vocab_size: 4294967296 is not a size" },
		{ "num_key_value_heads", "3", "num_key_value_heads: 3 does not divide "
		  "num_attention_heads 32" },
		{ "num_key_value_heads", "64", "num_key_value_heads: 64 does not divide" },
		{ "num_attention_heads", "24", "num_attention_heads: 24 heads do not divide "
		  "hidden_size 4096" },
		{ "rms_norm_eps", "\"1e-5\"", "rms_norm_eps: not a number" },
		{ "rms_norm_eps", "0", "rms_norm_eps: 0 is not a number > 0" },
		{ "rope_theta", "-1", "rope_theta: -1 is not a number > 0" },
		{ "tie_word_embeddings", "0", "tie_word_embeddings: not true or false" },
		{ "hidden_act", "\"gelu\"", "hidden_act: \"gelu\" is not supported (Llama's MLP is "
		  "SwiGLU)" },
		{ "attention_bias", "true", "attention_bias: true is not supported" },
		{ "mlp_bias", "true", "mlp_bias: true is not supported" },
		{ "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}",
		  "rope_scaling: rope_type: \"yarn\" is not supported" },
		{ "rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}",
		  "rope_scaling: type: \"linear\" is not supported" },
		{ "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,"
		  " \"original_max_position_embeddings\": 8192}",
		  "rope_scaling: high_freq_factor: missing" },
		{ "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0,"
		  " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
		  "rope_scaling: high_freq_factor 4 is not above low_freq_factor 4" },
		{ "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 0.5, \"low_freq_factor\": 1.0,"
		  " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
		  "rope_scaling: factor: 0.5 is below 1" },
		{ "rope_scaling", "{\"factor\": 8.0}", "rope_scaling: rope_type: missing" },
		{ "rope_scaling", "8", "rope_scaling: not an object or null" },
		{ "torch_dtype", "[]", "torch_dtype: not a string" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct hf_config c;
		const char *path = config_of(llama_with(cases[i].key, cases[i].value));
		char want[PATH_MAX + 256];

		ck_assert_msg(hf_config_read(path, &c, err, sizeof err) == -1, "case %zu accepted",
			      i);
		snprintf(want, sizeof want, "%s: %s", path, cases[i].want);
		ck_assert_msg(!strncmp(err, want, strlen(want)), "case %zu:\n  %s\nnot\n  %s", i, err,
			      want);
	}
}
END_TEST

START_TEST(gpt2_refusals_name_file_and_key)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 12,"
		  " \"vocab_size\": 50257}", "n_positions: missing" },
		{ "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 10,"
		  " \"n_positions\": 1024, \"vocab_size\": 50257}",
		  "n_head: 10 heads do not divide n_embd 768" },
		{ "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 12,"
		  " \"n_positions\": 1024, \"vocab_size\": 50257, \"activation_function\": \"relu\"}",
		  "activation_function: \"relu\" is not supported" },
		{ "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 12,"
		  " \"n_positions\": 1024, \"vocab_size\": 50257,"
		  " \"scale_attn_by_inverse_layer_idx\": true}",
		  "scale_attn_by_inverse_layer_idx: true is not supported" },
		{ "[1, 2]", "not a JSON object" },
		{ "{\"model_type\": \"gpt2\",", "config.json:1:" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct hf_config c;
		const char *path = config_of(cases[i].text);

		ck_assert_int_eq(hf_config_read(path, &c, err, sizeof err), -1);
		ck_assert_msg(strstr(err, path) && strstr(err, cases[i].want), "case %zu: %s", i, err);
	}
	{
		struct hf_config c;

		ck_assert_int_eq(hf_config_read(in_dir("nowhere.json"), &c, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "nowhere.json: cannot open: No such file"), "%s", err);
	}
}
END_TEST

/* ------------------------------------------------------------- writing */

static void assert_same_config(const struct hf_config *a, const struct hf_config *b)
{
	ck_assert_int_eq(a->arch, b->arch);
	ck_assert_int_eq(a->vocab_size, b->vocab_size);
	ck_assert_int_eq(a->hidden_size, b->hidden_size);
	ck_assert_int_eq(a->num_layers, b->num_layers);
	ck_assert_int_eq(a->num_heads, b->num_heads);
	ck_assert_int_eq(a->num_kv_heads, b->num_kv_heads);
	ck_assert_int_eq(a->head_dim, b->head_dim);
	ck_assert_int_eq(a->intermediate_size, b->intermediate_size);
	ck_assert_int_eq(a->max_position_embeddings, b->max_position_embeddings);
	ck_assert(a->norm_eps == b->norm_eps);
	ck_assert(a->rope_theta == b->rope_theta);
	ck_assert_int_eq(a->rope_scaling, b->rope_scaling);
	ck_assert(a->rope_factor == b->rope_factor);
	ck_assert(a->rope_low_freq_factor == b->rope_low_freq_factor);
	ck_assert(a->rope_high_freq_factor == b->rope_high_freq_factor);
	ck_assert_int_eq(a->rope_original_max_position_embeddings,
			 b->rope_original_max_position_embeddings);
	ck_assert_int_eq(a->tie_word_embeddings, b->tie_word_embeddings);
	ck_assert_str_eq(*a->torch_dtype ? a->torch_dtype : "float32", b->torch_dtype);
}

START_TEST(written_configs_read_back_equal)
{
	const char *texts[] = { gpt2_hub, llama31_8b, llama_with("rope_scaling", "null"),
				llama_with("tie_word_embeddings", "true") };

	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct hf_config a, b;

		ck_assert_msg(hf_config_read(config_of(texts[i]), &a, err, sizeof err) == 0, "%s", err);
		ck_assert_msg(hf_config_write(in_dir("out.json"), &a, err, sizeof err) == 0, "%s", err);
		ck_assert_msg(hf_config_read(in_dir("out.json"), &b, err, sizeof err) == 0, "%s", err);
		assert_same_config(&a, &b);
	}
}
END_TEST

START_TEST(written_config_is_what_from_pretrained_reads)
{
	struct hf_config c;
	char *text;

	ck_assert_int_eq(hf_config_read(config_of(llama31_8b), &c, err, sizeof err), 0);
	ck_assert_int_eq(hf_config_write(in_dir("out.json"), &c, err, sizeof err), 0);
	text = file_text(in_dir("out.json"), 1 << 16);
	ck_assert_msg(strstr(text, "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ]"), "%s", text);
	ck_assert_msg(strstr(text, "\"model_type\": \"llama\""), "%s", text);
	ck_assert_msg(strstr(text, "\"rms_norm_eps\": 1e-5,"), "%s", text); /* not 1.0000000000000001e-5 */
	ck_assert_msg(strstr(text, "\"rope_theta\": 500000.0,"), "%s", text);
	ck_assert_msg(strstr(text, "\"rope_type\": \"llama3\""), "%s", text);
	ck_assert_msg(strstr(text, "\"torch_dtype\": \"bfloat16\""), "%s", text);
	ck_assert_msg(strstr(text, "\"vocab_size\": 128256\n}\n"), "%s", text); /* sorted, last */
	free(text);
	ck_assert_int_eq(hf_config_read(config_of(gpt2_hub), &c, err, sizeof err), 0);
	ck_assert_int_eq(hf_config_write(in_dir("out.json"), &c, err, sizeof err), 0);
	text = file_text(in_dir("out.json"), 1 << 16);
	ck_assert_msg(strstr(text, "\"GPT2LMHeadModel\""), "%s", text);
	ck_assert_msg(strstr(text, "\"n_inner\": null"), "%s", text);
	ck_assert_msg(strstr(text, "\"activation_function\": \"gelu_new\""), "%s", text);
	ck_assert_msg(strstr(text, "\"torch_dtype\": \"float32\""), "%s", text);
	free(text);
}
END_TEST

START_TEST(configs_of_the_python_reference_read_value_for_value)
{
	char path[PATH_MAX + 64];
	struct hf_config c;

	ck_assert_int_eq(run_ref("write-config", dir), 0);
	snprintf(path, sizeof path, "%s", in_dir("llama/config.json"));
	ck_assert_msg(hf_config_read(path, &c, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(c.arch, HF_LLAMA);
	ck_assert_int_eq(c.hidden_size, 96);
	ck_assert_int_eq(c.intermediate_size, 256);
	ck_assert_int_eq(c.num_layers, 3);
	ck_assert_int_eq(c.num_heads, 6);
	ck_assert_int_eq(c.num_kv_heads, 2);
	ck_assert_int_eq(c.head_dim, 16);
	ck_assert_int_eq(c.vocab_size, 128256);
	ck_assert_int_eq(c.max_position_embeddings, 131072);
	ck_assert(c.norm_eps == 1e-5 && c.rope_theta == 500000.0);
	ck_assert(c.rope_scaling && c.rope_factor == 8 && c.rope_low_freq_factor == 1 &&
		  c.rope_high_freq_factor == 4 && c.rope_original_max_position_embeddings == 8192);
	ck_assert(!c.tie_word_embeddings);
	ck_assert_str_eq(c.torch_dtype, "bfloat16");
	mkdir(in_dir("llama-out"), 0755);
	ck_assert_int_eq(hf_config_write(in_dir("llama-out/config.json"), &c, err, sizeof err), 0);
	snprintf(path, sizeof path, "%s", in_dir("gpt2/config.json"));
	ck_assert_msg(hf_config_read(path, &c, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(c.arch, HF_GPT2);
	ck_assert(c.hidden_size == 768 && c.num_layers == 12 && c.num_heads == 12);
	ck_assert(c.max_position_embeddings == 1024 && c.vocab_size == 50257);
	ck_assert(c.norm_eps == 1e-5 && c.tie_word_embeddings);
	mkdir(in_dir("gpt2-out"), 0755);
	ck_assert_int_eq(hf_config_write(in_dir("gpt2-out/config.json"), &c, err, sizeof err), 0);
	/* and what was written back is what the reference expects */
	ck_assert_int_eq(run_ref("check-config", dir), 0);
}
END_TEST

/* --------------------------------------------------------------- names */

START_TEST(every_weight_has_its_hugging_face_name)
{
	static const struct {
		enum hf_arch arch;
		enum hf_kind kind;
		const char *name;
	} cases[] = {
		{ HF_LLAMA, HF_TOKEN_EMBED, "model.embed_tokens.weight" },
		{ HF_LLAMA, HF_ATTN_NORM, "model.layers.3.input_layernorm.weight" },
		{ HF_LLAMA, HF_Q, "model.layers.3.self_attn.q_proj.weight" },
		{ HF_LLAMA, HF_K, "model.layers.3.self_attn.k_proj.weight" },
		{ HF_LLAMA, HF_V, "model.layers.3.self_attn.v_proj.weight" },
		{ HF_LLAMA, HF_ATTN_OUT, "model.layers.3.self_attn.o_proj.weight" },
		{ HF_LLAMA, HF_MLP_NORM, "model.layers.3.post_attention_layernorm.weight" },
		{ HF_LLAMA, HF_MLP_GATE, "model.layers.3.mlp.gate_proj.weight" },
		{ HF_LLAMA, HF_MLP_UP, "model.layers.3.mlp.up_proj.weight" },
		{ HF_LLAMA, HF_MLP_DOWN, "model.layers.3.mlp.down_proj.weight" },
		{ HF_LLAMA, HF_FINAL_NORM, "model.norm.weight" },
		{ HF_LLAMA, HF_LM_HEAD, "lm_head.weight" },
		{ HF_GPT2, HF_TOKEN_EMBED, "transformer.wte.weight" },
		{ HF_GPT2, HF_POS_EMBED, "transformer.wpe.weight" },
		{ HF_GPT2, HF_ATTN_NORM, "transformer.h.3.ln_1.weight" },
		{ HF_GPT2, HF_ATTN_NORM_BIAS, "transformer.h.3.ln_1.bias" },
		{ HF_GPT2, HF_QKV, "transformer.h.3.attn.c_attn.weight" },
		{ HF_GPT2, HF_QKV_BIAS, "transformer.h.3.attn.c_attn.bias" },
		{ HF_GPT2, HF_ATTN_OUT, "transformer.h.3.attn.c_proj.weight" },
		{ HF_GPT2, HF_ATTN_OUT_BIAS, "transformer.h.3.attn.c_proj.bias" },
		{ HF_GPT2, HF_MLP_NORM, "transformer.h.3.ln_2.weight" },
		{ HF_GPT2, HF_MLP_NORM_BIAS, "transformer.h.3.ln_2.bias" },
		{ HF_GPT2, HF_MLP_UP, "transformer.h.3.mlp.c_fc.weight" },
		{ HF_GPT2, HF_MLP_UP_BIAS, "transformer.h.3.mlp.c_fc.bias" },
		{ HF_GPT2, HF_MLP_DOWN, "transformer.h.3.mlp.c_proj.weight" },
		{ HF_GPT2, HF_MLP_DOWN_BIAS, "transformer.h.3.mlp.c_proj.bias" },
		{ HF_GPT2, HF_FINAL_NORM, "transformer.ln_f.weight" },
		{ HF_GPT2, HF_FINAL_NORM_BIAS, "transformer.ln_f.bias" },
		{ HF_GPT2, HF_LM_HEAD, "lm_head.weight" },
	};
	char name[128], bare[128];
	size_t n;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *prefix = hf_base_prefix(cases[i].arch);
		const char *want_bare = strncmp(cases[i].name, prefix, strlen(prefix)) ?
			cases[i].name : cases[i].name + strlen(prefix);

		ck_assert_int_eq(hf_weight_name(cases[i].arch, cases[i].kind, 3, true, name,
						sizeof name), 0);
		ck_assert_str_eq(name, cases[i].name);
		ck_assert_int_eq(hf_weight_name(cases[i].arch, cases[i].kind, 3, false, bare,
						sizeof bare), 0);
		ck_assert_str_eq(bare, want_bare);
	}
	/* each table covers what the list above says, no more */
	hf_weights(HF_LLAMA, &n);
	ck_assert_uint_eq(n, 12);
	hf_weights(HF_GPT2, &n);
	ck_assert_uint_eq(n, 17);
	/* kinds of the other architecture have no name */
	ck_assert_int_eq(hf_weight_name(HF_LLAMA, HF_QKV, 0, true, name, sizeof name), -1);
	ck_assert_int_eq(hf_weight_name(HF_GPT2, HF_MLP_GATE, 0, true, name, sizeof name), -1);
	ck_assert_int_eq(hf_weight_name(HF_LLAMA, HF_MLP_UP, 3, true, name, 10), -1);
}
END_TEST

START_TEST(conv1d_weights_are_stored_transposed)
{
	size_t n;
	const struct hf_weight *w = hf_weights(HF_LLAMA, &n);

	for (size_t i = 0; i < n; i++)
		ck_assert_msg(!w[i].transposed, "%s", w[i].name);
	ck_assert(hf_transposed(HF_GPT2, HF_QKV));
	ck_assert(hf_transposed(HF_GPT2, HF_ATTN_OUT));
	ck_assert(hf_transposed(HF_GPT2, HF_MLP_UP));
	ck_assert(hf_transposed(HF_GPT2, HF_MLP_DOWN));
	ck_assert(!hf_transposed(HF_GPT2, HF_TOKEN_EMBED));
	ck_assert(!hf_transposed(HF_GPT2, HF_QKV_BIAS));
	ck_assert(!hf_transposed(HF_GPT2, HF_LM_HEAD));
}
END_TEST

START_TEST(shapes_follow_config_json)
{
	struct hf_config c;
	int64_t s[2];

	ck_assert_int_eq(hf_config_read(config_of(llama31_8b), &c, err, sizeof err), 0);
	ck_assert_int_eq(hf_weight_shape(&c, HF_TOKEN_EMBED, s), 2);
	ck_assert(s[0] == 128256 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_Q, s), 2);
	ck_assert(s[0] == 4096 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_K, s), 2);       /* 8 kv heads of 128 */
	ck_assert(s[0] == 1024 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_V, s), 2);
	ck_assert(s[0] == 1024 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_ATTN_OUT, s), 2);
	ck_assert(s[0] == 4096 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_MLP_GATE, s), 2);
	ck_assert(s[0] == 14336 && s[1] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_MLP_DOWN, s), 2);
	ck_assert(s[0] == 4096 && s[1] == 14336);
	ck_assert_int_eq(hf_weight_shape(&c, HF_ATTN_NORM, s), 1);
	ck_assert(s[0] == 4096);
	ck_assert_int_eq(hf_weight_shape(&c, HF_LM_HEAD, s), 2);
	ck_assert_int_eq(hf_weight_shape(&c, HF_QKV, s), 0);       /* GPT-2's */
	c.tie_word_embeddings = true;
	ck_assert_int_eq(hf_weight_shape(&c, HF_LM_HEAD, s), 0);
	/* GPT-2: Conv1D weights [in, out] */
	ck_assert_int_eq(hf_config_read(config_of(gpt2_hub), &c, err, sizeof err), 0);
	ck_assert_int_eq(hf_weight_shape(&c, HF_QKV, s), 2);
	ck_assert(s[0] == 768 && s[1] == 3 * 768);
	ck_assert_int_eq(hf_weight_shape(&c, HF_QKV_BIAS, s), 1);
	ck_assert(s[0] == 3 * 768);
	ck_assert_int_eq(hf_weight_shape(&c, HF_MLP_UP, s), 2);
	ck_assert(s[0] == 768 && s[1] == 3072);
	ck_assert_int_eq(hf_weight_shape(&c, HF_MLP_DOWN, s), 2);
	ck_assert(s[0] == 3072 && s[1] == 768);
	ck_assert_int_eq(hf_weight_shape(&c, HF_POS_EMBED, s), 2);
	ck_assert(s[0] == 1024 && s[1] == 768);
	ck_assert_int_eq(hf_weight_shape(&c, HF_LM_HEAD, s), 0);   /* tied */
	ck_assert_int_eq(hf_weight_shape(&c, HF_MLP_GATE, s), 0);  /* Llama's */
}
END_TEST

/* A tiny Llama (C 8, 2 heads of 4, 1 kv head, I 12, V 10, 2 layers) as a
 * safetensors file, with or without the "model." prefix; one weight may
 * be given a wrong shape. */
static const char *tiny_llama(struct hf_config *c, bool prefixed, enum hf_kind bad)
{
	static float zeros[12 * 8];
	struct st_out t[32];
	static char names[32][96];
	size_t n = 0, nw;
	const struct hf_weight *w = hf_weights(HF_LLAMA, &nw);

	ck_assert_int_eq(hf_config_read(config_of(
		"{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 2,"
		" \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"intermediate_size\": 12,"
		" \"vocab_size\": 10, \"max_position_embeddings\": 16}"), c, err, sizeof err), 0);
	for (size_t i = 0; i < nw; i++)
		for (int l = 0; l < (w[i].per_layer ? c->num_layers : 1); l++) {
			memset(&t[n], 0, sizeof t[n]);
			t[n].ndim = hf_weight_shape(c, w[i].kind, t[n].shape);
			ck_assert_int_eq(hf_weight_name(HF_LLAMA, w[i].kind, l, prefixed, names[n],
							sizeof names[n]), 0);
			t[n].name = names[n];
			t[n].data = zeros;
			if (w[i].kind == bad && l == 1)
				t[n].shape[0]--;
			n++;
		}
	ck_assert_int_eq(st_write(in_dir("model.safetensors"), t, n, ST_BF16, NULL, err,
				  sizeof err), 0);
	return in_dir("model.safetensors");
}

START_TEST(weights_are_found_with_or_without_the_prefix)
{
	for (int prefixed = 0; prefixed <= 1; prefixed++) {
		struct hf_config c;
		struct safetensors *st;
		const struct st_tensor *t;
		bool p;

		tiny_llama(&c, prefixed, HF_NUM_KINDS);
		st = st_open_dir(dir, err, sizeof err);
		ck_assert_msg(st, "%s", err);
		ck_assert_int_eq(hf_detect_prefix(st, HF_LLAMA, &p, err, sizeof err), 0);
		ck_assert_int_eq(p, prefixed);
		t = hf_weight_find(st, &c, "config.json", HF_K, 1, p, err, sizeof err);
		ck_assert_msg(t, "%s", err);
		ck_assert(t->shape[0] == 4 && t->shape[1] == 8);
		ck_assert_ptr_nonnull(hf_weight_find(st, &c, "config.json", HF_LM_HEAD, 0, p, err,
						     sizeof err));
		/* GPT-2's names are not there */
		ck_assert_int_eq(hf_detect_prefix(st, HF_GPT2, &p, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "neither transformer.wte.weight nor wte.weight is there: "
				     "not the weights of a gpt2 model"), "%s", err);
		st_close(st);
	}
}
END_TEST

START_TEST(a_wrong_shape_names_tensor_file_config_and_both_shapes)
{
	struct hf_config c;
	struct safetensors *st;
	const char *path = tiny_llama(&c, true, HF_MLP_UP);
	char want[PATH_MAX + 256];

	st = st_open_dir(dir, err, sizeof err);
	ck_assert_msg(st, "%s", err);
	ck_assert_ptr_nonnull(hf_weight_find(st, &c, "DIR/config.json", HF_MLP_UP, 0, true, err,
					     sizeof err));
	ck_assert_ptr_null(hf_weight_find(st, &c, "DIR/config.json", HF_MLP_UP, 1, true, err,
					  sizeof err));
	snprintf(want, sizeof want, "model.layers.1.mlp.up_proj.weight in %s is [11, 8], "
		 "DIR/config.json says [12, 8]", path);
	ck_assert_str_eq(err, want);
	/* a missing layer */
	ck_assert_ptr_null(hf_weight_find(st, &c, "DIR/config.json", HF_Q, 2, true, err, sizeof err));
	snprintf(want, sizeof want, "model.layers.2.self_attn.q_proj.weight: not in %s", path);
	ck_assert_str_eq(err, want);
	/* a tied model has no LM head to find */
	c.tie_word_embeddings = true;
	ck_assert_ptr_null(hf_weight_find(st, &c, "DIR/config.json", HF_LM_HEAD, 0, true, err,
					  sizeof err));
	ck_assert_msg(strstr(err, "DIR/config.json: tie_word_embeddings is true"), "%s", err);
	st_close(st);
}
END_TEST

static Suite *hf_suite(void)
{
	Suite *s = suite_create("hf");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, gpt2_reads_with_transformers_defaults);
	tcase_add_test(tc, llama31_reads_every_key);
	tcase_add_test(tc, llama_defaults_are_transformers_defaults);
	tcase_add_test(tc, what_the_struct_cannot_say_is_refused_by_file_and_key);
	tcase_add_test(tc, gpt2_refusals_name_file_and_key);
	tcase_add_test(tc, written_configs_read_back_equal);
	tcase_add_test(tc, written_config_is_what_from_pretrained_reads);
	tcase_add_test(tc, configs_of_the_python_reference_read_value_for_value);
	tcase_add_test(tc, every_weight_has_its_hugging_face_name);
	tcase_add_test(tc, conv1d_weights_are_stored_transposed);
	tcase_add_test(tc, shapes_follow_config_json);
	tcase_add_test(tc, weights_are_found_with_or_without_the_prefix);
	tcase_add_test(tc, a_wrong_shape_names_tensor_file_config_and_both_shapes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hf_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
