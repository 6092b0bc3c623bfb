/*
 * lib/json.c - see json.h.
 *
 * The writer keeps, per nesting level, whether the level is an object and
 * whether it already has an item; that is all it needs to place commas,
 * colons and indentation and to catch a value given where a key is due.
 *
 * The reader is a recursive-descent parser over the text (depth limited to
 * JSON_MAX_DEPTH) that tracks line and column for its messages.
 */
#include "config.h"
#include "lib/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ writer */

void json_init(struct json *j, enum json_style style)
{
	memset(j, 0, sizeof *j);
	j->style = style;
}

void json_free(struct json *j)
{
	free(j->buf);
	json_init(j, j->style);
}

void json_reset(struct json *j)
{
	char *buf = j->buf;
	size_t cap = j->cap;
	enum json_style style = j->style;

	json_init(j, style);
	j->buf = buf;
	j->cap = cap;
	if (buf)
		buf[0] = '\0';
}

const char *json_str(const struct json *j)
{
	return j->buf ? j->buf : "";
}

size_t json_len(const struct json *j)
{
	return j->len;
}

int json_error(const struct json *j)
{
	if (j->error)
		return j->error;
	return j->depth != 0 || j->want_value || j->len == 0 ? EINVAL : 0;
}

static void put(struct json *j, const char *s, size_t n)
{
	if (j->error)
		return;
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 256;
		char *b;

		while (j->len + n + 1 > cap)
			cap *= 2;
		if (!(b = realloc(j->buf, cap))) {
			j->error = ENOMEM;
			return;
		}
		j->buf = b;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

static void puts_(struct json *j, const char *s)
{
	put(j, s, strlen(s));
}

static void newline(struct json *j, int depth)
{
	if (j->style != JSON_PRETTY)
		return;
	put(j, "\n", 1);
	for (int i = 0; i < depth; i++)
		put(j, "  ", 2);
}

/* Before any value: a comma and indentation inside arrays; nothing after a
 * key. A value where a key is due, or a second top-level value, is misuse. */
static void before_value(struct json *j)
{
	if (j->error)
		return;
	if (j->want_value) {
		j->want_value = false;
		return;
	}
	if (j->depth == 0) {
		if (j->len)
			j->error = EINVAL;
		return;
	}
	if (j->is_object[j->depth - 1]) {
		j->error = EINVAL;
		return;
	}
	if (j->has_items[j->depth - 1])
		put(j, ",", 1);
	j->has_items[j->depth - 1] = true;
	newline(j, j->depth);
}

static void begin(struct json *j, bool object)
{
	before_value(j);
	if (j->error)
		return;
	if (j->depth == JSON_MAX_DEPTH) {
		j->error = EINVAL;
		return;
	}
	put(j, object ? "{" : "[", 1);
	j->is_object[j->depth] = object;
	j->has_items[j->depth] = false;
	j->depth++;
}

static void end(struct json *j, bool object)
{
	if (j->error)
		return;
	if (j->depth == 0 || j->is_object[j->depth - 1] != object || j->want_value) {
		j->error = EINVAL;
		return;
	}
	j->depth--;
	if (j->has_items[j->depth])
		newline(j, j->depth);
	put(j, object ? "}" : "]", 1);
}

void json_begin_object(struct json *j) { begin(j, true); }
void json_end_object(struct json *j) { end(j, true); }
void json_begin_array(struct json *j) { begin(j, false); }
void json_end_array(struct json *j) { end(j, false); }

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;    /* overlong, out of range, or a surrogate */
	return len;
}

static void put_escaped(struct json *j, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];

	put(j, "\"", 1);
	for (size_t i = 0; i < n;) {
		size_t run = i, u;

		/* Copy a stretch that needs no escaping in one go. */
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
			run++;
		put(j, s + i, run - i);
		if ((i = run) >= n)
			break;
		if (p[i] == '"' || p[i] == '\\') {
			esc[0] = '\\', esc[1] = (char)p[i];
			put(j, esc, 2);
			i++;
		} else if (p[i] < 0x20) {
			const char *named = p[i] == '\n' ? "\\n" : p[i] == '\t' ? "\\t" : p[i] == '\r' ? "\\r" :
					    p[i] == '\b' ? "\\b" : p[i] == '\f' ? "\\f" : NULL;

			if (named)
				puts_(j, named);
			else {
				snprintf(esc, sizeof esc, "\\u%04x", p[i]);
				puts_(j, esc);
			}
			i++;
		} else if ((u = utf8_len(p + i, n - i))) {
			put(j, s + i, u);
			i += u;
		} else {
			puts_(j, "\\ufffd");
			i++;
		}
	}
	put(j, "\"", 1);
}

