/*
 * launcher/prep.c - `stork prep`: turn text files into byte-level llm.c
 * token shards, so a user can train on their own text with no other tool.
 *
 * The token stream is, for each TEXTFILE in order, the end-of-text token and
 * then the file's bytes (see prep.h). Its first (1 - F) part goes to
 * NAME_train.bin and the rest to NAME_val.bin, F being --val-share (default
 * 0.1). The split moves forward to the next line or document start if one
 * comes within half the validation share, so validation text starts on a
 * line. Both files are streamed (memory stays small), written under a
 * temporary name, fsynced, renamed into place and the directory fsynced: a
 * reader sees the old file or the new one, never a partial shard.
 */
#include "config.h"
#include "launcher/prep.h"
#include "lib/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/token_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREP_BUF_TOKENS 65536

/* One output shard being written. */
struct shard_out {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	int fd;
	uint64_t ntok;
	uint16_t buf[PREP_BUF_TOKENS];
	size_t nbuf;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: stork prep [--val-share F] [--out DIR] [--name NAME] TEXTFILE...\n"
		"\n"
		"Turn text files into byte-level llm.c token shards DIR/NAME_train.bin and\n"
		"DIR/NAME_val.bin (token = byte value, %d = end of text before each file,\n"
		"vocabulary %d).\n"
		"\n"
		"  --val-share F  share of the tokens for validation, 0 < F < 1 (default 0.1)\n"
		"  --out DIR      output directory (default: the current directory)\n"
		"  --name NAME    file name prefix (default: the first file's name without\n"
		"                 its extension)\n", PREP_EOT, PREP_VOCAB_SIZE);
}

static int out_open(struct shard_out *o, const char *dir, const char *name, const char *kind)
{
	static const char zero[DATA_HEADER_BYTES];

	snprintf(o->path, sizeof o->path, "%s/%s_%s.bin", dir, name, kind);
	snprintf(o->tmp, sizeof o->tmp, "%s/.%s_%s.bin.tmp.%ld", dir, name, kind,
		 (long)getpid());
	o->ntok = o->nbuf = 0;
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o->fd < 0) {
		stork_error("prep: cannot create %s: %s", o->tmp, strerror(errno));
		return -1;
	}
	if (write_all(o->fd, zero, sizeof zero)) {
		stork_error("prep: cannot write %s: %s", o->tmp, strerror(errno));
		return -1;
	}
	return 0;
}

static int out_flush(struct shard_out *o)
{
	if (write_all(o->fd, o->buf, o->nbuf * sizeof o->buf[0])) {
		stork_error("prep: cannot write %s: %s", o->tmp, strerror(errno));
		return -1;
	}
	o->nbuf = 0;
	return 0;
}

static int out_put(struct shard_out *o, uint16_t tok)
{
	o->buf[o->nbuf++] = tok;
	o->ntok++;
	return o->nbuf == PREP_BUF_TOKENS ? out_flush(o) : 0;
}

/* Header, fsync, rename into place. */
static int out_commit(struct shard_out *o)
{
	int32_t h[DATA_HEADER_INTS] = { DATA_MAGIC, DATA_VERSION, (int32_t)o->ntok };

	if (out_flush(o))
		return -1;
	if (pwrite_all(o->fd, h, sizeof h, 0) || fsync(o->fd)) {
		stork_error("prep: cannot write %s: %s", o->tmp, strerror(errno));
		return -1;
	}
	close(o->fd);
	o->fd = -1;
	if (rename(o->tmp, o->path)) {
		stork_error("prep: cannot rename %s to %s: %s", o->tmp, o->path,
			    strerror(errno));
		return -1;
	}
	return 0;
}

static void out_abandon(struct shard_out *o)
{
	if (o->fd >= 0) {
		close(o->fd);
		o->fd = -1;
		unlink(o->tmp);
	}
}

/* The split state: tokens before `split` go to train; see the top comment. */
struct splitter {
	uint64_t emitted, nominal, latest;
	int in_val;
	uint16_t prev;
};

static int emit(struct splitter *sp, struct shard_out *train, struct shard_out *val,
		uint16_t tok)
{
	if (!sp->in_val && sp->emitted >= sp->nominal &&
	    (sp->prev == '\n' || tok == PREP_EOT || sp->emitted >= sp->latest))
		sp->in_val = 1;
	sp->emitted++;
	sp->prev = tok;
	return out_put(sp->in_val ? val : train, tok);
}

static int emit_file(const char *path, struct splitter *sp, struct shard_out *train,
		     struct shard_out *val)
{
	unsigned char buf[65536];
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
	ssize_t n;

