/*
 * daemon/engine/model/model_file.c - model files: llm.c's format (a header
 * of 256 int32 and the parameters in fp32), read whole or as one rank's
 * shard, and written atomically. Llama's extra fields travel in the
 * header's spare ints, bit for bit.
 */
#include "config.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/model_internal.h"
#include "lib/io/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int32_t float_bits(float f)
{
	int32_t i;

	memcpy(&i, &f, sizeof i);
	return i;
}

static float bits_float(int32_t i)
{
	float f;

	memcpy(&f, &i, sizeof f);
	return f;
}

/* Llama's header: GPT-2's sizes in the same slots, then its own keys from slot 8. */
static void llama_header(const struct gpt2_config *c, int32_t *hdr)
{
	hdr[0] = LLAMA_MAGIC;
	hdr[1] = LLAMA_VERSION_FP32;
	hdr[8] = c->kv_heads;
	hdr[9] = c->intermediate;
	hdr[10] = c->untied;
	hdr[11] = c->rope_original_max_positions;
	hdr[12] = float_bits(c->norm_eps);
	hdr[13] = float_bits(c->rope_theta);
	hdr[14] = float_bits(c->rope_factor);
	hdr[15] = float_bits(c->rope_low_freq_factor);
	hdr[16] = float_bits(c->rope_high_freq_factor);
}

static void llama_from_header(const int32_t *h, struct gpt2_config *c)
{
	c->arch = MODEL_LLAMA;
	c->kv_heads = h[8];
	c->intermediate = h[9];
	c->untied = h[10] != 0;
	c->rope_original_max_positions = h[11];
	c->norm_eps = bits_float(h[12]);
	c->rope_theta = bits_float(h[13]);
	c->rope_factor = bits_float(h[14]);
	c->rope_low_freq_factor = bits_float(h[15]);
	c->rope_high_freq_factor = bits_float(h[16]);
}

void gpt2_config_header(const struct gpt2_config *c, int32_t hdr[GPT2_HEADER_INTS])
{
	memset(hdr, 0, GPT2_HEADER_INTS * sizeof(int32_t));
	hdr[0] = GPT2_MAGIC;
	hdr[1] = GPT2_VERSION_FP32;
	if (c->arch == MODEL_LLAMA)
		llama_header(c, hdr);
	hdr[2] = c->max_seq_len;
	hdr[3] = c->vocab_size;
	hdr[4] = c->num_layers;
	hdr[5] = c->num_heads;
	hdr[6] = c->channels;
	hdr[7] = c->padded_vocab_size;
}

void gpt2_header(const struct gpt2 *m, int32_t hdr[GPT2_HEADER_INTS])
{
	gpt2_config_header(&m->config, hdr);
}

int gpt2_config_from_header(const int32_t *h, const char *path, struct gpt2_config *c, char *err,
			    size_t errlen)
{
	char why[200];

	if (h[0] == LLAMA_MAGIC && h[1] != LLAMA_VERSION_FP32) {
		snprintf(err, errlen, "%s: Llama model file version %d is not supported (expected %d)",
			 path, h[1], LLAMA_VERSION_FP32);
		return -1;
	}
	if (h[0] != GPT2_MAGIC && h[0] != LLAMA_MAGIC) {
		snprintf(err, errlen,
			 "%s: not an llm.c model file (magic %d, expected %d); is it a token "
			 "shard or another format?",
			 path, h[0], GPT2_MAGIC);
		return -1;
	}
	if (h[0] == GPT2_MAGIC && h[1] != GPT2_VERSION_FP32) {
		snprintf(err, errlen,
			 "%s: model file version %d is not supported (expected %d = fp32%s)", path,
			 h[1], GPT2_VERSION_FP32,
			 h[1] == 5 ? "; version 5 is bf16: export fp32 weights" : "");
		return -1;
	}
	*c = (struct gpt2_config){ .max_seq_len = h[2], .vocab_size = h[3], .num_layers = h[4],
				   .num_heads = h[5], .channels = h[6], .padded_vocab_size = h[7] };
	if (h[0] == LLAMA_MAGIC)
		llama_from_header(h, c);
	if (gpt2_config_check(c, why, sizeof why)) {
		snprintf(err, errlen, "%s: bad header: %s", path, why);
		return -1;
	}
	return 0;
}

int gpt2_read_config(const char *path, struct gpt2_config *c, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	FILE *f = fopen(path, "rb");
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "cannot open model file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fread(hdr, sizeof hdr, 1, f) != 1)
		snprintf(err, errlen, "%s: cannot read the header: %s", path,
			 ferror(f) ? strerror(errno) : "file too short");
	else
		rc = gpt2_config_from_header(hdr, path, c, err, errlen);
	fclose(f);
	return rc;
}

struct load_args {
	const struct gpt2_config *c;
	const struct gpt2_shard *s;
	int fd;
	const char *path;
	float *tmp;
	float *local;                /* the shard's parameters */
	char *err;
	size_t errlen;
};

