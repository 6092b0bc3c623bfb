/* daemon/node/prometheus.c - see prometheus.h. */
#include "config.h"
#include "daemon/node/prometheus.h"

#include "daemon/engine/train/train.h"
#include "lib/clock.h"
#include "lib/io/atomic_file.h"
#include "lib/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void prometheus_init(struct prometheus *p, const char *dir, const struct train_node *node)
{
	memset(p, 0, sizeof *p);
	if (dir && dir[0] &&
	    snprintf(p->path, sizeof p->path, "%s/stork_%s_%s_%ld.prom", dir, node->job_id,
		     node->host, (long)getpid()) >= (int)sizeof p->path)
		p->path[0] = '\0';
}

/* A label's value as the text format wants it: \, " and newline escaped. */
static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *c = value; *c; c++) {
		if (*c == '\\' || *c == '"')
			fprintf(f, "\\%c", *c);
		else if (*c == '\n')
			fputs("\\n", f);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

struct series {
	const char *name, *help;
	double (*value)(const struct rank_progress *p);
	int rank0;                 /* only rank 0 has it */
};

static double step_of(const struct rank_progress *p) { return (double)atomic_load(&p->step); }
static double loss_of(const struct rank_progress *p) { return atomic_load(&p->loss); }
static double secs_of(const struct rank_progress *p) { return atomic_load(&p->step_ms) / 1e3; }
static double tps_of(const struct rank_progress *p) { return atomic_load(&p->tokens_per_s); }
static double mfu_of(const struct rank_progress *p) { return atomic_load(&p->mfu); }
static double wait_of(const struct rank_progress *p) { return atomic_load(&p->data_wait_ms) / 1e3; }
static double bytes_of(const struct rank_progress *p) { return atomic_load(&p->rank_bytes); }
static double gpu_util_of(const struct rank_progress *p) { return atomic_load(&p->gpu_util) / 100; }
static double gpu_mem_of(const struct rank_progress *p) { return atomic_load(&p->gpu_mem); }

static const struct series rank_series[] = {
	{ "stork_step", "Steps the rank completed.", step_of, 0 },
	{ "stork_train_loss", "The last step's training loss (nats).", loss_of, 0 },
	{ "stork_step_seconds", "The last step's wall time.", secs_of, 0 },
	{ "stork_tokens_per_second", "The whole run's tokens per second at the last step.", tps_of, 0 },
	{ "stork_mfu_ratio", "Model FLOP utilisation of the run at the last step (stork(1)).", mfu_of, 1 },
	{ "stork_data_wait_seconds", "The time the last step waited for its batch.", wait_of, 0 },
	{ "stork_rank_memory_bytes", "The memory the rank holds: parameters, gradients, moments, activations.",
	  bytes_of, 0 },
	{ "stork_gpu_utilisation_ratio", "The rank's GPU's utilisation at the last sample (NVML).",
	  gpu_util_of, 0 },
	{ "stork_gpu_memory_used_bytes", "The rank's GPU's memory used at the last sample (NVML).",
	  gpu_mem_of, 0 },
};

static void common_labels(FILE *f, const struct train_node *node, const char *run)
{
	put_label(f, "job", node->job_id);
	fputc(',', f);
	put_label(f, "run", run);
	fputc(',', f);
	put_label(f, "host", node->host);
}

static void write_series(FILE *f, const struct series *s, const struct train_node *node,
			 const char *run, int started)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", s->name, s->help, s->name);
	for (int i = 0; i < started; i++) {
		const struct rank_progress *p = &node->progress[i];
		int rank = node->rank_base + i;
		char r[16];
		double v;

		if (atomic_load(&p->done) || atomic_load(&p->step) <= 0 || (s->rank0 && rank != 0))
			continue;
		v = s->value(p);
		if (!isfinite(v))
			continue;
		snprintf(r, sizeof r, "%d", rank);
		fprintf(f, "%s{", s->name);
		common_labels(f, node, run);
		fputc(',', f);
		put_label(f, "rank", r);
		fprintf(f, "} %.17g\n", v);
	}
}

void prometheus_write(struct prometheus *p, const struct train_node *node, const char *run,
		      int started)
{
	char *text = NULL, err[512];
	size_t len = 0;
	FILE *f;
	double rss = started > 0 ? atomic_load(&node->progress[0].rss) : -1;

	if (!p->path[0] || !(f = open_memstream(&text, &len)))
		return;
	for (size_t i = 0; i < sizeof rank_series / sizeof rank_series[0]; i++)
		write_series(f, &rank_series[i], node, run, started);
	if (rss > 0) {
		fputs("# HELP stork_daemon_resident_bytes storkd's resident memory (every engine rank "
		      "of the node lives in it).\n# TYPE stork_daemon_resident_bytes gauge\n"
		      "stork_daemon_resident_bytes{", f);
		common_labels(f, node, run);
		fprintf(f, "} %.17g\n", rss);
	}
	fputs("# HELP stork_sample_timestamp_seconds When these figures were sampled.\n"
	      "# TYPE stork_sample_timestamp_seconds gauge\nstork_sample_timestamp_seconds{", f);
	common_labels(f, node, run);
	fprintf(f, "} %.3f\n", clock_wall());
	if (fclose(f) == 0 &&
	    atomic_write_file_mode(p->path, text, len, 0644, err, sizeof err) < 0 && !p->warned) {
		stork_warn("metrics.prometheus_dir: %s (the run goes on without it)", err);
		p->warned = 1;
	}
	free(text);
}

void prometheus_end(struct prometheus *p)
{
	if (p->path[0])
		unlink(p->path);
}
