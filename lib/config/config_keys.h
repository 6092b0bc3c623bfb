/*
 * lib/config/config_keys.h - the table of stork.yaml's keys
 * (config_keys.c) and what the configuration's own files share: private
 * to lib/config/.
 */
#ifndef STORK_CONFIG_KEYS_H
#define STORK_CONFIG_KEYS_H

#include "lib/config/stork_config.h"

#include <stddef.h>
#include <stdio.h>

enum key_type {
	K_STR,          /* any string; flag EMPTY_OK allows "" and null */
	K_NAME,         /* non-empty, no '/', not "." or ".." */
	K_INT,          /* int in [lo, hi] */
	K_AUTO_INT,     /* "auto" (stored as 0) or int in [lo, hi] */
	K_U64,          /* any non-negative 64-bit integer */
	K_DOUBLE,       /* finite double in lo..hi, ends open per flags */
	K_BOOL,
	K_ENUM,         /* one of names[], stored as int */
	K_GLOBS,        /* a string or a sequence of strings; MIN1 needs one */
};

#define EMPTY_OK 1u
#define LO_OPEN 2u
#define HI_OPEN 4u
#define MIN1 8u
#define AUTO_NEG 32u     /* K_AUTO_INT: auto is stored as -1 (0 is a value of its own) */
#define REDACT 16u      /* URLs written without their secret: K_STR without path and
                         * query (a web hook), K_GLOBS without user and query (data) */

struct enum_name {
	const char *name;
	int value;
};

/* One key of stork.yaml; fields a type does not use stay zero. */
struct key {
	const char *path;       /* "section.name" */
	size_t off;             /* its field in struct stork_config */
	enum key_type type;
	double lo, hi;          /* K_INT, K_AUTO_INT, K_DOUBLE: the range */
	unsigned flags;         /* EMPTY_OK, LO_OPEN, HI_OPEN, MIN1 */
	const struct enum_name *names; /* K_ENUM: the accepted names */
	const char *dflt;       /* default, as YAML text */
	const char *help;       /* comment in the resolved YAML */
};

/* The largest int a key may take. */
#define BIG 2147483647.0

/* Every key, in the order of the resolved YAML; the sections, NULL-terminated. */
extern const struct key config_keys[];
extern const size_t config_nkeys;
extern const char *const config_sections[];


/* -1 with the message in err (when there is one). */
int config_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Where key k lives in c. */
void *config_field(const struct stork_config *c, const struct key *k);
/* The row of the key path[0..len), or -1. */
int config_key_index(const char *path, size_t len);
/* Key k's value in c as YAML text (config_write.c). */
void config_put_value(FILE *f, const struct stork_config *c, const struct key *k);

#endif
