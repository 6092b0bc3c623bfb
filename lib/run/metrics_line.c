/*
 * lib/run/metrics_line.c - see metrics_line.h.
 *
 * The grammar read is JSON's, narrowed: an object of members whose values
 * are strings, numbers, true, false or null. Whatever falls outside it, or
 * inside it but where jansson could answer otherwise (an escape in a key
 * or in the metric's name, a byte past ASCII that jansson would check as
 * UTF-8, a number too large, a key given twice), is UNSURE.
 */
#include "config.h"
#include "lib/run/metrics_line.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { UNSURE = -1 };

struct cursor {
	const char *p, *end;
};

enum member { TS, STEP, VALUE, METRIC, OTHER };

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static void skip_blanks(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n'))
		c->p++;
}

/* Whether the next byte is ch; taken if it is. */
static int take(struct cursor *c, char ch)
{
	skip_blanks(c);
	if (c->p >= c->end || *c->p != ch)
		return 0;
	c->p++;
	return 1;
}

/*
 * The string whose opening quote is at c: its bytes as written [*s, *s +
 * *n). Escapes are taken only where they are skipped (!plain), and only
 * the one-letter ones; \u (a NUL or a surrogate jansson may refuse) is
 * UNSURE.
 */
static int string_at(struct cursor *c, int plain, const char **s, size_t *n)
{
	const char *q = ++c->p;

	while (q < c->end && *q != '"') {
		unsigned char ch = (unsigned char)*q;

		if (ch < 0x20 || ch >= 0x80)
			return UNSURE;
		if (ch == '\\') {
			if (plain || q + 1 >= c->end || !q[1] || !strchr("\"\\/bfnrt", q[1]))
				return UNSURE;
			q++;
		}
		q++;
	}
	if (q >= c->end)
		return UNSURE;
	*s = c->p;
	*n = (size_t)(q - c->p);
	c->p = q + 1;
	return 0;
}

static const char *digits(const char *p, const char *end)
{
	while (p < end && is_digit(*p))
		p++;
	return p;
}

/* The number token at c, strictly as JSON writes one: its value, and the integer when it has no fraction or exponent. */
static int number_at(struct cursor *c, double *v, long long *i, int *is_int)
{
	const char *p = c->p, *after;
	char token[64], *end;
	size_t len;

	*is_int = 1;
	if (p < c->end && *p == '-')
		p++;
	if (p >= c->end || !is_digit(*p))
		return UNSURE;
	p = *p == '0' ? p + 1 : digits(p, c->end);
	if (p < c->end && *p == '.') {
		*is_int = 0;
		if ((after = digits(p + 1, c->end)) == p + 1)
			return UNSURE;
		p = after;
	}
	if (p < c->end && (*p == 'e' || *p == 'E')) {
		*is_int = 0;
		if (++p < c->end && (*p == '+' || *p == '-'))
			p++;
		if ((after = digits(p, c->end)) == p)
			return UNSURE;
		p = after;
	}
	len = (size_t)(p - c->p);
	if (len >= sizeof token)
		return UNSURE;
	memcpy(token, c->p, len);
	token[len] = '\0';
	errno = 0;
	if (*is_int) {
		*i = strtoll(token, &end, 10);
		*v = (double)*i;
	} else {
		*v = strtod(token, &end);
	}
	/* jansson refuses an integer past long long and a real past double */
	if (errno == ERANGE && (*is_int || isinf(*v)))
		return UNSURE;
	c->p = p;
	return 0;
}

static int literal_at(struct cursor *c)
{
	static const char *const words[] = { "true", "false", "null" };

	for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
		size_t n = strlen(words[k]);

		if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, words[k], n)) {
			c->p += n;
			return 0;
		}
	}
	return UNSURE;
}

static enum member member_of(const char *key, size_t n)
{
	static const char *const names[] = { [TS] = "ts", [STEP] = "step", [VALUE] = "value",
					     [METRIC] = "metric" };

	for (int m = TS; m < OTHER; m++)
		if (strlen(names[m]) == n && !memcmp(key, names[m], n))
			return (enum member)m;
	return OTHER;
}

/* One member's value at c, kept in s when it is one of the four; found[m] set when it has the wanted type. */
static int value_at(struct cursor *c, enum member m, struct metrics_scalar *s, int found[OTHER])
{
	const char *str;
	size_t n;
	double v = 0;
	long long i = 0;
	int is_int = 0;

	skip_blanks(c);
	if (c->p >= c->end)
		return UNSURE;
	if (*c->p == '"') {
		if (string_at(c, m == METRIC, &str, &n) < 0)
			return UNSURE;
		if (m == METRIC) {
			if (n >= sizeof s->metric)
				return UNSURE;
			memcpy(s->metric, str, n);
			s->metric[n] = '\0';
			found[METRIC] = 1;
		}
		return 0;
	}
	if (*c->p == 't' || *c->p == 'f' || *c->p == 'n')
		return literal_at(c);
	if (number_at(c, &v, &i, &is_int) < 0)
		return UNSURE;
	if (m == TS)
		s->ts = v;
	else if (m == VALUE)
		s->value = v, found[VALUE] = 1;
	else if (m == STEP && is_int)
		s->step = i, found[STEP] = 1;
	return 0;
}

int metrics_line_scalar(const char *line, size_t len, struct metrics_scalar *s)
{
	struct cursor c = { line, line + len };
	int found[OTHER] = { 0 }, seen[OTHER] = { 0 };

	*s = (struct metrics_scalar){ 0 };
	if (!take(&c, '{'))
		return UNSURE;
	if (!take(&c, '}')) {
		do {
			const char *key;
			size_t n;
			enum member m;

			skip_blanks(&c);
			if (c.p >= c.end || *c.p != '"' || string_at(&c, 1, &key, &n) < 0 ||
			    !take(&c, ':'))
				return UNSURE;
			m = member_of(key, n);
			if (m != OTHER && seen[m]++) /* which one jansson keeps is its own choice */
				return UNSURE;
			if (value_at(&c, m, s, found) < 0)
				return UNSURE;
		} while (take(&c, ','));
		if (!take(&c, '}'))
			return UNSURE;
	}
	skip_blanks(&c);
	if (c.p != c.end)
		return UNSURE;
	return found[METRIC] && found[STEP] && found[VALUE];
}
