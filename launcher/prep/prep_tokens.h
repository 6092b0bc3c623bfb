/*
 * launcher/prep/prep_tokens.h - `stork prep --tokenizer` and `--decode` (see
 * prep_tokens.c); cmd_prep (prep.c) parses the options for both modes.
 */
#ifndef STORK_LAUNCHER_PREP_TOKENS_H
#define STORK_LAUNCHER_PREP_TOKENS_H

#include <stdint.h>

struct prep_opts {
	const char *dir, *name;   /* --out, --name */
	double share;             /* --val-share */
	int binary;               /* --binary */
	const char *tokenizer;    /* --tokenizer FILE */
	const char *field;        /* --field NAME: JSON Lines */
	int split_lines;          /* --split-lines */
	uint64_t shard_tokens;    /* --shard-tokens N; 0: one shard per part */
	int threads;              /* --threads N */
};

/* Tokenise files (files, directories) into shards and a manifest; an exit code. */
int prep_tokenized(const struct prep_opts *o, char **files, int nfiles);

/* Print the text of n shards in turn (tokenizer NULL: byte-level shards); an exit code. */
int prep_decode(char **shards, int n, const char *tokenizer);

#endif
