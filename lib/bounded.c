/*
 * lib/bounded.c - see bounded.h.
 */
#include "config.h"
#include "lib/bounded.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int path_join(char *dst, size_t len, const char *dir, const char *name)
{
	int n = snprintf(dst, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static void vmsg_format(char *dst, size_t len, const char *fmt, va_list ap)
{
	int n;

	if (!dst || len == 0)
		return;
	n = vsnprintf(dst, len, fmt, ap);
	if (n >= 0 && (size_t)n >= len && len > 4)
		memcpy(dst + len - 4, "...", 4);
}

void msg_format(char *dst, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg_format(dst, len, fmt, ap);
	va_end(ap);
}

int msg_fail(char *dst, size_t len, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg_format(dst, len, fmt, ap);
	va_end(ap);
	return code;
}
