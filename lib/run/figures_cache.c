/*
 * lib/run/figures_cache.c - see figures_cache.h.
 */
#include "config.h"
#include "lib/run/figures_cache.h"

#include "lib/io/private_dir.h"
#include "lib/formats/stork_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIGURE_MAX_BYTES (64 << 10)

/* A file or host name of letters, digits, '-', '_' and '.', not starting with '.'. */
static int plain_name(const char *s)
{
	if (!*s || *s == '.' || strlen(s) > 200)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
	       strlen(s);
}

int figures_dir(const char *host, char *buf, size_t len, char *err, size_t errlen)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char me[256] = "";
	int n;

	if (!host) {
		gethostname(me, sizeof me - 1);
		host = me;
	}
	if (!plain_name(host)) {
		snprintf(err, errlen, "'%s' is not a host name", host);
		return -1;
	}
	/* XDG: a relative XDG_CACHE_HOME is invalid and to be ignored */
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/stork/%s", xdg, host);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.cache/stork/%s", home, host);
	else {
		snprintf(err, errlen, "neither XDG_CACHE_HOME nor HOME is an absolute path: "
			 "set one for the figures cache");
		return -1;
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(err, errlen, "the figures cache's path is too long");
		return -1;
	}
	return 0;
}

/* host's directory joined with NAME.json into path. */
static int figure_path(const char *host, const char *name, char *path, size_t len, char *err,
		       size_t errlen)
{
	char dir[4096];

	if (!plain_name(name)) {
		snprintf(err, errlen, "'%s' is not a figure's name", name);
		return -1;
	}
	if (figures_dir(host, dir, sizeof dir, err, errlen) < 0)
		return -1;
	if ((size_t)snprintf(path, len, "%s/%s.json", dir, name) >= len) {
		snprintf(err, errlen, "the figures cache's path is too long");
		return -1;
	}
	return 0;
}

int figures_save(const char *host, const char *name, const json_t *v, char *path, size_t plen,
		 char *err, size_t errlen)
{
	char dir[4096], file[4200];

	if (figures_dir(host, dir, sizeof dir, err, errlen) < 0 ||
	    figure_path(host, name, file, sizeof file, err, errlen) < 0 ||
	    private_dir_make(dir, "figures cache", "XDG_CACHE_HOME", err, errlen) < 0 ||
	    sj_write_file(file, v, err, errlen) < 0)
		return -1;
	if (path)
		snprintf(path, plen, "%s", file);
	return 0;
}

json_t *figures_load(const char *host, const char *name, char *path, size_t plen, char *err,
		     size_t errlen)
{
	char file[4200];
	json_t *v;

	if (figure_path(host, name, file, sizeof file, err, errlen) < 0)
		return NULL;
	if (path)
		snprintf(path, plen, "%s", file);
	if (access(file, F_OK) < 0 && errno == ENOENT) {
		if (errlen)
			err[0] = '\0';
		return NULL;
	}
	v = sj_load_file_strict(file, FIGURE_MAX_BYTES, err, errlen);
	if (v && !json_is_object(v)) {
		snprintf(err, errlen, "%s: not a JSON object", file);
		json_decref(v);
		return NULL;
	}
	return v;
}