/* Read one chunk of the whole model from the file and keep the shard's slice. */
static int load_one(void *arg, int t, int l, size_t full_off, size_t local_off)
{
	struct load_args *a = arg;
	size_t bytes = model_full_chunk(a->c, t) * sizeof(float);
	off_t at = (off_t)(GPT2_HEADER_INTS * sizeof(int32_t) + full_off * sizeof(float));
	ssize_t k = pread_all(a->fd, a->tmp, bytes, at);

	(void)l;
	if (k != (ssize_t)bytes) {
		snprintf(a->err, a->errlen, "%s: truncated while reading the parameters%s%s",
			 a->path, k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
		return -1;
	}
	model_copy_chunk(a->c, a->s, t, a->tmp, a->local + local_off, 1);
	return 0;
}

int gpt2_load_shard(struct gpt2 *m, const char *path, const struct gpt2_shard *want, char *err,
		    size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	struct gpt2_config c;
	struct gpt2_shard s;
	struct load_args a = { .path = path, .err = err, .errlen = errlen };
	struct stat st;
	long long body;
	size_t full_params, sizes[GPT2_NUM_TENSORS];
	FILE *f = fopen(path, "rb");
	int rc = -1;
	char why[200];

	memset(m, 0, sizeof *m);
	if (!f) {
		snprintf(err, errlen, "cannot open model file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) < 0) {
		snprintf(err, errlen, "cannot stat model file %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((size_t)st.st_size < sizeof hdr) {
		snprintf(err, errlen, "%s: truncated: %lld bytes, shorter than the %zu-byte header",
			 path, (long long)st.st_size, sizeof hdr);
		goto fail;
	}
	if (fread(hdr, sizeof hdr, 1, f) != 1) {
		snprintf(err, errlen, "%s: cannot read the header: %s", path,
			 ferror(f) ? strerror(errno) : "file too short");
		goto fail;
	}
	if (gpt2_config_from_header(hdr, path, &c, err, errlen))
		goto fail;
	gpt2_shard_whole(&c, &s);
	if (want)
		s = *want;
	if (gpt2_shard_check(&c, &s, why, sizeof why)) {
		snprintf(err, errlen, "%s: cannot cut this model: %s", path, why);
		goto fail;
	}
	{
		struct gpt2_shard whole;

		gpt2_shard_whole(&c, &whole);
		full_params = gpt2_shard_sizes(&c, &whole, sizes);
	}
	body = (long long)st.st_size - (long long)sizeof hdr;
	if (body < (long long)(full_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: truncated: the header announces %zu parameters (%zu bytes), the file "
			 "has %lld bytes after the header",
			 path, full_params, full_params * sizeof(float), body);
		goto fail;
	}
	if (body > (long long)(full_params * sizeof(float))) {
		snprintf(err, errlen,
			 "%s: %lld bytes after the %zu parameters the header announces: the file "
			 "does not match its header",
			 path, body - (long long)(full_params * sizeof(float)), full_params);
		goto fail;
	}
	rc = gpt2_alloc(m, &c, &s);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path, m->err);
		goto fail;
	}
	rc = -1;
	a.c = &c;
	a.s = &s;
	a.fd = fileno(f);
	if (!(a.tmp = model_alloc_floats(model_max_chunk(&c)))) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -2;
		goto fail;
	}
	a.local = m->params;
	if (model_for_each_chunk(&c, &s, load_one, &a))
		goto fail;
	free(a.tmp);
	fclose(f);
	return 0;
fail:
	free(a.tmp);
	fclose(f);
	gpt2_free(m);
	return rc;
}

int gpt2_load(struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	return gpt2_load_shard(m, path, NULL, err, errlen);
}

int gpt2_save(const struct gpt2 *m, const char *path, char *err, size_t errlen)
{
	int32_t hdr[GPT2_HEADER_INTS];
	FILE *f;

	if (m->shard.tp_size != 1 || m->shard.first_layer != 0 ||
	    m->shard.last_layer != m->config.num_layers) {
		snprintf(err, errlen, "cannot write %s from a shard of the model", path);
		return -1;
	}
	if (!(f = fopen(path, "wb"))) {
		snprintf(err, errlen, "cannot create model file %s: %s", path, strerror(errno));
		return -1;
	}
	gpt2_header(m, hdr);
	if (fwrite(hdr, sizeof hdr, 1, f) != 1 ||
	    fwrite(m->params, sizeof(float), m->num_params, f) != m->num_params) {
		snprintf(err, errlen, "cannot write model file %s: %s", path, strerror(errno));
		fclose(f);
		return -1;
	}
	if (fclose(f)) {
		snprintf(err, errlen, "cannot write model file %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ activations */

/*
 * Layers of storage a per-layer activation array gets: one per layer when
 * the forward pass keeps it, else one scratch layer that each layer's
 * forward pass (and its recomputation in the backward pass) overwrites.
 * The layer outputs (res3) are always kept: they are the next layer's
 * input, from which block recomputation starts.
 */
