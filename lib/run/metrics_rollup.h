/*
 * lib/run/metrics_rollup.h - metrics/summary.csv: every rank's metrics lines
 * (logs/rank-NNN.metrics.jsonl) rolled up per metric and per minute.
 *
 *   metric,minute,count,p50,p95,mean
 *   step_time_ms,2026-11-23T14:05Z,120,35.1,41.6,36.2
 *
 * minute is the UTC minute of the lines' "ts"; the percentiles are nearest
 * rank (the smallest value with at least q of the values at or below it),
 * over every rank's lines of that metric in that minute; mean is their
 * arithmetic mean. Rows are sorted by metric, then minute. Lines that are
 * not JSON, or have no number as value (a NaN loss is written null), are
 * left out and counted. A metric's name is written whole, however long.
 */
#ifndef STORK_LIB_METRICS_ROLLUP_H
#define STORK_LIB_METRICS_ROLLUP_H

#include <stddef.h>

/* Write run_dir/metrics/summary.csv from run_dir/logs/rank-*.metrics.jsonl.
 * Returns the number of rows, or -1 with a message. *skipped (if not NULL)
 * gets the number of lines left out. */
long metrics_rollup(const char *run_dir, long *skipped, char *err, size_t errlen);

#endif
