/* launcher/programs.c - see programs.h. */
#include "config.h"
#include "launcher/programs.h"

#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * $env when set; else build_rel, relative to the running stork's folder,
 * when that is an executable file (the build tree); else installed.
 */
static void locate(const char *env, const char *build_rel, const char *installed, char *buf,
		   size_t len)
{
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (getenv(env)) {
		snprintf(buf, len, "%s", getenv(env));
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		*slash = '\0';
		if (path_join(buf, len, self, build_rel) == 0 && access(buf, X_OK) == 0)
			return;
	}
	snprintf(buf, len, "%s", installed);
}

void find_storkd(const char *given, char *buf, size_t len)
{
	if (given)
		snprintf(buf, len, "%s", given);
	else
		locate("STORK_STORKD", "../daemon/storkd", STORK_SBINDIR "/storkd", buf, len);
}

void find_program_daemon(char *buf, size_t len)
{
	locate("STORK_STORKD_PROGRAM", "../daemon/storkd-program",
	       STORK_PKGLIBEXECDIR "/storkd-program", buf, len);
}

int engine_exec(int argc, char **argv)
{
	char engine[PATH_MAX], **args = calloc((size_t)argc + 2, sizeof *args);

	if (!args) {
		stork_error("out of memory");
		return STORK_EXIT_INTERNAL;
	}
	locate("STORK_ENGINE", "engine/stork-engine", STORK_PKGLIBEXECDIR "/stork-engine", engine,
	       sizeof engine);
	args[0] = engine;
	memcpy(args + 1, argv, (size_t)argc * sizeof *argv);
	fflush(NULL);
	execv(engine, args);
	stork_error("cannot run %s, which runs 'stork %s': %s (see STORK_ENGINE in stork(1))", engine,
		    argv[0], strerror(errno));
	free(args);
	return STORK_EXIT_INTERNAL;
}
