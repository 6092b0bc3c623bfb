/*
 * t/fuzz/fuzz_ckpt_manifest.c - a checkpoint's manifest.json as a resume
 * reads it (daemon/engine/checkpoint/checkpoint.c): ckpt_find_any on a step directory
 * verifies the files the manifest lists, by size and checksum (XXH3-64,
 * or the first format's), and a checkpoint that verifies has its
 * state.json and layout read.
 *
 * The directory holds, besides the input as manifest.json, the files a
 * plain and a two-shard checkpoint have, small stand-ins with fixed
 * contents; the seeds list them with their true sizes and checksums, so
 * that mutations start from a manifest that verifies.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/engine/checkpoint/checkpoint.h"

#include <limits.h>
#include <string.h>

/* state.json of a dp 1 x tp 2 checkpoint written by `stork run` */
static const char state_json[] =
	"{\n  \"step\": 4,\n  \"train_data\": {\n    \"epoch\": 0,\n    \"shard\": 0,\n"
	"    \"sample\": 8,\n    \"rng\": \"190b153e96de490d\"\n  },\n"
	"  \"config_hash\": \"0ef418a72df2babf\",\n  \"model_hash\": \"9155d2f52733b60a\",\n"
	"  \"restart_count\": 0,\n  \"global_batch\": 2,\n  \"settings\": {\n"
	"    \"batch_size\": 2,\n    \"grad_accum\": 1,\n    \"seq_len\": 16,\n    \"dp\": 1,\n"
	"    \"tp\": 2,\n    \"pp\": 1,\n    \"zero\": 0,\n    \"steps\": 4,\n    \"lr\": 0.001\n"
	"  },\n  \"layout\": {\n    \"world\": 2,\n    \"dp\": 1,\n    \"tp\": 2,\n    \"pp\": 1,\n"
	"    \"zero\": 0\n  }\n}";

static const struct {
	const char *name, *text;
} files[] = {
	{ "step_00000004/model.bin", "model.bin stand-in\n" },
	{ "step_00000004/optimizer.bin", "optimizer.bin stand-in\n" },
	{ "step_00000004/shard-00000.bin", "shard 0 stand-in\n" },
	{ "step_00000004/shard-00001.bin", "shard 1 stand-in\n" },
	{ "step_00000004/state.json", state_json },
};

static void ignore(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char step_dir[PATH_MAX];
	char path[PATH_MAX], dir[PATH_MAX], err[1024];
	struct ckpt_state st;
	struct ckpt_layout l;

	if (!step_dir[0]) {
		for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
			fuzz_write(path, sizeof path, files[i].name, files[i].text,
				   strlen(files[i].text));
		*strrchr(path, '/') = '\0';
		strcpy(step_dir, path);
	}
	fuzz_write(path, sizeof path, "step_00000004/manifest.json", data, size);
	if (ckpt_find_any(step_dir, dir, sizeof dir, ignore, NULL) == 1) {
		ckpt_read_state(dir, &st, err, sizeof err);
		ckpt_read_layout(dir, &l, err, sizeof err);
	}
	return 0;
}
