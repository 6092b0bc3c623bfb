/*
 * lib/term_text.c - see term_text.h.
 */
#include "config.h"
#include "lib/term_text.h"

#include <stdarg.h>
#include <stdlib.h>

int term_write(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];
		int rc;

		if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
			rc = fprintf(f, "\\u00%02x", p[++i]);
		else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
			rc = fprintf(f, "\\x%02x", c);
		else
			rc = putc(c, f);
		if (rc < 0)
			return EOF;
	}
	return 0;
}

int term_printf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	char *text;
	int n, rc;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return EOF;
	rc = term_write(f, text, (size_t)n);
	free(text);
	return rc;
}
