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

int url_has_userinfo(const char *url)
{
	const char *host, *end;

	if (!url_is_http(url))
		return 0;
	host = strstr(url, "://") + 3;
	end = host + strcspn(host, "/?#");
	return memchr(host, '@', (size_t)(end - host)) != NULL;
}

void url_public(const char *url, char *out, size_t len)
{
	const char *host, *hend, *at, *q;

	if (!len)
		return;
	if (!url_is_http(url)) {
		snprintf(out, len, "%s", url ? url : "");
		return;
	}
	host = strstr(url, "://") + 3;
	hend = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(hend - host));
	if (at)
		host = at + 1;
	q = hend + strcspn(hend, "?#");
	snprintf(out, len, "%.*s%.*s%s", (int)(strstr(url, "://") + 3 - url), url, (int)(q - host), host,
		 *q ? "?<redacted>" : "");
}
