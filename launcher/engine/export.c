/*
 * launcher/engine/export.c - `stork export [--format F] [--dtype D]
 * CHECKPOINT OUT`: a checkpoint's model, whole or sharded over any
 * tensor/pipeline layout, as one model file (--format llmc, the default:
 * llm.c's format for GPT-2, Stork's for Llama) or as a Hugging Face
 * directory (--format safetensors: config.json and model.safetensors,
 * fp32 or bf16, with the tokenizer the run's data was made with).
 *
 * CHECKPOINT is a step_N directory, a checkpoints/ directory or a run
 * directory (then its newest usable checkpoint). Files are written under
 * temporary names and renamed, so a failed export leaves nothing behind.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/model/hf_model.h"
#include "launcher/engine/export_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void skip_notice(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "stork export: %s\n", msg);
}

static int usage(int ok)
{
	fprintf(ok ? stdout : stderr,
		"usage: stork export [--format llmc|safetensors] [--dtype fp32|bf16] CHECKPOINT OUT\n"
		"Write the model of a checkpoint (a step_N directory, a checkpoints/ directory\n"
		"or a run directory), whatever layout wrote it, as one model file OUT (llmc:\n"
		"llm.c's format for GPT-2, Stork's for Llama) or as a Hugging Face directory OUT\n"
		"(safetensors: config.json and model.safetensors, in --dtype, default fp32, and\n"
		"the tokenizer the run's shards were made with: its files, tokenizer_config.json,\n"
		"and its first and last tokens as config.json's bos_token_id and eos_token_id).\n");
	return ok ? 0 : STORK_EXIT_USAGE;
}

/* The llm.c (or Stork Llama) model file, through a temporary name. */
static int export_llmc(const char *dir, const char *out)
{
	char tmp[4200], err[1024];

	snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
	if (ckpt_export(dir, tmp, err, sizeof err) < 0) {
		unlink(tmp);
		fprintf(stderr, "stork export: %s\n", err);
		return STORK_EXIT_CHECKPOINT_BAD;
	}
	if (rename(tmp, out) < 0) {
		fprintf(stderr, "stork export: cannot rename %s to %s: %s\n", tmp, out,
			strerror(errno));
		unlink(tmp);
		return STORK_EXIT_INTERNAL;
	}
	return 0;
}

/*
 * config.json and model.safetensors, and the tokenizer the run's data was
 * made with (export_tokenizer.h) beside them: its first and last tokens in
 * config.json, its files, tokenizer_config.json.
 */
static int export_safetensors(const char *dir, const char *out, enum st_dtype dtype)
{
	struct export_tokenizer tok;
	struct ckpt_full f;
	char err[1024], note[8800];
	int rc;

	if (export_tokenizer_find(dir, &tok, err, sizeof err) < 0) {
		fprintf(stderr, "stork export: %s\n", err);
		return STORK_EXIT_DATA;
	}
	if (ckpt_load_full(dir, NULL, &f, err, sizeof err) < 0) {
		fprintf(stderr, "stork export: %s\n", err);
		return STORK_EXIT_CHECKPOINT_BAD;
	}
	rc = hf_model_export(&f.config, f.params, out, dtype, tok.bos_id, tok.eos_id, err,
			     sizeof err);
	ckpt_full_free(&f);
	if (rc == 0 && tok.manifest[0])
		rc = export_tokenizer_write(&tok, out, note, sizeof note, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "stork export: %s\n", err);
		return STORK_EXIT_INTERNAL;
	}
	if (tok.manifest[0] && note[0])
		fprintf(stderr, "stork export: %s\n", note);
	else if (tok.manifest[0])
		printf("tokenizer: %s (%s), first and last tokens %s %d and %s %d\n", tok.path,
		       tok.family, tok.bos, tok.bos_id, tok.eos, tok.eos_id);
	return 0;
}

int cmd_export(int argc, char **argv)
{
	const char *format = "llmc", *dtype = NULL;
	char dir[4096];
	int i = 1, rc;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--help"))
			return usage(1);
		if (i + 1 < argc && !strcmp(argv[i], "--format"))
			format = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--dtype"))
			dtype = argv[++i];
		else
			return usage(0);
	}
	if (argc - i != 2)
		return usage(0);
	if (strcmp(format, "llmc") && strcmp(format, "safetensors")) {
		fprintf(stderr, "stork export: --format %s: use llmc or safetensors\n", format);
		return STORK_EXIT_USAGE;
	}
	if (dtype && strcmp(dtype, "fp32") && strcmp(dtype, "bf16")) {
		fprintf(stderr, "stork export: --dtype %s: use fp32 or bf16\n", dtype);
		return STORK_EXIT_USAGE;
	}
	if (dtype && !strcmp(format, "llmc")) {
		fprintf(stderr, "stork export: --dtype is for --format safetensors (llm.c files "
				"here are fp32)\n");
		return STORK_EXIT_USAGE;
	}
	if (!ckpt_find_any(argv[i], dir, sizeof dir, skip_notice, NULL)) {
		fprintf(stderr, "stork export: %s holds no usable checkpoint\n", argv[i]);
		return STORK_EXIT_CHECKPOINT_BAD;
	}
	rc = !strcmp(format, "llmc") ?
		     export_llmc(dir, argv[i + 1]) :
		     export_safetensors(dir, argv[i + 1],
					dtype && !strcmp(dtype, "bf16") ? ST_BF16 : ST_F32);
	if (!rc)
		printf("exported %s to %s\n", dir, argv[i + 1]);
	return rc;
}
