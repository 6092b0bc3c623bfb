/*
 * lib/env_number.c - see env_number.h.
 */
#include "config.h"
#include "lib/env_number.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int env_number(const char *name, long long min, long long max, long long dflt, long long *out,
	       char *err, size_t errlen)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	*out = dflt;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		snprintf(err, errlen, "%s=%s: not an integer from %lld to %lld", name, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

void env_set_own(const char *name, const char *value)
{
	const char *had = getenv(ENV_SET_OWN_LIST);
	char list[1024];

	setenv(name, value, 1);
	snprintf(list, sizeof list, "%s%s%s", had ? had : "", had && *had ? ":" : "", name);
	setenv(ENV_SET_OWN_LIST, list, 1);
}
