/*
 * launcher/preflight.c - what `stork run` checks before it makes a run
 * directory, so a mistake costs seconds and leaves nothing behind: that
 * run.resume_from exists, and model.vocab_size against the vocabulary the
 * data's shards say they were made for.
 *
 * `stork prep` records its vocabulary (257) in the shard header
 * (lib/token_shard.h, DATA_HEADER_VOCAB); llm.c's scripts record none (0).
 * A shard made for more tokens than the model has cannot train: refused.
 * A shard made for fewer trains, but a model left at the default GPT-2
 * vocabulary (50257) over byte-level data spends most of each step on
 * logits of tokens that never occur (7.7x slower steps on a small model):
 * refused too, naming the key to set. A vocabulary the user set is
 * honoured (a GPT-2-shaped model on byte data is a fair benchmark). Only
 * local shards are read: URLs are checked by storkd once staged.
 */
#include "config.h"
#include "launcher/preflight.h"
#include "lib/stork_config.h"
#include "lib/token_shard.h"
#include "lib/url.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The vocabulary path's header records, 0 if none (or not a readable shard: storkd says why). */
static int32_t recorded_vocab(const char *path)
{
	int32_t h[DATA_HEADER_INTS];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = pread(fd, h, sizeof h, 0);
	close(fd);
	if (n != (ssize_t)sizeof h || h[0] != DATA_MAGIC || h[DATA_HEADER_VOCAB] < 0)
		return 0;
	return h[DATA_HEADER_VOCAB];
}

static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The first shard of one key's globs whose recorded vocabulary does not fit c's model. */
static int check_globs(const struct stork_config *c, const char *key,
		       const struct stork_globs *globs, char *err, size_t errlen)
{
	int vocab = c->model.vocab_size, is_default = !strcmp(config_origin(c, "model.vocab_size"),
								"default");
	int rc = 0;

	for (size_t g = 0; g < globs->n && !rc; g++) {
		glob_t gl;

		if (url_is_http(globs->v[g]) || glob(globs->v[g], 0, NULL, &gl))
			continue;
		for (size_t i = 0; i < gl.gl_pathc && !rc; i++) {
			int32_t v = recorded_vocab(gl.gl_pathv[i]);

			if (v > vocab)
				rc = refuse(err, errlen, "%s: %s holds tokens of a %d-token vocabulary, "
					    "more than model.vocab_size = %d (%s): set "
					    "model.vocab_size: %d", key, gl.gl_pathv[i], (int)v,
					    vocab, config_origin(c, "model.vocab_size"), (int)v);
			else if (v > 0 && v < vocab && is_default)
				rc = refuse(err, errlen, "%s: %s was made for a %d-token vocabulary "
					    "(stork prep's bytes), but model.vocab_size is the default "
					    "%d (GPT-2's), whose extra rows only slow each step: set "
					    "model.vocab_size: %d (or %d, to keep GPT-2's shape)", key,
					    gl.gl_pathv[i], (int)v, vocab, (int)v, vocab);
		}
		globfree(&gl);
	}
	return rc;
}

/* run.resume_from names something that exists (storkd then looks for a checkpoint in it). */
static int check_resume_from(const struct stork_config *c, char *err, size_t errlen)
{
	const char *from = c->run.resume_from;
	struct stat st;

	if (!from || !*from || stat(from, &st) == 0)
		return 0;
	return refuse(err, errlen, "run.resume_from: %s (%s): %s", from,
		      config_origin(c, "run.resume_from"), strerror(errno));
}

int preflight(const struct stork_config *c, char *err, size_t errlen)
{
	if (check_resume_from(c, err, errlen) < 0 ||
	    check_globs(c, "data.train", &c->data.train, err, errlen) < 0)
		return -1;
	return check_globs(c, "data.val", &c->data.val, err, errlen);
}
