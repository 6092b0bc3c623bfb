/*
 * lib/formats/stork_json.c - see stork_json.h.
 */
#include "config.h"
#include "lib/formats/stork_json.h"

#include "lib/io/atomic_file.h"
#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when the byte at s
 * does not start one. n is the number of bytes left.
 */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xBF;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		len = 2;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		len = 3;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		len = 4;
	else
		return 0;
	/* The second byte's range is narrower after these leads. */
	if (s[0] == 0xE0)
		lo = 0xA0;
	else if (s[0] == 0xED)
		hi = 0x9F;
	else if (s[0] == 0xF0)
		lo = 0x90;
	else if (s[0] == 0xF4)
		hi = 0x8F;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

json_t *sj_text(const char *s)
{
	static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
	const unsigned char *u = (const unsigned char *)s;
	size_t n, i = 0, o = 0;
	json_t *v;
	char *fixed;

	if (!s)
		return json_null();
	n = strlen(s);
	if ((v = json_stringn(s, n)))
		return v;
	/* Not UTF-8 (or out of memory): copy, replacing each byte that does
	 * not start a well-formed sequence. */
	if (!(fixed = malloc(3 * n + 1)))
		return NULL;
	while (i < n) {
		size_t len = utf8_sequence(u + i, n - i);

		if (len) {
			memcpy(fixed + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(fixed + o, replacement, 3);
			o += 3;
			i++;
		}
	}
	v = json_stringn(fixed, o);
	free(fixed);
	return v;
}

json_t *sj_number(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *sj_hex64(uint64_t v)
{
	char hex[24];

	snprintf(hex, sizeof hex, "%016" PRIx64, v);
	return json_string(hex);
}

int sj_get_hex64(const json_t *obj, const char *key, uint64_t *out)
{
	const char *s = json_string_value(json_object_get(obj, key));
	char *end;

	if (!s || !*s || strlen(s) > 16)
		return -1;
	*out = strtoull(s, &end, 16);
	return *end ? -1 : 0;
}

int64_t sj_int(const json_t *obj, const char *key, int64_t dflt)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

double sj_real(const json_t *obj, const char *key, double dflt)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_number(v) ? json_number_value(v) : dflt;
}

static json_t *parse_error(const json_error_t *e, const char *name, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s:%d:%d: %s", name, e->line, e->column, e->text);
	return NULL;
}

json_t *sj_parse(const char *text, size_t len, const char *name, char *err, size_t errlen)
{
	json_error_t e;
	json_t *v = json_loadb(text, len, 0, &e);

	return v ? v : parse_error(&e, name, err, errlen);
}

json_t *sj_load_file(const char *path, char *err, size_t errlen)
{
	json_error_t e;
	json_t *v = json_load_file(path, 0, &e);

	if (v)
		return v;
	/* jansson reports an unreadable file at line -1 with strerror's text. */
	if (e.line < 0) {
		snprintf(err, errlen, "%s", e.text);
		return NULL;
	}
	return parse_error(&e, path, err, errlen);
}

json_t *sj_load_file_strict(const char *path, size_t max, char *err, size_t errlen)
{
	json_error_t e;
	json_t *v = NULL;
	struct stat st;
	char *text = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s: %lld bytes, more than the %zu a file of this kind may have",
			 path, (long long)st.st_size, max);
		goto out;
	}
	if (!(text = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	errno = 0;
	if (pread_all(fd, text, st.st_size, 0) != (ssize_t)st.st_size) {
		snprintf(err, errlen, "%s: cannot read: %s", path,
			 errno ? strerror(errno) : "it shrank while being read");
		goto out;
	}
	if (!(v = json_loadb(text, st.st_size, JSON_REJECT_DUPLICATES, &e)))
		parse_error(&e, path, err, errlen);
out:
	free(text);
	close(fd);
	return v;
}

int sj_write_file(const char *path, const json_t *v, char *err, size_t errlen)
{
	char *text = json_dumps(v, JSON_INDENT(2));
	size_t len;
	int rc;

	if (!text) {
		snprintf(err, errlen, "cannot write %s: out of memory (or a value JSON cannot hold)",
			 path);
		return -1;
	}
	len = strlen(text);
	/* json_dumps leaves no newline; files people read end with one. */
	{
		char *t = realloc(text, len + 2);

		if (!t) {
			free(text);
			snprintf(err, errlen, "cannot write %s: out of memory", path);
			return -1;
		}
		text = t;
		text[len++] = '\n';
		text[len] = '\0';
	}
	rc = atomic_write_file(path, text, len, err, errlen);
	free(text);
	return rc;
}

char *sj_compact(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT);
}
