/*
 * lib/slurm/time_limit_stop.h - whether a run's stop is the job's time
 * limit (timeout_requeued) or something else (preempted_requeued): the
 * reason a run reports must be what happened.
 *
 * Slurm ends a job at its time limit with SIGTERM (then KILL after
 * KillWait), and, when the job asked for it (sbatch --signal=[B:]SIG@LEAD),
 * sends SIG about LEAD seconds before the end (its timer runs once a
 * minute or so). Any other signal, a USR1 from `scancel --signal` or a
 * preemption's TERM, is not the time limit's, however near the end it
 * comes. A stop with no signal at all is the deadline guard's (the end is
 * near by construction) or a test's.
 */
#ifndef STORK_LIB_SLURM_TIME_LIMIT_STOP_H
#define STORK_LIB_SLURM_TIME_LIMIT_STOP_H

#include <stdbool.h>

/* Slurm's timer: how late a time-limit signal may come, in seconds. */
#define TIME_LIMIT_SLACK_S 90
/* A stop without a signal this close to the end (seconds) is the time limit's. */
#define TIME_LIMIT_NEAR_S 300

/*
 * signo: the stop's signal, 0 for none; time_left: seconds to the job's
 * end (has_end false: no end known); warn_signo and warn_lead: the job's
 * --signal (0, 0 when it has none).
 */
bool stop_is_time_limit(int signo, bool has_end, double time_left, int warn_signo,
			int warn_lead);

#endif
