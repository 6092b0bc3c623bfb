/*
 * t/tools/ckpt_resum.c - what anyone who edits a checkpoint can do: compute
 * each file's size and XXH3-64 again and write them into its manifest.
 *
 *   ckpt_resum CHECKPOINT-DIR
 *
 * A checkpoint's checksums catch corruption, not intent (they are not
 * secret), so the tests that hand Stork a crafted checkpoint
 * (t/train/checkpoint.bats) make its manifest agree with it, and what
 * refuses the file is the reader's own judgement of its fields.
 */
#include "config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The size and XXH3-64 of path, or -1. */
static int sum_file(const char *path, uint64_t *size, uint64_t *sum)
{
	XXH3_state_t *x = XXH3_createState();
	FILE *f = fopen(path, "rb");
	char buf[1 << 16];
	size_t n;

	if (!x || !f || XXH3_64bits_reset(x) == XXH_ERROR) {
		if (f)
			fclose(f);
		XXH3_freeState(x);
		return -1;
	}
	*size = 0;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
		XXH3_64bits_update(x, buf, n);
		*size += n;
	}
	fclose(f);
	*sum = XXH3_64bits_digest(x);
	XXH3_freeState(x);
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096], hex[17];
	json_error_t jerr;
	json_t *m, *files, *f;
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: ckpt_resum CHECKPOINT-DIR\n");
		return 2;
	}
	snprintf(path, sizeof path, "%s/manifest.json", argv[1]);
	if (!(m = json_load_file(path, 0, &jerr)) || !json_is_array(files = json_object_get(m, "files"))) {
		fprintf(stderr, "ckpt_resum: %s: %s\n", path, m ? "no files array" : jerr.text);
		return 1;
	}
	json_array_foreach(files, i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));
		uint64_t size, sum;

		snprintf(path, sizeof path, "%s/%s", argv[1], name ? name : "");
		if (!name || sum_file(path, &size, &sum) < 0) {
			fprintf(stderr, "ckpt_resum: cannot read %s\n", path);
			return 1;
		}
		snprintf(hex, sizeof hex, "%016" PRIx64, sum);
		json_object_set_new(f, "size", json_integer((json_int_t)size));
		json_object_set_new(f, "checksum", json_string(hex));
	}
	snprintf(path, sizeof path, "%s/manifest.json", argv[1]);
	if (json_dump_file(m, path, JSON_INDENT(2)) < 0) {
		fprintf(stderr, "ckpt_resum: cannot write %s\n", path);
		return 1;
	}
	json_decref(m);
	return 0;
}
