/*
 * lib/clock.h - the two clocks Stork reads, in seconds as doubles.
 *
 * clock_monotonic() for durations (step times, heartbeats, benchmarks): it
 * never jumps. clock_wall() for moments people and other hosts compare
 * (failure times in exit_info.json, metrics timestamps).
 */
#ifndef STORK_CLOCK_H
#define STORK_CLOCK_H

#include <time.h>

static inline double clock_seconds_(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double clock_monotonic(void)
{
	return clock_seconds_(CLOCK_MONOTONIC);
}

static inline double clock_wall(void)
{
	return clock_seconds_(CLOCK_REALTIME);
}

#endif
