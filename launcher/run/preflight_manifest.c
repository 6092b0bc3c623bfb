/*
 * launcher/run/preflight_manifest.c - shards made by `stork prep --tokenizer`
 * against the model that would train on them (see preflight.h).
 *
 * prep writes NAME.manifest.json beside NAME_train[_NNNNNN].bin and
 * NAME_val[...].bin: the tokenizer's file, SHA-256, format and family, and
 * the vocabulary. Before a run starts, each local shard's manifest (when
 * it has one) is held against the model: the model's vocabulary must be
 * the tokenizer's, Llama 3's tokens need model.arch llama, and a
 * model.init_from directory that holds a tokenizer.json must hold the one
 * the shards were made with.
 */
#include "config.h"
#include "launcher/run/preflight.h"
#include "launcher/sha256_file.h"
#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"
#include "lib/formats/token_shard.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int preflight_manifest(const struct stork_config *c, const char *key, const char *shard,
		       int model_vocab, char *checked, size_t checked_len, char *err,
		       size_t errlen)
{
	char path[PATH_MAX], tokjson[PATH_MAX + 32], sha[65];
	struct stat st;
	json_t *m, *tok;
	const char *family, *want;
	json_int_t vocab;
	int rc = 0;

	if (token_shard_manifest_path(shard, path, sizeof path) || stat(path, &st))
		return 0; /* not made by stork prep --tokenizer */
	if (!strcmp(path, checked))
		return 0; /* this manifest held already, for a shard before this one */
	if (!(m = sj_load_file_strict(path, 1 << 20, err, errlen)))
		return STORK_EXIT_DATA;
	tok = json_object_get(m, "tokenizer");
	family = json_string_value(json_object_get(tok, "family"));
	want = json_string_value(json_object_get(tok, "sha256"));
	vocab = json_integer_value(json_object_get(m, "vocab_size"));
	if (model_vocab > 0 && vocab != model_vocab)
		rc = msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "%s: %s was made with a tokenizer of %lld tokens (%s), but the model "
			      "has %d (%s): set model.vocab_size: %lld", key, shard, (long long)vocab,
			      path, model_vocab,
			      c->model.init_from[0] ? "model.init_from" : config_origin(c, "model.vocab_size"),
			      (long long)vocab);
	else if (family && !strcmp(family, "llama3") && c->model.arch != STORK_ARCH_LLAMA &&
		 !c->model.init_from[0])
		rc = msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "%s: %s holds Llama 3's tokens (%s), but model.arch is gpt2 (%s): set "
			      "model.arch: llama", key, shard, path, config_origin(c, "model.arch"));
	if (!rc && c->model.init_from[0] && want) {
		snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", c->model.init_from);
		if (stat(tokjson, &st) == 0 && file_sha256(tokjson, sha) == 0 && strcmp(sha, want))
			rc = msg_fail(err, errlen, STORK_EXIT_CONFIG,
				      "%s: %s was made with another tokenizer (%s, sha256 %.12s...) "
				      "than model.init_from's %s (sha256 %.12s...): prepare the data "
				      "with stork prep --tokenizer %s", key, shard,
				      json_string_value(json_object_get(tok, "path")) ?: "?", want,
				      tokjson, sha, tokjson);
	}
	json_decref(m);
	if (!rc)
		snprintf(checked, checked_len, "%s", path);
	return rc;
}
