/* lib/run/end_notice.c - see end_notice.h. */
#include "config.h"
#include "lib/run/end_notice.h"
#include "lib/io/atomic_file.h"
#include "lib/run/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX ".end."

int end_notice_path(char *path, size_t len, const char *run_dir, const char *job_id,
		    int restart_count, int attempt)
{
	int n = snprintf(path, len, "%s/logs/" PREFIX "%s.%d.%d", run_dir, job_id, restart_count,
			 attempt);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int end_notice_post(const char *path, const struct end_notice *n, struct end_notice *first)
{
	/* "failed 0.000\nMESSAGE\n" */
	char text[sizeof n->message + 64];
	int len = snprintf(text, sizeof text, "%s %.3f\n%s\n",
			   n->kind == END_NOTICE_HANG ? "hang" : "failed", n->at, n->message);
	int rc;

	if (len < 0)
		return -1;
	if ((size_t)len >= sizeof text)
		len = (int)sizeof text - 1;
	if ((rc = atomic_post_once(path, text, (size_t)len)) != 0)
		return rc;
	if (!end_notice_read(path, first)) {
		errno = EEXIST;
		return -1;
	}
	return 0;
}

int end_notice_read(const char *path, struct end_notice *n)
{
	char text[sizeof n->message + 64], kind[16];
	char *nl;

	if (!atomic_post_read(path, text, sizeof text) ||
	    sscanf(text, "%15s %lf", kind, &n->at) != 2 || !(nl = strchr(text, '\n')))
		return 0;
	n->kind = strcmp(kind, "hang") == 0 ? END_NOTICE_HANG : END_NOTICE_FAILED;
	snprintf(n->message, sizeof n->message, "%.*s", (int)strcspn(nl + 1, "\n"), nl + 1);
	return 1;
}

void end_notice_remove_all(const char *run_dir)
{
	static const char *const prefix[] = { PREFIX };

	rundir_remove_logs_prefixed(run_dir, prefix, 1);
}
