/*
 * launcher/engine/export_tokenizer.c - see export_tokenizer.h.
 */
#include "config.h"
#include "launcher/engine/export_tokenizer.h"
#include "launcher/sha256_file.h"

#include "lib/bounded.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"
#include "lib/formats/token_shard.h"
#include "lib/io/atomic_file.h"
#include "lib/run/stage_path.h"
#include "lib/url.h"

#include <glob.h>
#include <stdbool.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TOKENIZER_MAX (256 << 20) /* a tokenizer file is a few MB; a larger one is refused */

/* RUN of RUN/checkpoints/step_N into run; 0, or -1 when dir is not inside a run. */
static int run_of(const char *ckpt_dir, char *run, size_t len)
{
	char *slash;

	if ((size_t)snprintf(run, len, "%s", ckpt_dir) >= len)
		return -1;
	/* less /step_N, then less /checkpoints */
	if (!(slash = strrchr(run, '/')) || slash == run)
		return -1;
	*slash = '\0';
	if (!(slash = strrchr(run, '/')) || slash == run || strcmp(slash + 1, "checkpoints"))
		return -1;
	*slash = '\0';
	return 0;
}

/*
 * Where the run's first training shard is now: a URL's staged copy, a
 * path as the run gave it (relative to where it started: tried from here,
 * then from the directory that holds run.dir).
 */
static int first_shard(const struct stork_config *cfg, const char *run, char *out, size_t len)
{
	const char *want = cfg->data.train.n ? cfg->data.train.v[0] : NULL;
	char pattern[8192], stage[4096];
	glob_t gl;
	int rc = -1;

	if (!want)
		return -1;
	if (url_is_http(want)) {
		if (stage_dir_resolve(cfg->data.stage_dir, stage, sizeof stage) < 0 ||
		    stage_local_path(stage, want, pattern, sizeof pattern) < 0)
			return -1;
	} else if (want[0] == '/' || cfg->run.dir[0] == '/') {
		snprintf(pattern, sizeof pattern, "%s", want);
	} else {
		/* RUN is SUBMIT/run.dir/NAME: SUBMIT is RUN less run.dir's parts and NAME */
		char submit[4096];
		int parts = 2; /* NAME, and run.dir's first part */

		snprintf(submit, sizeof submit, "%s", run);
		for (const char *p = cfg->run.dir; *p; p++)
			parts += *p == '/' && p[1] && p[1] != '/';
		for (int i = 0; i < parts; i++) {
			char *slash = strrchr(submit, '/');

			if (!slash) {
				snprintf(submit, sizeof submit, ".");
				break;
			}
			slash[slash == submit] = '\0'; /* "/x" leaves "/" */
		}
		if (glob(want, 0, NULL, &gl) == 0 && gl.gl_pathc) {
			rc = (size_t)snprintf(out, len, "%s", gl.gl_pathv[0]) < len ? 0 : -1;
			globfree(&gl);
			return rc;
		}
		snprintf(pattern, sizeof pattern, "%s/%s", submit, want);
	}
	if (glob(pattern, 0, NULL, &gl) == 0 && gl.gl_pathc)
		rc = (size_t)snprintf(out, len, "%s", gl.gl_pathv[0]) < len ? 0 : -1;
	globfree(&gl);
	return rc;
}

/* The id of the special token text in manifest m, or -1. */
static int special_id(json_t *m, const char *text)
{
	json_t *t;
	size_t i;

	json_array_foreach(json_object_get(m, "special_tokens"), i, t)
		if (json_is_string(json_object_get(t, "text")) &&
		    !strcmp(json_string_value(json_object_get(t, "text")), text))
			return (int)json_integer_value(json_object_get(t, "id"));
	return -1;
}

/* A text's first and last tokens, by the tokenizer's family. */
static void first_and_last(json_t *m, struct export_tokenizer *e)
{
	json_t *doc = json_object_get(m, "document_token");
	const char *bos = json_string_value(json_object_get(doc, "text")), *eos = bos;

	if (!strcmp(e->family, "llama3")) {
		bos = "<|begin_of_text|>";
		eos = "<|end_of_text|>";
	}
	if (!bos)
		return;
	e->bos_id = special_id(m, bos);
	e->eos_id = special_id(m, eos);
	snprintf(e->bos, sizeof e->bos, "%s", bos);
	snprintf(e->eos, sizeof e->eos, "%s", eos);
}

/* A string field of the manifest's "tokenizer" into out. */
static void tokenizer_field(json_t *m, const char *key, char *out, size_t len)
{
	const char *v = json_string_value(json_object_get(json_object_get(m, "tokenizer"), key));

	snprintf(out, len, "%s", v ? v : "");
}

