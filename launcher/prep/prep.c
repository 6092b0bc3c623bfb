/*
 * launcher/prep/prep.c - `stork prep`: turn text files into byte-level llm.c
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
 *
 * The defaults fit the configuration's: the shards go to data/ (made if
 * missing), where data.train and data.val look, their headers say the
 * vocabulary (DATA_HEADER_VOCAB, which `stork run` holds model.vocab_size
 * against), and prep prints the configuration lines that use them. Input
 * that is not text (a NUL byte near its start, or a compressed file's
 * magic number) is refused unless --binary says to take its bytes anyway:
 * a .gz tokenised as text trains a model on compressed noise.
 */
#include "config.h"
#include "launcher/prep/prep.h"
#include "launcher/prep/prep_tokens.h"
#include "lib/io/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/formats/token_shard.h"

#include <errno.h>
#include <sched.h>
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
#define PREP_DEFAULT_DIR "data"
#define PREP_SNIFF_BYTES 65536 /* how much of a file is looked at for signs of binary data */

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
		"usage: stork prep [--val-share F] [--out DIR] [--name NAME] [--binary] TEXTFILE...\n"
		"       stork prep --tokenizer FILE [--split-lines | --field NAME] [--shard-tokens N]\n"
		"                  [--threads N] [--val-share F] [--out DIR] [--name NAME] INPUT...\n"
		"       stork prep [--tokenizer FILE] --decode SHARD...\n"
		"\n"
		"Turn text files into byte-level llm.c token shards DIR/NAME_train.bin and\n"
		"DIR/NAME_val.bin (token = byte value, %d = end of text before each file,\n"
		"vocabulary %d), and print the configuration lines that train on them.\n"
		"With --tokenizer (a Hugging Face tokenizer.json, OpenAI's encoder.json with\n"
		"vocab.bpe beside it, or a tiktoken rank file: byte-level BPE such as GPT-2's\n"
		"or Llama 3's), the tokenizer's ids instead, 32-bit when the vocabulary needs\n"
		"them, and DIR/NAME.manifest.json; INPUT is a file or a directory.\n"
		"\n"
		"  --split-lines  every non-empty line is a document (default: every file)\n"
		"  --field NAME   INPUT is JSON Lines: each line's string field NAME is a document\n"
		"  --shard-tokens N  a new shard every N tokens (NAME_train_000000.bin, ...)\n"
		"  --threads N    encoding threads (default: the CPUs this process may use)\n"
		"  --decode SHARD... print shards' text in turn (--tokenizer, given first, for a\n"
		"                 tokenizer's ids)\n"
		"\n"
		"  --val-share F  share of the tokens for validation, 0 < F < 1 (default 0.1)\n"
		"  --out DIR      output directory, made if missing (default: %s, where\n"
		"                 data.train and data.val look by default)\n"
		"  --name NAME    file name prefix (default: the first file's name without\n"
		"                 its extension)\n"
		"  --binary       take the bytes of files that do not look like text\n"
		"                 (compressed, or with NUL bytes) instead of refusing them\n",
		PREP_EOT, PREP_VOCAB_SIZE, PREP_DEFAULT_DIR);
}

