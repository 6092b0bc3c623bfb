/* launcher/run/in_place.c - see in_place.h. */
#include "config.h"
#include "launcher/run/in_place.h"

#include "lib/config/stork_config.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/run/membership.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int in_place_leave(const struct stork_config *cfg, const char *run_dir, int index, int launchers,
		   int attempt, int code, int sig, const char *message)
{
	const char *job = getenv("SLURM_JOB_ID"), *restarts = getenv("SLURM_RESTART_COUNT");
	struct membership_run m = { .run_dir = run_dir, .job_id = job && *job ? job : "local",
				    .restart_count = restarts ? atoi(restarts) : 0, .attempt = attempt };
	char why[256];

	if (!cfg->restart.in_place || launchers < 2 || code == STORK_EXIT_OK)
		return 0;
	/* a death is the one ending the survivors go on after (regroup.c) */
	if (sig)
		snprintf(why, sizeof why, MEMBERSHIP_DIED " of SIG%s", sigabbrev_np(sig));
	else
		snprintf(why, sizeof why, "storkd exited with %d: %s", code, message ? message : "");
	membership_post_gone(&m, index, why);
	if (!sig)
		return 0;
	stork_warn("%s; restart.in_place: the other nodes go on without this one "
		   "(exit_info.json says how the run ends)", why);
	return 1;
}