	if (fd < 0) {
		stork_error("prep: cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (emit(sp, train, val, PREP_EOT))
		goto out;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (emit(sp, train, val, buf[i]))
				goto out;
	if (n < 0) {
		stork_error("prep: cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Default NAME: the first file's base name without its extension. */
static void default_name(const char *path, char *name, size_t len)
{
	char copy[PATH_MAX], *dot;

	snprintf(copy, sizeof copy, "%s", path);
	snprintf(name, len, "%s", basename(copy));
	if ((dot = strrchr(name, '.')) && dot != name)
		*dot = '\0';
}

static int parse_share(const char *s, double *share)
{
	char *end;

	errno = 0;
	*share = strtod(s, &end);
	return errno || end == s || *end || !(*share > 0.0 && *share < 1.0) ? -1 : 0;
}

int cmd_prep(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "val-share", required_argument, NULL, 'v' },
		{ "out", required_argument, NULL, 'o' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = ".", *name_opt = NULL;
	char name[NAME_MAX];
	double share = 0.1;
	struct shard_out *train = NULL, *val = NULL;
	struct splitter sp = { 0 };
	uint64_t total = 0, nval;
	int c, rc = STORK_EXIT_USAGE;

	optind = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			if (parse_share(optarg, &share)) {
				stork_error("prep: --val-share '%s': give a number between 0 "
					    "and 1 (exclusive), e.g. 0.1", optarg);
				return STORK_EXIT_USAGE;
			}
			break;
		case 'o': dir = optarg; break;
		case 'n': name_opt = optarg; break;
		case 'h': usage(stdout); return STORK_EXIT_OK;
		default: usage(stderr); return STORK_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		stork_error("prep: no text file given");
		usage(stderr);
		return STORK_EXIT_USAGE;
	}
	if (name_opt && (!*name_opt || strchr(name_opt, '/'))) {
		stork_error("prep: --name '%s': give a file name prefix without '/'", name_opt);
		return STORK_EXIT_USAGE;
	}
	if (name_opt)
		snprintf(name, sizeof name, "%s", name_opt);
	else
		default_name(argv[optind], name, sizeof name);

	for (int i = optind; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			stork_error("prep: %s: %s", argv[i], strerror(errno));
			return STORK_EXIT_DATA;
		}
		if (!S_ISREG(st.st_mode)) {
			stork_error("prep: %s: not a regular file", argv[i]);
			return STORK_EXIT_DATA;
		}
		total += (uint64_t)st.st_size + 1;
	}
	if (total > INT32_MAX) {
		stork_error("prep: %llu tokens do not fit one llm.c shard (at most %d): "
			    "prepare the files in several runs with different --name",
			    (unsigned long long)total, INT32_MAX);
		return STORK_EXIT_DATA;
	}
	nval = (uint64_t)(share * (double)total);
	if (nval < 1 || nval >= total) {
		stork_error("prep: %llu tokens are too few to give both a training and a "
			    "validation part with --val-share %g", (unsigned long long)total,
			    share);
		return STORK_EXIT_DATA;
	}
	sp.nominal = total - nval;
	sp.latest = sp.nominal + nval / 2;

	rc = STORK_EXIT_DATA;
	train = calloc(1, sizeof *train);
	val = calloc(1, sizeof *val);
	if (!train || !val) {
		stork_error("prep: out of memory");
		rc = STORK_EXIT_INTERNAL;
		goto fail;
	}
	train->fd = val->fd = -1;
	if (out_open(train, dir, name, "train") || out_open(val, dir, name, "val"))
		goto fail;
	for (int i = optind; i < argc; i++)
		if (emit_file(argv[i], &sp, train, val))
			goto fail;
	if (train->ntok > INT32_MAX || val->ntok > INT32_MAX || !val->ntok) {
		stork_error("prep: the files changed while being read; run again");
		goto fail;
	}
	if (out_commit(train) || out_commit(val))
		goto fail;
	if (fsync_dir(dir))
		stork_warn("prep: cannot fsync directory %s: %s", dir, strerror(errno));
	printf("wrote %s: %llu tokens\n", train->path, (unsigned long long)train->ntok);
	printf("wrote %s: %llu tokens\n", val->path, (unsigned long long)val->ntok);
	printf("vocabulary: %d tokens (bytes 0-255, end of text %d)\n",
	       PREP_VOCAB_SIZE, PREP_EOT);
	rc = STORK_EXIT_OK;
fail:
	if (train)
		out_abandon(train);
	if (val)
		out_abandon(val);
	free(train);
	free(val);
	return rc;
}
