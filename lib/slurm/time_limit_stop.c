/*
 * lib/slurm/time_limit_stop.c - see time_limit_stop.h.
 */
#include "config.h"
#include "lib/slurm/time_limit_stop.h"

#include <signal.h>

bool stop_is_time_limit(int signo, bool has_end, double time_left, int warn_signo,
			int warn_lead)
{
	if (!has_end)
		return false;
	if (!signo)
		return time_left <= TIME_LIMIT_NEAR_S;
	if (signo == SIGTERM && time_left <= TIME_LIMIT_SLACK_S)
		return true;
	return warn_signo > 0 && signo == warn_signo && time_left <= warn_lead + TIME_LIMIT_SLACK_S;
}
