/*
 * lib/url.c - see url.h.
 */
#include "config.h"
#include "lib/url.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int url_is_http(const char *s)
{
	return s && (!strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8));
}

void url_redact(const char *url, char *out, size_t len)
{
	const char *host, *end, *at;

	if (!len)
		return;
	if (!url_is_http(url)) {
		snprintf(out, len, "%s", url ? url : "");
		return;
	}
	host = strstr(url, "://") + 3;
	end = host + strcspn(host, "/?#");
	/* user:password@ belongs to the secret, not to the host */
	at = memchr(host, '@', (size_t)(end - host));
	if (at)
		host = at + 1;
	snprintf(out, len, "%.*s%.*s%s", (int)(strstr(url, "://") + 3 - url), url, (int)(end - host),
		 host, *end && strcmp(end, "/") ? "/<redacted>" : "");
}
