/*
 * lib/url.h - the little Stork needs to know about URLs without a URL
 * library: whether a configured string is one, and how to show it without
 * its secret.
 *
 * Web hooks (Slack, Mattermost, most CI and chat services) carry their
 * credential in the path or query ("https://hooks.slack.com/services/T0/B0/
 * XXXX"); data URLs may carry a user and password. Logs, the resolved
 * configuration and provenance show only the scheme and host.
 */
#ifndef STORK_URL_H
#define STORK_URL_H

#include <stddef.h>

/* Whether s starts with http:// or https:// (case-insensitive). */
int url_is_http(const char *s);

/*
 * The host (and port) of an http(s) URL, after any user:password@, with
 * *host_end where the host ends (at the path, query, fragment or end).
 * NULL when url is not an http(s) URL.
 */
const char *url_host(const char *url, const char **host_end);

/*
 * url with its user information, path and query replaced:
 * "https://hooks.example.org/<redacted>". A string that is not a URL is
 * copied as it is; an empty one stays empty.
 */
void url_redact(const char *url, char *out, size_t len);

/*
 * url as logs may show a data URL: without user information and query
 * (a presigned object-store URL keeps its signature there), the path kept
 * since it names the shard: "https://data.example.org/shards/x.bin?<redacted>".
 */
void url_public(const char *url, char *out, size_t len);

/*
 * A message (libcurl's error text, say) with every http(s) URL in it shown
 * as url_public shows it: no user information, no query.
 */
void url_public_text(const char *text, char *out, size_t len);

/* Whether url carries user information (user:password@host). */
int url_has_userinfo(const char *url);

#endif
