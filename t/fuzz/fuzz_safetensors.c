/*
 * t/fuzz/fuzz_safetensors.c - a Hugging Face .safetensors file
 * (lib/formats/safetensors.c): st_open checks its header against the file; every
 * tensor of a file it accepts is then read as the loaders read them:
 * whole, its last row, and (2-D) the right half of its columns, and
 * looked up by name and shape.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "lib/formats/safetensors.h"

#include <limits.h>
#include <stdlib.h>

/* Read t every way a loader does; buf holds t->nelem floats. */
static void read_tensor(const struct safetensors *st, const struct st_tensor *t, float *buf)
{
	char err[1024];
	int64_t rows = t->ndim ? t->shape[0] : 0, cols = t->ndim == 2 ? t->shape[1] : 0;

	st_read(st, t, buf, err, sizeof err);
	if (rows > 0)
		st_read_rows(st, t, rows - 1, 1, buf, err, sizeof err);
	if (rows > 0 && cols > 0)
		st_read_block(st, t, 0, rows, cols / 2, cols - cols / 2, buf, err, sizeof err);
	st_expect(st, t->name, t->ndim, t->shape, "fuzz", err, sizeof err);
	st_find(st, t->name);
	st_file_of(st, t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX], err[1024];
	struct safetensors *st;

	fuzz_write(path, sizeof path, "model.safetensors", data, size);
	if (!(st = st_open(path, err, sizeof err)))
		return 0;
	st_metadata(st, "format");
	for (size_t i = 0; i < st_count(st); i++) {
		const struct st_tensor *t = st_tensor_at(st, i);
		/* nelem is within the file: st_open held the header to it */
		float *buf = malloc((size_t)(t->nelem ? t->nelem : 1) * sizeof *buf);

		if (!buf)
			abort();
		read_tensor(st, t, buf);
		free(buf);
	}
	st_close(st);
	return 0;
}
