/*
 * lib/fault.h - delays the test suite injects to widen the windows it must
 * hit: a checkpoint half written, a process still starting, a step that
 * takes long enough for Slurm's timed signal to find the run still going.
 *
 * Honoured only by builds configured with --enable-fault-injection
 * (STORK_FAULT_INJECTION in config.h, which must come first); in any other
 * build fault_seconds() is 0 and nothing sleeps.
 */
#ifndef STORK_FAULT_H
#define STORK_FAULT_H

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* The seconds (fractions welcome) an environment variable asks for; 0 if none. */
static inline double fault_seconds(const char *name)
{
#ifdef STORK_FAULT_INJECTION
	const char *s = getenv(name);
	double v = s ? atof(s) : 0;

	return v > 0 ? v : 0;
#else
	(void)name;
	return 0;
#endif
}

/* Sleep that long, whatever signals arrive meanwhile. */
static inline void fault_sleep(double seconds)
{
	struct timespec ts;

	if (seconds <= 0)
		return;
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static inline void fault_delay(const char *name)
{
	fault_sleep(fault_seconds(name));
}

/*
 * Whether an environment variable lists this step ("10,20,30"): the test
 * suite's way to make the checkpoint of a given step fail as a full disk
 * would. Always 0 outside fault-injection builds.
 */
static inline int fault_at_step(const char *name, long long step)
{
#ifdef STORK_FAULT_INJECTION
	const char *s = getenv(name);
	char *end;

	while (s && *s) {
		long long v = strtoll(s, &end, 10);

		if (end == s)
			return 0;
		if (v == step)
			return 1;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
#else
	(void)name;
	(void)step;
#endif
	return 0;
}

#endif
