/*
 * lib/formats/token_shard.c - see token_shard.h: a shard's header read and held
 * against its file, for storkd's loader and for `stork run`'s checks
 * before a run directory exists (the same messages in both).
 */
#include "config.h"
#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/formats/token_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA_MODEL_MAGIC 20240326 /* llm.c model files, a frequent mix-up */

/* The header of the open shard fd (of size bytes) into s. */
static int check_header(const char *path, int fd, off_t size, struct token_shard *s, char *err,
			size_t errlen)
{
	int32_t h[DATA_HEADER_INTS];
	uint64_t want;
	ssize_t n = pread(fd, h, sizeof h, 0);

	if (n < 0)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot read: %s", path, strerror(errno));
	if (n < (ssize_t)sizeof h)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: truncated: %lld bytes, smaller than the %d-byte header "
			    "of an llm.c token shard", path, (long long)size, DATA_HEADER_BYTES);
	if (h[0] != DATA_MAGIC && h[0] != DATA_MAGIC_U32)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: wrong magic number %d (expected %d, or %d "
			    "for 32-bit tokens): not an llm.c token shard%s", path, h[0], DATA_MAGIC,
			    DATA_MAGIC_U32, h[0] == DATA_MODEL_MAGIC ? " (this is an llm.c model file)" : "");
	if (h[1] != (h[0] == DATA_MAGIC ? DATA_VERSION : DATA_VERSION_U32))
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: unsupported token shard version %d (expected %d)", path,
			    h[1], h[0] == DATA_MAGIC ? DATA_VERSION : DATA_VERSION_U32);
	if (h[2] < 0)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: negative token count %d in the header", path, h[2]);
	s->ntok = (uint64_t)h[2];
	s->vocab = h[DATA_HEADER_VOCAB] > 0 ? h[DATA_HEADER_VOCAB] : 0;
	s->token_bytes = h[0] == DATA_MAGIC ? 2 : 4;
	want = DATA_HEADER_BYTES + (uint64_t)s->token_bytes * s->ntok;
	if ((uint64_t)size != want)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: %s: the header says %llu tokens (%llu bytes) but the "
			    "file has %lld bytes", path,
			    (uint64_t)size < want ? "truncated shard" : "trailing data",
			    (unsigned long long)s->ntok, (unsigned long long)want, (long long)size);
	return 0;
}

int token_shard_check(const char *path, struct token_shard *s, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		rc = msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot stat: %s", path, strerror(errno));
	else
		rc = check_header(path, fd, st.st_size, s, err, errlen);
	close(fd);
	return rc;
}

int token_shard_promise(const int32_t h[3], uint64_t *bytes)
{
	if (!((h[0] == DATA_MAGIC && h[1] == DATA_VERSION) ||
	      (h[0] == DATA_MAGIC_U32 && h[1] == DATA_VERSION_U32)) || h[2] < 0)
		return -1;
	*bytes = DATA_HEADER_BYTES + (uint64_t)(h[0] == DATA_MAGIC ? 2 : 4) * (uint64_t)h[2];
	return 0;
}

/* The last occurrence of word in s, or NULL (NAME itself may hold "_train"). */
static const char *last_of(const char *s, const char *word)
{
	const char *last = NULL;

	for (const char *p = strstr(s, word); p; p = strstr(p + 1, word))
		last = p;
	return last;
}

int token_shard_manifest_path(const char *shard, char *out, size_t len)
{
	const char *base = strrchr(shard, '/'), *kind;
	size_t dirlen;

	base = base ? base + 1 : shard;
	dirlen = (size_t)(base - shard);
	kind = last_of(base, "_train");
	if (!kind)
		kind = last_of(base, "_val");
	if (!kind)
		return -1;
	return (size_t)snprintf(out, len, "%.*s%.*s.manifest.json", (int)dirlen, shard,
				(int)(kind - base), base) < len ? 0 : -1;
}