static int out_open(struct shard_out *o, const char *dir, const char *name, const char *kind)
{
	static const char zero[DATA_HEADER_BYTES];

	snprintf(o->path, sizeof o->path, "%s/%s_%s.bin", dir, name, kind);
	o->ntok = o->nbuf = 0;
	o->fd = atomic_tmp_open(o->path, o->tmp, sizeof o->tmp, 0644);
	if (o->fd < 0) {
		stork_error("prep: cannot create a temporary file beside %s: %s", o->path,
			    strerror(errno));
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

	h[DATA_HEADER_VOCAB] = PREP_VOCAB_SIZE;

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

/*
 * Why the file at path does not look like text, or NULL: the magic number
 * of a compressed format, or a NUL byte in its first PREP_SNIFF_BYTES
 * (UTF-8 and every 8-bit text encoding have none).
 */
static const char *not_text(const char *path)
{
	static const struct {
		const char *magic;
		size_t len;
		const char *what;
	} formats[] = {
		{ "\x1f\x8b", 2, "gzip-compressed (zcat it into a text file first)" },
		{ "BZh", 3, "bzip2-compressed (bzcat it into a text file first)" },
		{ "\xfd" "7zXZ", 5, "xz-compressed (xzcat it into a text file first)" },
		{ "\x28\xb5\x2f\xfd", 4, "zstd-compressed (zstdcat it into a text file first)" },
		{ "PK\x03\x04", 4, "a zip archive (unzip it first)" },
	};
	unsigned char buf[PREP_SNIFF_BYTES];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return NULL; /* emit_file names the error */
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n <= 0)
		return NULL;
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if ((size_t)n >= formats[i].len && !memcmp(buf, formats[i].magic, formats[i].len))
			return formats[i].what;
	if (memchr(buf, 0, (size_t)n))
		return "binary: it has NUL bytes, which text does not";
	return NULL;
}

/* The configuration lines that train on what prep wrote. */
static void print_config(const char *dir, const char *name)
{
	printf("to train on them, in stork.yaml:\n"
	       "  model:\n"
	       "    vocab_size: %d\n"
	       "  data:\n"
	       "    train: [\"%s/%s_train.bin\"]\n"
	       "    val: [\"%s/%s_val.bin\"]\n",
	       PREP_VOCAB_SIZE, dir, name, dir, name);
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
		{ "binary", no_argument, NULL, 'b' },
		{ "tokenizer", required_argument, NULL, 't' },
		{ "split-lines", no_argument, NULL, 'l' },
		{ "field", required_argument, NULL, 'f' },
		{ "shard-tokens", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 'j' },
		{ "decode", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = PREP_DEFAULT_DIR, *name_opt = NULL, *why;
	char name[NAME_MAX];
	double share = 0.1;
	struct shard_out *train = NULL, *val = NULL;
	struct splitter sp = { 0 };
	uint64_t total = 0, nval;
	int c, binary = 0, rc = STORK_EXIT_USAGE;
	struct prep_opts po = { 0 };
	const char *decode = NULL;
	char *end;

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
		case 'b': binary = 1; break;
		case 't': po.tokenizer = optarg; break;
		case 'l': po.split_lines = 1; break;
		case 'f': po.field = optarg; break;
		case 'd': decode = optarg; break;
		case 's':
		case 'j':
			errno = 0;
			if (strtoull(optarg, &end, 10) < 1 || *end || errno || optarg[0] == '-') {
				stork_error("prep: --%s '%s': give a positive number",
					    c == 's' ? "shard-tokens" : "threads", optarg);
				return STORK_EXIT_USAGE;
			}
			if (c == 's')
				po.shard_tokens = strtoull(optarg, NULL, 10);
			else
				po.threads = (int)strtoul(optarg, NULL, 10);
			break;
		case 'h': usage(stdout); return STORK_EXIT_OK;
		default: usage(stderr); return STORK_EXIT_USAGE;
		}
	}
	if (decode) { /* --decode SHARD [SHARD...]: the first is the option's */
		argv[optind - 1] = (char *)decode;
		return prep_decode(argv + optind - 1, argc - optind + 1, po.tokenizer);
	}
	if (!po.tokenizer && (po.split_lines || po.field || po.shard_tokens || po.threads)) {
		stork_error("prep: --split-lines, --field, --shard-tokens and --threads go with "
			    "--tokenizer");
		return STORK_EXIT_USAGE;
	}
	if (po.split_lines && po.field) {
		stork_error("prep: --split-lines and --field are two ways to cut documents: give one");
		return STORK_EXIT_USAGE;
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
	if (po.tokenizer) {
		po.dir = dir;
		po.name = name;
		po.share = share;
		po.binary = binary;
		if (!po.threads) {
			cpu_set_t set;

			po.threads = sched_getaffinity(0, sizeof set, &set) ? 1 : CPU_COUNT(&set);
		}
		return prep_tokenized(&po, argv + optind, argc - optind);
	}

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
		if (!binary && (why = not_text(argv[i]))) {
			stork_error("prep: %s: not text: %s; --binary takes its bytes anyway",
				    argv[i], why);
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
	if (mkdir_p(dir, 0700) < 0) {
		stork_error("prep: cannot create %s: %s", dir, strerror(errno));
		goto fail;
	}
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
	print_config(dir, name);
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
