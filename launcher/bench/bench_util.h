/*
 * launcher/bench/bench_util.h - what the `stork bench` programs share besides
 * lib/clock.h: the median they report (a benchmark on a shared machine
 * quotes medians, not bests).
 */
#ifndef STORK_LAUNCHER_BENCH_UTIL_H
#define STORK_LAUNCHER_BENCH_UTIL_H

/* Median of n values (sorts v in place). */
double bench_median(double *v, int n);

#endif