void json_key(struct json *j, const char *key)
{
	if (j->error)
		return;
	if (j->depth == 0 || !j->is_object[j->depth - 1] || j->want_value || !key) {
		j->error = EINVAL;
		return;
	}
	if (j->has_items[j->depth - 1])
		put(j, ",", 1);
	j->has_items[j->depth - 1] = true;
	newline(j, j->depth);
	put_escaped(j, key, strlen(key));
	put(j, j->style == JSON_PRETTY ? ": " : ":", j->style == JSON_PRETTY ? 2 : 1);
	j->want_value = true;
}

void json_string_len(struct json *j, const char *s, size_t len)
{
	before_value(j);
	if (!s)
		puts_(j, "null");
	else
		put_escaped(j, s, len);
}

void json_string(struct json *j, const char *s)
{
	json_string_len(j, s, s ? strlen(s) : 0);
}

void json_int(struct json *j, int64_t v)
{
	char num[32];

	before_value(j);
	snprintf(num, sizeof num, "%" PRId64, v);
	puts_(j, num);
}

void json_uint(struct json *j, uint64_t v)
{
	char num[32];

	before_value(j);
	snprintf(num, sizeof num, "%" PRIu64, v);
	puts_(j, num);
}

void json_double(struct json *j, double v)
{
	char num[40];

	before_value(j);
	if (!isfinite(v)) {
		puts_(j, "null");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(num, sizeof num, "%.*g", prec, v);
		if (strtod(num, NULL) == v)
			break;
	}
	puts_(j, num);
}

void json_bool(struct json *j, bool v)
{
	before_value(j);
	puts_(j, v ? "true" : "false");
}

void json_null(struct json *j)
{
	before_value(j);
	puts_(j, "null");
}

void json_raw(struct json *j, const char *text)
{
	before_value(j);
	puts_(j, text);
}

void json_key_string(struct json *j, const char *key, const char *s) { json_key(j, key); json_string(j, s); }
void json_key_int(struct json *j, const char *key, int64_t v) { json_key(j, key); json_int(j, v); }
void json_key_uint(struct json *j, const char *key, uint64_t v) { json_key(j, key); json_uint(j, v); }
void json_key_double(struct json *j, const char *key, double v) { json_key(j, key); json_double(j, v); }
void json_key_bool(struct json *j, const char *key, bool v) { json_key(j, key); json_bool(j, v); }
void json_key_null(struct json *j, const char *key) { json_key(j, key); json_null(j); }
void json_key_begin_object(struct json *j, const char *key) { json_key(j, key); json_begin_object(j); }
void json_key_begin_array(struct json *j, const char *key) { json_key(j, key); json_begin_array(j); }

/* ================================================================ reader */

struct reader {
	const char *s, *end;
	const char *line_start;
	int line;
	int depth;
	char *err;
	size_t errlen;
	int failed;
};

static void rfail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void rfail(struct reader *r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (r->failed)
		return;
	r->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (r->err && r->errlen)
		snprintf(r->err, r->errlen, "%d:%d: %s", r->line, (int)(r->s - r->line_start) + 1, msg);
}

static void skip_ws(struct reader *r)
{
	while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) {
		if (*r->s == '\n') {
			r->line++;
			r->line_start = r->s + 1;
		}
		r->s++;
	}
}

static int parse_value(struct reader *r, struct json_value *v);

static int match(struct reader *r, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->s) < n || memcmp(r->s, word, n))
		return 0;
	r->s += n;
	return 1;
}

