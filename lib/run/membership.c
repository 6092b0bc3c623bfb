/* lib/run/membership.c - see membership.h. */
#include "config.h"
#include "lib/run/membership.h"
#include "lib/io/atomic_file.h"
#include "lib/run/rundir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int membership_path(char *path, size_t len, const struct membership_run *m, const char *kind,
		    int epoch, int node)
{
	int n = snprintf(path, len, "%s/logs/.%s.%s.%d.%d", m->run_dir, kind, m->job_id,
			 m->restart_count, m->attempt);

	if (n >= 0 && (size_t)n < len && epoch >= 0)
		n += snprintf(path + n, len - (size_t)n, ".%d", epoch);
	if (n >= 0 && (size_t)n < len && node >= 0)
		n += snprintf(path + n, len - (size_t)n, ".%d", node);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

void membership_post_gone(const struct membership_run *m, int node, const char *why)
{
	char path[4200];

	if (membership_path(path, sizeof path, m, "gone", -1, node) == 0)
		atomic_post_once(path, why, strlen(why));
}

int membership_rejoin_from_env(struct membership_rejoin *r, char *err, size_t errlen)
{
	const char *s = getenv(MEMBERSHIP_REJOIN_ENV);
	int end = 0;

	if (!s)
		return 0;
	if (sscanf(s, "%d %d %d %d%n", &r->node, &r->nnodes, &r->attempt, &r->epoch, &end) != 4 ||
	    s[end] || r->node < 0 || r->node >= r->nnodes || r->attempt < 0 || r->epoch < 0) {
		snprintf(err, errlen, "%s='%s' is not \"NODE NODES ATTEMPT EPOCH\" of a lost node "
			 "(0 <= NODE < NODES)", MEMBERSHIP_REJOIN_ENV, s);
		return -1;
	}
	return 1;
}

void membership_remove_all(const char *run_dir)
{
	static const char *const kinds[] = { ".regroup.", ".member.", ".members.", ".gone.",
					     ".ready." };

	rundir_remove_logs_prefixed(run_dir, kinds, sizeof kinds / sizeof kinds[0]);
}
