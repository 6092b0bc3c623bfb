/*
 * t/fuzz/fuzz_metrics.c - the metrics files of a run as `stork report`
 * reads them (launcher/report/report_data.c over lib/run/metrics_file.c) and draws
 * them (launcher/report/report_html.c), and as the launcher finds a rank's last
 * step (metrics_file_last_step).
 *
 * The input is logs/rank-000.metrics.jsonl of a run directory; after a
 * form feed, if there is one, the rest is rank-001's (so that a two-rank
 * run and its stragglers are reached too).
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "launcher/report/report.h"
#include "lib/run/metrics_file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	const uint8_t *ff = memchr(data, '\f', size);
	size_t n0 = ff ? (size_t)(ff - data) : size;
	char path[PATH_MAX], rank1[PATH_MAX];
	struct run_report rep;

	fuzz_quiet();
	if (!null && !(null = fopen("/dev/null", "w")))
		abort();
	fuzz_write(rank1, sizeof rank1, "run/logs/rank-001.metrics.jsonl", ff ? ff + 1 : data,
		   ff ? size - n0 - 1 : 0);
	fuzz_write(path, sizeof path, "run/logs/rank-000.metrics.jsonl", data, n0);
	metrics_file_last_step(path);
	*strstr(path, "/logs/") = '\0';
	if (report_load(path, &rep) == 0)
		report_write_html(&rep, null);
	report_free(&rep);
	return 0;
}
