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

const char *url_host(const char *url, const char **host_end)
{
	const char *host, *end, *at;

	if (!url_is_http(url))
		return NULL;
	host = strstr(url, "://") + 3;
	end = host + strcspn(host, "/?#");
	/* user:password@ belongs to the secret, not to the host */
	at = memchr(host, '@', (size_t)(end - host));
	*host_end = end;
	return at ? at + 1 : host;
}

int url_has_userinfo(const char *url)
{
	const char *end, *host = url_host(url, &end);

	return host && host != strstr(url, "://") + 3;
}

/* The length of "http://" or "https://" in an http URL. */
static int scheme_len(const char *url)
{
	return (int)(strstr(url, "://") + 3 - url);
}

void url_redact(const char *url, char *out, size_t len)
{
	const char *end, *host = url_host(url, &end);

	if (!host) {
		snprintf(out, len, "%s", url ? url : "");
		return;
	}
	snprintf(out, len, "%.*s%.*s%s", scheme_len(url), url, (int)(end - host), host,
		 *end && strcmp(end, "/") ? "/<redacted>" : "");
}

void url_public(const char *url, char *out, size_t len)
{
	const char *end, *host = url_host(url, &end), *q;

	if (!host) {
		snprintf(out, len, "%s", url ? url : "");
		return;
	}
	q = end + strcspn(end, "?#");
	snprintf(out, len, "%.*s%.*s%s", scheme_len(url), url, (int)(q - host), host,
		 *q ? "?<redacted>" : "");
}

void url_public_text(const char *text, char *out, size_t len)
{
	size_t used = 0;

	if (!len)
		return;
	out[0] = '\0';
	while (*text && used + 1 < len) {
		const char *u = strstr(text, "http");
		size_t plain;

		while (u && !url_is_http(u))
			u = strstr(u + 4, "http");
		plain = u ? (size_t)(u - text) : strlen(text);
		used += (size_t)snprintf(out + used, len - used, "%.*s", (int)plain, text);
		if (!u || used + 1 >= len)
			break;
		{
			size_t ulen = strcspn(u, " \t\r\n'\"<>");
			char url[2048], shown[2048];

			snprintf(url, sizeof url, "%.*s", (int)ulen, u);
			url_public(url, shown, sizeof shown);
			used += (size_t)snprintf(out + used, len - used, "%s", shown);
			text = u + ulen;
		}
	}
}
