/*
 * launcher/bench/bench_report.c - `stork bench report`: how long `stork report`
 * takes on a long run.
 *
 * It writes a run directory of the size asked for (default 10,000 steps of
 * 8 ranks, two attempts), with every metric storkd logs per step in its
 * format (the loss on rank 0 falling, step and compute times with noise,
 * a validation every 100 steps, a checkpoint every 1,000), then times
 * loading it and writing the HTML page, and loading it alone (what --text
 * needs), and prints the medians.
 */
#include "config.h"
#include "launcher/bench/bench_util.h"
#include "launcher/commands.h"
#include "launcher/report/report.h"

#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/formats/stork_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct bench_report_opts {
	long steps;
	int ranks, repeat;
	const char *dir;
};

static int parse(int argc, char **argv, struct bench_report_opts *o)
{
	*o = (struct bench_report_opts){ .steps = 10000, .ranks = 8, .repeat = 5 };
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		long v = 0;

		if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			o->dir = argv[++i];
			continue;
		}
		if (i + 1 >= argc)
			return -1;
		errno = 0;
		v = strtol(argv[i + 1], &end, 10);
		if (errno || *end || v < 1)
			return -1;
		if (!strcmp(argv[i], "--steps"))
			o->steps = v;
		else if (!strcmp(argv[i], "--ranks") && v <= 1024)
			o->ranks = (int)v;
		else if (!strcmp(argv[i], "--repeat") && v <= 100)
			o->repeat = (int)v;
		else
			return -1;
		i++;
	}
	return 0;
}

static void metric(FILE *f, int rank, long step, int requeue, const char *name, double value,
		   const char *unit)
{
	json_t *v = json_pack("{s:f, s:s, s:i, s:s, s:I, s:s, s:o, s:s, s:i, s:i}", "ts", 1.8e9 + step * 0.1,
			      "job_id", "bench", "rank", rank, "host", "n1", "step", (json_int_t)step,
			      "metric", name, "value", sj_number(value), "unit", unit, "requeue",
			      requeue, "attempt", 0);
	char *text = v ? sj_compact(v) : NULL;

	if (text)
		fprintf(f, "%s\n", text);
	free(text);
	json_decref(v);
}

/* Deterministic noise in [0, 1). */
static double noise(unsigned long long *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*s >> 11) / 9007199254740992.0;
}

/* One rank's metrics: two attempts, the second from the middle checkpoint. */
static int write_rank(const char *dir, int rank, long steps, size_t *lines)
{
	char path[4200], name[64];
	unsigned long long seed = 1234 + (unsigned long long)rank;
	long resume = steps / 2 / 1000 * 1000;
	FILE *f;

	snprintf(name, sizeof name, "logs/rank-%03d.metrics.jsonl", rank);
	if (path_join(path, sizeof path, dir, name) < 0 || !(f = fopen(path, "w")))
		return -1;
	for (long s = 1; s <= steps; s++) {
		int requeue = s > resume && resume > 0;
		double ms = 100 + 10 * noise(&seed), loss = 5.0 / (1.0 + s / 2000.0) + 0.1 * noise(&seed);

		if (rank == 0 && (s == 1 || s % 100 == 0))
			metric(f, rank, s, requeue, "val_loss", loss + 0.05, "nats");
		metric(f, rank, s, requeue, "train_loss", loss, "nats");
		metric(f, rank, s, requeue, "lr", 6e-4, "");
		metric(f, rank, s, requeue, "grad_norm", 1 + noise(&seed), "");
		metric(f, rank, s, requeue, "step_time_ms", ms, "ms");
		metric(f, rank, s, requeue, "compute_ms", ms * 0.8, "ms");
		metric(f, rank, s, requeue, "tokens_per_sec", 8 * 16 * 1024 / (ms / 1e3), "tokens/s");
		metric(f, rank, s, requeue, "net_bytes_sent", 1e6, "bytes");
		*lines += 7;
		if (rank == 0) {
			metric(f, rank, s, requeue, "eta_s", (steps - s) * ms / 1e3, "s");
			(*lines)++;
			if (s % 1000 == 0) {
				metric(f, rank, s, requeue, "checkpoint_s", 1.5 + noise(&seed), "s");
				(*lines)++;
			}
		}
	}
	return fclose(f) == 0 ? 0 : -1;
}

static int write_run(const char *dir, const struct bench_report_opts *o, size_t *lines)
{
	char path[4200];

	if (path_join(path, sizeof path, dir, "logs") < 0 || mkdir(path, 0755) < 0 ||
	    path_join(path, sizeof path, dir, "config") < 0 || mkdir(path, 0755) < 0)
		return -1;
	for (int r = 0; r < o->ranks; r++)
		if (write_rank(dir, r, o->steps, lines) < 0)
			return -1;
	return 0;
}

int cmd_bench_report(int argc, char **argv)
{
	struct bench_report_opts o;
	char tmp[] = "/tmp/stork-bench-report.XXXXXX", out[4200];
	double *html_s, *load_s;
	size_t lines = 0;
	struct stat st;
	const char *dir;
	int rc = STORK_EXIT_OK;

	if (parse(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: stork bench report [--steps N] [--ranks R] [--repeat K] [--dir DIR]\n");
		return STORK_EXIT_USAGE;
	}
	dir = o.dir ? o.dir : mkdtemp(tmp);
	if (!dir || (o.dir && mkdir(dir, 0755) < 0)) {
		stork_error("cannot make the run directory %s: %s", o.dir ? o.dir : tmp, strerror(errno));
		return STORK_EXIT_USAGE;
	}
	html_s = calloc((size_t)o.repeat, sizeof *html_s);
	load_s = calloc((size_t)o.repeat, sizeof *load_s);
	if (!html_s || !load_s || write_run(dir, &o, &lines) < 0 ||
	    path_join(out, sizeof out, dir, "report.html") < 0) {
		stork_error("cannot write the run directory %s: %s", dir, strerror(errno));
		rc = STORK_EXIT_INTERNAL;
		goto out;
	}
	printf("run: %ld steps x %d ranks, %zu metric lines, in %s\n", o.steps, o.ranks, lines, dir);
	for (int k = 0; k < o.repeat && rc == STORK_EXIT_OK; k++) {
		struct run_report rep;
		double t0 = clock_monotonic(), t1;
		FILE *f;

		if (report_load(dir, &rep) < 0 || !(f = fopen(out, "w"))) {
			report_free(&rep);
			rc = STORK_EXIT_INTERNAL;
			break;
		}
		t1 = clock_monotonic();
		if (report_write_html(&rep, f) < 0)
			rc = STORK_EXIT_INTERNAL;
		if (fclose(f) != 0)
			rc = STORK_EXIT_INTERNAL;
		html_s[k] = clock_monotonic() - t0;
		load_s[k] = t1 - t0;
		report_free(&rep);
	}
	if (rc != STORK_EXIT_OK) {
		stork_error("the report of %s failed: %s", dir, strerror(errno));
		goto out;
	}
	stat(out, &st);
	printf("%-28s %10s\n", "median of", "seconds");
	printf("%-28s %10.3f\n", "read the run (--text)", bench_median(load_s, o.repeat));
	printf("%-28s %10.3f\n", "read + write report.html", bench_median(html_s, o.repeat));
	printf("report.html: %.1f MB\n", st.st_size / 1e6);
out:
	free(html_s);
	free(load_s);
	return rc;
}
