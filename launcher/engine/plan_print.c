/*
 * launcher/engine/plan_print.c - the lines stork plan and its --check print
 * (plan.h): the figures and where they came from, and the table of
 * layouts.
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include <stdio.h>

/* "1.5 GiB", "12.0 MiB", "0 B" */
const char *plan_bytes_text(double b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
	return buf;
}

void plan_print_header(FILE *out)
{
	fprintf(out, "%4s %4s %3s %3s %4s %-9s %9s %11s %7s %10s %10s %10s %10s\n", "#", "dp", "tp",
		"pp", "zero", "recompute", "B x m", "memory/rank", "bubble", "in node", "between",
		"step (ms)", "tokens/s");
}

void plan_print_line(FILE *out, int k, const struct cost_layout *l, const struct cost_estimate *e)
{
	char mem[32], intra[32], inter[32], bm[32];

	snprintf(bm, sizeof bm, "%d x %d", l->B, l->micro);
	fprintf(out, "%4d %4d %3d %3d %4d %-9s %9s %11s %6.1f%% %10s %10s %10.2f %10.0f\n", k, l->dp,
		l->tp, l->pp, l->zero, gpt2_recompute_name(l->recompute), bm,
		plan_bytes_text(e->mem_bytes, mem, sizeof mem), 100.0 * e->bubble,
		plan_bytes_text(e->intra_bytes, intra, sizeof intra),
		plan_bytes_text(e->inter_bytes, inter, sizeof inter), 1e3 * e->step_s, e->tokens_per_s);
}

void plan_print_figures(FILE *out, const struct plan_figures *f, const struct cost_machine *x)
{
	fprintf(out, "compute: %.2f GFLOP/s per %s, AdamW %.2f ns per parameter: %s\n",
		f->flops_per_s / 1e9, x->gpu ? "GPU" : "thread", f->update_s_per_param * 1e9,
		f->compute_from);
	fprintf(out, "in node: %.1f us + %.2f GB/s: %s\n", f->intra.latency_s * 1e6,
		f->intra.bytes_per_s / 1e9, f->intra_from);
	fprintf(out, "between nodes: %.1f us + %.2f GB/s: %s\n", f->inter.latency_s * 1e6,
		f->inter.bytes_per_s / 1e9, f->inter_from);
}
