/*
 * lib/json.h - write and read the JSON files of the run directory.
 *
 * Writer: builds one JSON text in a growing buffer. Calls mirror the text:
 *
 *     struct json j;
 *     json_init(&j, JSON_PRETTY);
 *     json_begin_object(&j);
 *     json_key_string(&j, "reason", "completed");
 *     json_key_int(&j, "exit_code", 0);
 *     json_key_begin_object(&j, "first_failure");
 *     json_key_null(&j, "rank");
 *     json_end_object(&j);
 *     json_end_object(&j);
 *     if (json_error(&j)) ... else use json_str(&j), json_len(&j);
 *     json_free(&j);
 *
 * Commas and (with JSON_PRETTY) indentation are inserted automatically.
 * Strings are escaped (quote, backslash, control characters); valid UTF-8
 * passes through, invalid bytes become U+FFFD. Doubles are printed with the
 * fewest digits that read back to the same value; NaN and infinities, which
 * JSON cannot express, become null. Errors (out of memory, a value where a
 * key is needed, unbalanced ends) are sticky: later calls do nothing and
 * json_error() reports them, so call sites need one check at the end.
 * json_reset() empties the buffer for the next line of a JSONL file.
 *
 * Reader: json_parse() builds a small tree (struct json_value) of a whole
 * text; json_get() and friends walk it. Enough for manifests and the
 * exit_info files of other nodes; not a streaming parser.
 */
#ifndef STORK_JSON_H
#define STORK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- writer */

#define JSON_MAX_DEPTH 64

enum json_style {
	JSON_COMPACT = 0,  /* one line, no spaces: JSONL */
	JSON_PRETTY = 1,   /* two-space indentation, for files people read */
};

struct json {
	char *buf;
	size_t len, cap;
	enum json_style style;
	int depth;
	int error;                      /* 0, or ENOMEM / EINVAL */
	bool has_items[JSON_MAX_DEPTH]; /* a comma is due before the next item */
	bool is_object[JSON_MAX_DEPTH];
	bool want_value;                /* a key was just written */
};

void json_init(struct json *j, enum json_style style);
void json_free(struct json *j);
/* Empty the text, keep the buffer and the style. */
void json_reset(struct json *j);

/* The text so far (NUL-terminated, "" when empty) and its length. */
const char *json_str(const struct json *j);
size_t json_len(const struct json *j);
/* 0 when the text is complete and well formed, else ENOMEM or EINVAL. */
int json_error(const struct json *j);

void json_begin_object(struct json *j);
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);

/* Values: inside an array, or after json_key(). s == NULL writes null. */
void json_key(struct json *j, const char *key);
void json_string(struct json *j, const char *s);
void json_string_len(struct json *j, const char *s, size_t len);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
void json_double(struct json *j, double v);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* Insert an already formatted JSON value verbatim (e.g. a nested text). */
void json_raw(struct json *j, const char *text);

/* Key and value in one call, for members of an object. */
void json_key_string(struct json *j, const char *key, const char *s);
void json_key_int(struct json *j, const char *key, int64_t v);
void json_key_uint(struct json *j, const char *key, uint64_t v);
void json_key_double(struct json *j, const char *key, double v);
void json_key_bool(struct json *j, const char *key, bool v);
void json_key_null(struct json *j, const char *key);
void json_key_begin_object(struct json *j, const char *key);
void json_key_begin_array(struct json *j, const char *key);

/* ---------------------------------------------------------------- reader */

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_value {
	enum json_type type;
	bool b;
	double num;
	bool is_int;          /* num was an integer literal that fits int64 */
	int64_t i;
	char *str;            /* decoded UTF-8 (JSON_STRING) */
	size_t str_len;       /* may contain NUL bytes from \u0000 */
	size_t n;             /* array items or object members */
	struct json_value *items;
	char **keys;          /* object member names, parallel to items */
};

/* Parse a whole JSON text (one value, surrounding white space allowed).
 * Returns a tree to free with json_value_free, or NULL with "LINE:COLUMN:
 * what" in err. */
struct json_value *json_parse(const char *text, size_t len, char *err, size_t errlen);

/* Read and parse a file; err names the path. */
struct json_value *json_parse_file(const char *path, char *err, size_t errlen);

void json_value_free(struct json_value *v);

/* Member of an object (the last one when repeated), or NULL. */
const struct json_value *json_get(const struct json_value *obj, const char *key);

/* Item i of an array, or NULL. */
const struct json_value *json_at(const struct json_value *arr, size_t i);

/* Typed member access: 0 and *out set, or -1 when absent or of another type.
 * json_get_int accepts only integer literals that fit int64. */
const char *json_get_string(const struct json_value *obj, const char *key);
int json_get_int(const struct json_value *obj, const char *key, int64_t *out);
int json_get_double(const struct json_value *obj, const char *key, double *out);
int json_get_bool(const struct json_value *obj, const char *key, bool *out);

#endif