static int hex4(struct reader *r, uint32_t *out)
{
	*out = 0;
	if (r->end - r->s < 4) {
		rfail(r, "truncated \\u escape");
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		char ch = *r->s++;
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
			ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;

		if (d < 0) {
			r->s--;
			rfail(r, "bad hex digit in \\u escape");
			return -1;
		}
		*out = *out << 4 | (uint32_t)d;
	}
	return 0;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int escape(struct reader *r, char *out, size_t *n)
{
	uint32_t cp, lo;
	char ch = *r->s++;
	const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *p;

	if (ch != 'u') {
		if (!ch || !(p = strchr(from, ch))) {
			r->s--;
			rfail(r, "unknown escape \\%c", ch);
			return -1;
		}
		out[(*n)++] = to[p - from];
		return 0;
	}
	if (hex4(r, &cp) < 0)
		return -1;
	if (cp >= 0xd800 && cp <= 0xdbff && r->end - r->s >= 6 && r->s[0] == '\\' && r->s[1] == 'u') {
		r->s += 2;
		if (hex4(r, &lo) < 0)
			return -1;
		if (lo >= 0xdc00 && lo <= 0xdfff)
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		else
			r->s -= 6, cp = 0xfffd;     /* lone high surrogate; reread the next escape */
	} else if (cp >= 0xd800 && cp <= 0xdfff) {
		cp = 0xfffd;
	}
	*n += utf8_encode(cp, out + *n);
	return 0;
}

static int parse_string(struct reader *r, char **out, size_t *outlen)
{
	const char *start = ++r->s;
	char *buf;
	size_t n = 0;

	/* Decoded text is never longer than the quoted one. */
	while (r->s < r->end && *r->s != '"')
		r->s += *r->s == '\\' && r->s + 1 < r->end ? 2 : 1;
	if (r->s >= r->end) {
		r->s = start - 1;
		rfail(r, "unterminated string");
		return -1;
	}
	if (!(buf = malloc((size_t)(r->s - start) + 1))) {
		rfail(r, "out of memory");
		return -1;
	}
	for (r->s = start; *r->s != '"';) {
		unsigned char ch = (unsigned char)*r->s;

		if (ch < 0x20) {
			rfail(r, "control character in a string");
			goto fail;
		}
		if (ch == '\\') {
			r->s++;
			if (escape(r, buf, &n) < 0)
				goto fail;
		} else {
			buf[n++] = (char)ch;
			r->s++;
		}
	}
	r->s++;
	buf[n] = '\0';
	*out = buf;
	*outlen = n;
	return 0;
fail:
	free(buf);
	return -1;
}

static int parse_number(struct reader *r, struct json_value *v)
{
	const char *p = r->s;
	char tmp[64], *end;
	int frac = 0;

	if (p < r->end && *p == '-')
		p++;
	if (p >= r->end || *p < '0' || *p > '9') {
		rfail(r, "unexpected character '%c'", *r->s);
		return -1;
	}
	if (*p == '0' && p + 1 < r->end && p[1] >= '0' && p[1] <= '9') {
		rfail(r, "a number with a leading zero");
		return -1;
	}
	while (p < r->end && strchr("0123456789+-.eE", *p)) {
		frac |= *p == '.' || *p == 'e' || *p == 'E';
		p++;
	}
	if ((size_t)(p - r->s) >= sizeof tmp) {
		rfail(r, "number too long");
		return -1;
	}
	memcpy(tmp, r->s, (size_t)(p - r->s));
	tmp[p - r->s] = '\0';
	v->type = JSON_NUMBER;
	v->num = strtod(tmp, &end);
	if (*end) {
		rfail(r, "malformed number '%s'", tmp);
		return -1;
	}
	if (!frac) {
		errno = 0;
		v->i = strtoll(tmp, &end, 10);
		v->is_int = errno == 0;
	}
	r->s = p;
	return 0;
}

static int push(struct json_value *v, char *key, size_t *cap)
{
	if (v->n == *cap) {
		size_t c = *cap ? *cap * 2 : 4;
		struct json_value *items = realloc(v->items, c * sizeof *items);

		if (!items)
			return -1;
		v->items = items;
		if (v->type == JSON_OBJECT) {
			char **keys = realloc(v->keys, c * sizeof *keys);

			if (!keys)
				return -1;
			v->keys = keys;
		}
		*cap = c;
	}
	memset(&v->items[v->n], 0, sizeof v->items[0]);
	if (v->type == JSON_OBJECT)
		v->keys[v->n] = key;
	v->n++;
	return 0;
}

static int parse_container(struct reader *r, struct json_value *v, bool object)
{
	char close = object ? '}' : ']';
	size_t cap = 0, keylen;
	char *key = NULL;

	v->type = object ? JSON_OBJECT : JSON_ARRAY;
	if (++r->depth > JSON_MAX_DEPTH) {
		rfail(r, "nested deeper than %d levels", JSON_MAX_DEPTH);
		return -1;
	}
	r->s++;
	skip_ws(r);
	if (r->s < r->end && *r->s == close) {
		r->s++;
		r->depth--;
		return 0;
	}
	for (;;) {
		skip_ws(r);
		if (object) {
			if (r->s >= r->end || *r->s != '"') {
				rfail(r, "expected a member name in quotes");
				return -1;
			}
			if (parse_string(r, &key, &keylen) < 0)
				return -1;
			skip_ws(r);
			if (r->s >= r->end || *r->s != ':') {
				free(key);
				rfail(r, "expected ':' after a member name");
				return -1;
			}
			r->s++;
		}
		if (push(v, key, &cap) < 0) {
			free(key);
			rfail(r, "out of memory");
			return -1;
		}
		key = NULL;
		if (parse_value(r, &v->items[v->n - 1]) < 0)
			return -1;
		skip_ws(r);
		if (r->s < r->end && *r->s == ',') {
			r->s++;
			continue;
		}
		if (r->s < r->end && *r->s == close) {
			r->s++;
			r->depth--;
			return 0;
		}
		rfail(r, "expected ',' or '%c'", close);
		return -1;
	}
}

static int parse_value(struct reader *r, struct json_value *v)
{
	skip_ws(r);
	if (r->s >= r->end) {
		rfail(r, "unexpected end of text");
		return -1;
	}
	switch (*r->s) {
	case '{':
		return parse_container(r, v, true);
	case '[':
		return parse_container(r, v, false);
	case '"':
		v->type = JSON_STRING;
		return parse_string(r, &v->str, &v->str_len);
	case 't':
	case 'f':
	case 'n':
		if (match(r, "true") || match(r, "false")) {
			v->type = JSON_BOOL;
			v->b = r->s[-4] == 't';    /* "true" or "alse" of "false" */
			return 0;
		}
		if (match(r, "null")) {
			v->type = JSON_NULL;
			return 0;
		}
		rfail(r, "unexpected word");
		return -1;
	default:
		return parse_number(r, v);
	}
}

static void value_clear(struct json_value *v)
{
	for (size_t i = 0; i < v->n; i++) {
		value_clear(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

void json_value_free(struct json_value *v)
{
	if (!v)
		return;
	value_clear(v);
	free(v);
}

struct json_value *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct reader r = { text, text + len, text, 1, 0, err, errlen, 0 };
	struct json_value *v = calloc(1, sizeof *v);

	if (!v) {
		rfail(&r, "out of memory");
		return NULL;
	}
	if (parse_value(&r, v) == 0) {
		skip_ws(&r);
		if (r.s == r.end)
			return v;
		rfail(&r, "text after the JSON value");
	}
	json_value_free(v);
	return NULL;
}

struct json_value *json_parse_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL, msg[300];
	size_t len = 0, cap = 0, n;
	struct json_value *v = NULL;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	do {
		if (cap - len < 4096) {
			char *b = realloc(buf, cap = cap * 2 + 8192);

			if (!b) {
				snprintf(err, errlen, "%s: out of memory", path);
				goto out;
			}
			buf = b;
		}
		len += n = fread(buf + len, 1, cap - len, f);
	} while (n > 0);
	if (ferror(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!(v = json_parse(buf, len, msg, sizeof msg)))
		snprintf(err, errlen, "%s:%s", path, msg);
out:
	free(buf);
	fclose(f);
	return v;
}

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (size_t i = obj->n; i-- > 0;)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

const struct json_value *json_at(const struct json_value *arr, size_t i)
{
	return arr && arr->type == JSON_ARRAY && i < arr->n ? &arr->items[i] : NULL;
}

const char *json_get_string(const struct json_value *obj, const char *key)
{
	const struct json_value *v = json_get(obj, key);

	return v && v->type == JSON_STRING ? v->str : NULL;
}

int json_get_int(const struct json_value *obj, const char *key, int64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v || v->type != JSON_NUMBER || !v->is_int)
		return -1;
	*out = v->i;
	return 0;
}

int json_get_double(const struct json_value *obj, const char *key, double *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v || v->type != JSON_NUMBER)
		return -1;
	*out = v->num;
	return 0;
}

int json_get_bool(const struct json_value *obj, const char *key, bool *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v || v->type != JSON_BOOL)
		return -1;
	*out = v->b;
	return 0;
}
