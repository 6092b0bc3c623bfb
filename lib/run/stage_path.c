/*
 * lib/run/stage_path.c - see stage_path.h.
 */
#include "config.h"
#include "lib/run/stage_path.h"
#include "lib/url.h"

#include <ctype.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every rank thread of storkd resolves the directory: getpwuid_r, not getpwuid's shared buffer. */
int stage_dir_resolve(const char *configured, char *out, size_t len)
{
	const char *tmp = getenv("SLURM_TMPDIR"), *job = getenv("SLURM_JOB_ID"), *user;
	struct passwd pwd, *pw = NULL;
	char buf[4096];
	int n;

	if (configured && *configured)
		n = snprintf(out, len, "%s", configured);
	else if (tmp && *tmp)
		n = snprintf(out, len, "%s", tmp);
	else {
		if (getpwuid_r(getuid(), &pwd, buf, sizeof buf, &pw))
			pw = NULL;
		user = pw ? pw->pw_name : getenv("USER");
		n = snprintf(out, len, "/tmp/stork-%s/%s", user && *user ? user : "user",
			     job && *job ? job : "local");
	}
	return n >= 0 && (size_t)n < len ? 0 : -1;
}

int stage_local_path(const char *dir, const char *url, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const char *host_end, *p = url_host(url, &host_end);
	size_t end, used;
	int n;

	if (!p)
		p = url;
	end = strcspn(p, "?#");
	if (end == 0) /* "https://?x": no host and no path, nothing to name the file after */
		return -1;
	n = snprintf(out, len, "%s/", dir);
	if (n < 0 || (size_t)n >= len)
		return -1;
	used = (size_t)n;
	for (size_t i = 0; i < end; i++) {
		unsigned char c = (unsigned char)p[i];

		if (used + 4 > len)
			return -1;
		if (isalnum(c) || c == '.' || c == '-') {
			out[used++] = (char)c;
		} else { /* escaped, '_' too: two URLs never share a name */
			out[used++] = '_';
			out[used++] = hex[c >> 4];
			out[used++] = hex[c & 15];
		}
	}
	out[used] = '\0';
	/* a name of dots only would be the directory or its parent */
	if (strspn(out + n, ".") == end && used + 3 < len) {
		memmove(out + n + 3, out + n + 1, used - (size_t)n);
		memcpy(out + n, "_2e", 3);
	}
	return 0;
}
