/*
 * lib/clock.h - the two clocks Stork reads, in seconds as doubles.
 *
 * clock_monotonic() for durations (step times, heartbeats, benchmarks): it
 * never jumps. clock_wall() for moments people and other hosts compare
 * (failure times in exit_info.json, metrics timestamps); clock_wall_in_ms()
 * for a condition variable's timed wait, which counts on that clock.
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

/* CLOCK_REALTIME ms from now, for pthread_cond_timedwait's deadline. */
static inline struct timespec clock_wall_in_ms(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