int export_tokenizer_find(const char *ckpt_dir, struct export_tokenizer *e, char *err,
			  size_t errlen)
{
	struct stork_config cfg;
	char run[4096], config[4200], shard[8192];
	struct stat st;
	json_t *m;

	memset(e, 0, sizeof *e);
	e->bos_id = e->eos_id = -1;
	if (run_of(ckpt_dir, run, sizeof run) < 0)
		return 0;
	snprintf(config, sizeof config, "%s/config/stork.yaml", run);
	if (config_load(&cfg, config, err, errlen) < 0)
		return 0; /* a run directory of another version, or none: no tokenizer to give */
	if (first_shard(&cfg, run, shard, sizeof shard) == 0 &&
	    token_shard_manifest_path(shard, e->manifest, sizeof e->manifest) == 0 &&
	    stat(e->manifest, &st) < 0)
		e->manifest[0] = '\0';
	config_free(&cfg);
	if (!e->manifest[0])
		return 0;
	if (!(m = sj_load_file_strict(e->manifest, 1 << 20, err, errlen)))
		return -1;
	tokenizer_field(m, "family", e->family, sizeof e->family);
	tokenizer_field(m, "format", e->format, sizeof e->format);
	tokenizer_field(m, "path", e->path, sizeof e->path);
	tokenizer_field(m, "sha256", e->sha256, sizeof e->sha256);
	first_and_last(m, e);
	json_decref(m);
	return 0;
}

/* from (at most TOKENIZER_MAX bytes) copied to dir/name. 0, or -1 with a message. */
static int copy_file(const char *from, const char *dir, const char *name, char *err,
		     size_t errlen)
{
	char to[4200];
	FILE *f = fopen(from, "rb");
	char *buf = NULL;
	long n;
	int rc = -1;

	snprintf(to, sizeof to, "%s/%s", dir, name);
	if (!f || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || n > TOKENIZER_MAX ||
	    fseek(f, 0, SEEK_SET) < 0 || !(buf = malloc((size_t)n + 1)) ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n)
		msg_format(err, errlen, "cannot read the tokenizer's file %s", from);
	else
		rc = atomic_write_file_mode(to, buf, (size_t)n, 0644, err, errlen);
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

/* tokenizer_config.json: the class transformers loads it with, the first and last tokens. */
static int write_config(const struct export_tokenizer *e, const char *out, const char *klass,
			char *err, size_t errlen)
{
	char path[4200];
	json_t *v = json_pack("{s:s, s:s, s:s, s:b}", "tokenizer_class", klass, "bos_token", e->bos,
			      "eos_token", e->eos, "clean_up_tokenization_spaces", 0);
	int rc;

	snprintf(path, sizeof path, "%s/tokenizer_config.json", out);
	if (!v)
		return msg_fail(err, errlen, -1, "cannot write %s: out of memory", path);
	rc = sj_write_file(path, v, err, errlen);
	json_decref(v);
	return rc;
}

int export_tokenizer_write(const struct export_tokenizer *e, const char *out, char *note,
			   size_t notelen, char *err, size_t errlen)
{
	char sha[65], dir[4096], merges[4200];
	bool bpe = !strcmp(e->format, "encoder.json + vocab.bpe");

	note[0] = '\0';
	if (strcmp(e->format, "tokenizer.json") && !bpe) {
		msg_format(note, notelen, "the shards' tokenizer %s is a %s file, which has no Hugging "
			   "Face form: not copied", e->path, e->format);
		return 0;
	}
	if (file_sha256(e->path, sha) < 0 || strcmp(sha, e->sha256)) {
		msg_format(note, notelen, "the shards' tokenizer %s is gone or has changed since they "
			   "were made (its SHA-256 is not the one %s gives): not copied", e->path,
			   e->manifest);
		return 0;
	}
	if (!bpe)
		return copy_file(e->path, out, "tokenizer.json", err, errlen) < 0 ||
		       write_config(e, out, "PreTrainedTokenizerFast", err, errlen) < 0 ? -1 : 0;
	/* GPT-2's files under the names transformers' GPT2Tokenizer reads */
	snprintf(dir, sizeof dir, "%s", e->path);
	snprintf(merges, sizeof merges, "%s/vocab.bpe", dirname(dir));
	return copy_file(e->path, out, "vocab.json", err, errlen) < 0 ||
	       copy_file(merges, out, "merges.txt", err, errlen) < 0 ||
	       write_config(e, out, "GPT2Tokenizer", err, errlen) < 0 ? -1 : 0;
}
