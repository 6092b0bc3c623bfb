/*
 * lib/formats/stork_json.h - the little Stork adds to jansson for the JSON files of
 * the run directory (exit_info, manifests, slurm_env.json, metrics lines).
 *
 * Values are built and read with jansson itself (json_pack, json_unpack,
 * json_object_get, ...). What is here removes repetition that every writer
 * or reader of those files would otherwise carry:
 *
 *   - text from the outside world (hostnames, error messages, paths) may
 *     hold bytes that are not UTF-8, which jansson refuses: sj_text() keeps
 *     the valid part and replaces each invalid byte with U+FFFD, so a file
 *     is written whatever the message;
 *   - NaN and infinities have no JSON spelling: sj_number() writes null;
 *   - 64-bit hashes and seeds travel as 16 hex digits (JSON numbers lose
 *     bits above 2^53 in most readers);
 *   - reading a file or a text reports "NAME:LINE:COLUMN: what" in one call;
 *   - files people read are indented by two spaces and replaced atomically.
 *
 * Doubles are written with 17 significant digits (jansson's default), which
 * read back to the same bits.
 */
#ifndef STORK_LIB_STORK_JSON_H
#define STORK_LIB_STORK_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A string value (invalid UTF-8 bytes become U+FFFD), or null when s is NULL. */
json_t *sj_text(const char *s);

/* A real, or null when v is NaN or infinite. */
json_t *sj_number(double v);

/* v as a string of 16 lowercase hex digits. */
json_t *sj_hex64(uint64_t v);

/* Member key of obj as written by sj_hex64: 0, or -1 when absent or malformed. */
int sj_get_hex64(const json_t *obj, const char *key, uint64_t *out);

/* Member key of obj when it is an integer (sj_int) or a number (sj_real),
 * else dflt. */
int64_t sj_int(const json_t *obj, const char *key, int64_t dflt);
double sj_real(const json_t *obj, const char *key, double dflt);

/* Parse text (len bytes); name is what an error message calls it.
 * NULL with "NAME:LINE:COLUMN: what" in err. */
json_t *sj_parse(const char *text, size_t len, const char *name, char *err, size_t errlen);

/* Read and parse the file at path; errors name the path. */
json_t *sj_load_file(const char *path, char *err, size_t errlen);

/* sj_load_file for files from the outside world (a model's config.json,
 * an index of weight files): a regular file of at most max bytes, read
 * whole before parsing; an object that names a key twice is refused (which
 * of the two would count is a reader's guess). */
json_t *sj_load_file_strict(const char *path, size_t max, char *err, size_t errlen);

/* Write v to path, indented, with a final newline, replacing the file
 * atomically (atomic_write_file). 0, or -1 with a message naming path. */
int sj_write_file(const char *path, const json_t *v, char *err, size_t errlen);

/* v on one line (a metrics line, a message between nodes): malloc'd, NULL
 * when out of memory. */
char *sj_compact(const json_t *v);

#endif
