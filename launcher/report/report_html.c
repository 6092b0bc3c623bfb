/*
 * launcher/report/report_html.c - the run's report as one self-contained HTML
 * page: inline SVG charts and CSS, no script and nothing fetched, so it
 * opens the same from a login node, a laptop or a mail attachment.
 *
 * Charts are drawn in data coordinates mapped onto a fixed plot box. Each
 * curve is one <polyline> with a point per value (the loss: one per step
 * per attempt, so a redone step shows twice, in the colour of each
 * attempt), and carries class and data- attributes naming what it is, so
 * the page can be checked by a program as well as read.
 */
#include "config.h"
#include "launcher/report/report.h"

#include "lib/formats/stork_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_W 760
#define PLOT_H 260
#define MARGIN_L 70
#define MARGIN_R 20
#define MARGIN_T 30
#define MARGIN_B 45

/* Colours of attempts and ranks, in turn. */
static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
				       "#8c564b", "#e377c2", "#17becf", "#7f7f7f" };
#define COLOUR(i) palette[(size_t)(i) % (sizeof palette / sizeof *palette)]

static void put_escaped(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

static const char *json_text(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : dflt;
}

/* A chart's data ranges, their tick steps, and their mapping onto the plot box. */
struct chart {
	double x0, x1, y0, y1;
	double xstep, ystep;            /* between ticks: 1, 2 or 5 x a power of ten */
	int bytes;                      /* the y axis counts bytes: ticks in kB, MB, GB */
};

/* A round tick step for range, at most about 6 ticks: 1, 2 or 5 x 10^k. */
static double tick_step(double range)
{
	double raw = range / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;

	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* Decimals that print every multiple of step exactly (0 for whole steps). */
static int tick_decimals(double step)
{
	int d = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);

	return d > 6 ? 6 : d;
}

static double px(const struct chart *c, double x)
{
	return MARGIN_L + (x - c->x0) / (c->x1 - c->x0) * PLOT_W;
}

static double py(const struct chart *c, double y)
{
	return MARGIN_T + PLOT_H - (y - c->y0) / (c->y1 - c->y0) * PLOT_H;
}

static void widen(struct chart *c, const struct series *s)
{
	for (size_t i = 0; i < s->n; i++) {
		if (!isfinite(s->v[i]))
			continue;
		c->x0 = fmin(c->x0, (double)s->step[i]);
		c->x1 = fmax(c->x1, (double)s->step[i]);
		c->y0 = fmin(c->y0, s->v[i]);
		c->y1 = fmax(c->y1, s->v[i]);
	}
}

static void chart_empty(struct chart *c)
{
	*c = (struct chart){ INFINITY, -INFINITY, INFINITY, -INFINITY, 1, 1, 0 };
}

/* Pad the ranges so that curves do not touch the frame; a flat or empty
 * series still gets a range. */
static void chart_finish(struct chart *c, int from_zero)
{
	double pad;

	if (!isfinite(c->x0)) {
		c->x0 = 0;
		c->x1 = 1;
		c->y0 = 0;
		c->y1 = 1;
	}
	if (c->x1 <= c->x0)
		c->x1 = c->x0 + 1;
	if (from_zero && c->y0 > 0)
		c->y0 = 0;
	if (c->y1 <= c->y0)
		c->y1 = c->y0 + (fabs(c->y0) > 0 ? fabs(c->y0) * 0.1 : 1);
	pad = (c->y1 - c->y0) * 0.05;
	c->y1 += pad;
	if (!from_zero)
		c->y0 -= pad;
	/* the ranges end on round ticks, which read as numbers (5.5, not 5.698) */
	c->ystep = tick_step(c->y1 - c->y0);
	c->y0 = floor(c->y0 / c->ystep) * c->ystep;
	c->y1 = ceil(c->y1 / c->ystep) * c->ystep;
	c->xstep = tick_step(c->x1 - c->x0);
	if (c->xstep < 1)
		c->xstep = 1; /* steps are whole */
	c->x0 = floor(c->x0 / c->xstep) * c->xstep;
	c->x1 = ceil(c->x1 / c->xstep) * c->xstep;
}

/* A y tick's label: the number, or a byte count in the largest unit that keeps it >= 1 (80 MB). */
static void y_tick(const struct chart *c, double y, char *buf, size_t len)
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	int u = 0;
	double scale = 1;

	if (!c->bytes) {
		snprintf(buf, len, "%.*f", tick_decimals(c->ystep), y);
		return;
	}
	while (u < 4 && fmax(fabs(c->y0), fabs(c->y1)) >= scale * 1000) {
		scale *= 1000;
		u++;
	}
	snprintf(buf, len, "%.*f %s", tick_decimals(c->ystep / scale), y / scale, units[u]);
}

static void chart_begin(FILE *f, const struct chart *c, const char *id, const char *xlabel,
			const char *ylabel)
{
	int w = MARGIN_L + PLOT_W + MARGIN_R, h = MARGIN_T + PLOT_H + MARGIN_B;

	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"%s\" width=\"%d\" height=\"%d\" "
		   "viewBox=\"0 0 %d %d\" role=\"img\">\n", id, w, h, w, h);
	fprintf(f, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", MARGIN_L,
		MARGIN_T, PLOT_W, PLOT_H);
	for (int i = 0; c->y0 + i * c->ystep <= c->y1 + c->ystep * 1e-6; i++) {
		double y = c->y0 + i * c->ystep;

		char tick[32];

		y_tick(c, y, tick, sizeof tick);
		fprintf(f, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
			   "<text class=\"tick y-tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s"
			   "</text>\n", MARGIN_L, MARGIN_L + PLOT_W, py(c, y), py(c, y), MARGIN_L - 6,
			py(c, y) + 4, tick);
	}
	for (int i = 0; c->x0 + i * c->xstep <= c->x1 + c->xstep * 1e-6; i++) {
		double x = c->x0 + i * c->xstep;

		fprintf(f, "<text class=\"tick x-tick\" x=\"%.1f\" y=\"%d\" "
			   "text-anchor=\"middle\">%.0f</text>\n", px(c, x), MARGIN_T + PLOT_H + 16, x);
	}
	fprintf(f, "<text class=\"label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
		MARGIN_L + PLOT_W / 2, MARGIN_T + PLOT_H + 36, xlabel);
	fprintf(f, "<text class=\"label\" x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
		   "text-anchor=\"middle\">%s</text>\n", MARGIN_T + PLOT_H / 2, MARGIN_T + PLOT_H / 2,
		ylabel);
}

/* One curve, its points kept inside the box (a value off the chart on its edge); attrs
 * are its class and data- attributes, already escaped. */
static void chart_curve(FILE *f, const struct chart *c, const struct series *s, const char *attrs,
			const char *colour, const char *title)
{
	if (!s->n)
		return;
	fprintf(f, "<polyline %s fill=\"none\" stroke=\"%s\" points=\"", attrs, colour);
	for (size_t i = 0; i < s->n; i++)
		fprintf(f, "%s%.1f,%.1f", i ? " " : "", px(c, (double)s->step[i]),
			isfinite(s->v[i]) ? py(c, fmin(fmax(s->v[i], c->y0), c->y1)) : py(c, c->y1));
	fprintf(f, "\"><title>");
	put_escaped(f, title);
	fprintf(f, "</title></polyline>\n");
}

static void chart_end(FILE *f)
{
	fprintf(f, "</svg>\n");
}

/* ---- the sections ---- */

/* Text of lines as a list of class cls, a line an item; nothing when "". */
static void lines_list(FILE *f, const char *cls, const char *lines)
{
	char *copy, *save = NULL;

	if (!lines[0] || !(copy = strdup(lines)))
		return;
	fprintf(f, "<ul class=\"%s\">\n", cls);
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		fprintf(f, "<li>");
		put_escaped(f, l);
		fprintf(f, "</li>\n");
	}
	fprintf(f, "</ul>\n");
	free(copy);
}

/* What the preflight did (report_data.c: read_preflight), a list item each. */
static void section_preflight(FILE *f, const struct run_report *rep)
{
	if (!rep->preflight[0])
		return;
	fprintf(f, "<p>Preflight:</p>\n");
	lines_list(f, "preflight", rep->preflight);
}

static void section_outcome(FILE *f, const struct run_report *rep)
{
	const json_t *e = rep->exit_info, *ff = json_object_get(e, "first_failure");
	const json_t *restarts = json_object_get(e, "restarts"), *r;
	size_t i;

	fprintf(f, "<section id=\"outcome\"><h2>Outcome</h2>\n");
	if (!e) {
		fprintf(f, "<p class=\"reason\">No exit_info.json: the run is still going, or its "
			   "launcher was killed before writing it.</p></section>\n");
		return;
	}
	fprintf(f, "<p class=\"reason\"><b>");
	put_escaped(f, json_text(e, "reason", "?"));
	fprintf(f, "</b> (exit %lld): ", (long long)sj_int(e, "exit_code", -1));
	put_escaped(f, json_text(e, "message", ""));
	if (report_oom_advice(rep)) {
		fprintf(f, "</p>\n<p class=\"oom\"><b>Out of memory.</b> To fit: ");
		put_escaped(f, report_oom_advice(rep));
	}
	fprintf(f, "</p>\n<p class=\"first-failure\">First failure: ");
	if (json_is_object(ff)) {
		const json_t *rank = json_object_get(ff, "rank");

		if (json_is_integer(rank))
			fprintf(f, "rank %lld", (long long)json_integer_value(rank));
		else
			fprintf(f, "the daemon");
		fprintf(f, " on ");
		put_escaped(f, json_text(ff, "host", "?"));
		if (json_string_value(json_object_get(ff, "signal"))) {
			fprintf(f, ", killed by ");
			put_escaped(f, json_text(ff, "signal", ""));
		} else {
			fprintf(f, ", exit %lld", (long long)sj_int(ff, "exit_code", -1));
		}
		fprintf(f, " after step %lld at ", (long long)sj_int(ff, "last_step", -1));
		put_escaped(f, json_text(ff, "time", "?"));
		fprintf(f, "%s: ", json_is_true(json_object_get(ff, "secondary")) ?
					   " (in consequence of another)" : "");
		put_escaped(f, json_text(ff, "what", ""));
	} else {
		fprintf(f, "none");
	}
	fprintf(f, "</p>\n<p>Requeues: %lld. Restarts inside the allocation: %zu.</p>\n",
		(long long)sj_int(e, "restart_count", 0), json_array_size(restarts));
	lines_list(f, "requeues", rep->requeues);
	if (json_array_size(restarts)) {
		fprintf(f, "<ul class=\"restarts\">\n");
		json_array_foreach(restarts, i, r) {
			fprintf(f, "<li>after attempt %lld: ", (long long)sj_int(r, "attempt", -1));
			put_escaped(f, json_text(r, "reason", "?"));
			fprintf(f, ": ");
			put_escaped(f, json_text(r, "message", ""));
			fprintf(f, "</li>\n");
		}
		fprintf(f, "</ul>\n");
	}
	section_preflight(f, rep);
	fprintf(f, "</section>\n");
}

static void attempt_name(char *buf, size_t len, const struct report_attempt *a, int i)
{
	if (a->requeue < 0)
		snprintf(buf, len, "attempt %d", i + 1);
	else
		snprintf(buf, len, "requeue %d, attempt %d", a->requeue, a->attempt);
}

/*
 * A marker where each attempt but the last stopped, at its last trained
 * step: a dashed line and its number, on one of three rows in turn so that
 * close stops do not write over each other, kept inside the plot box; the
 * numbers' reasons are listed under the chart (stop_list).
 */
static void stop_markers(FILE *f, const struct run_report *rep, const struct chart *c)
{
	for (int i = 0, k = 0; i + 1 < rep->nattempts; i++) {
		const struct report_attempt *a = &rep->attempts[i];
		long step = report_stop_step(a);
		double x, tx;

		if (step < 0)
			continue;
		x = px(c, (double)step);
		tx = fmin(fmax(x, MARGIN_L + 8.0), MARGIN_L + PLOT_W - 8.0);
		k++;
		fprintf(f, "<g class=\"restart-marker\" data-step=\"%ld\" data-n=\"%d\"><line x1=\"%.1f\" "
			   "x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
			   "text-anchor=\"middle\">%d</text><title>", step, k, x, x, MARGIN_T,
			MARGIN_T + PLOT_H, tx, MARGIN_T + 12 + 12 * ((k - 1) % 3), k);
		put_escaped(f, report_stop_reason(a));
		fprintf(f, " at step %ld: ", step);
		put_escaped(f, a->message);
		fprintf(f, "</title></g>\n");
	}
}

/* The stops the markers number, one line each: step, reason, message. */
static void stop_list(FILE *f, const struct run_report *rep)
{
	int k = 0;

	for (int i = 0; i + 1 < rep->nattempts; i++) {
		const struct report_attempt *a = &rep->attempts[i];
		long step = report_stop_step(a);

		if (step < 0)
			continue;
		if (!k++)
			fprintf(f, "<ol class=\"stops\">\n");
		fprintf(f, "<li data-step=\"%ld\">step %ld: <b>", step, step);
		put_escaped(f, report_stop_reason(a));
		fprintf(f, "</b>%s", a->message[0] ? ": " : "");
		put_escaped(f, a->message);
		fprintf(f, "</li>\n");
	}
	if (k)
		fprintf(f, "</ol>\n");
}

/* The train loss's range without the steps that spiked: one spike would flatten the curve. */
static void widen_unspiked(struct chart *c, const struct run_report *rep, const struct series *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct series one = { .v = &s->v[i], .step = &s->step[i], .n = 1 };

		if (!report_spike_at(rep, s->step[i]))
			widen(c, &one);
	}
}

/*
 * A marker at each loss spike: a triangle pointing down at its loss (at
 * the top edge when off the chart), its action's colour, a title with its
 * figures.
 */
static void spike_markers(FILE *f, const struct run_report *rep, const struct chart *c)
{
	for (int i = 0; i < rep->nspikes; i++) {
		const struct report_spike *sp = &rep->spikes[i];
		double x = px(c, (double)sp->step);
		double tip = py(c, isfinite(sp->loss) ? fmin(fmax(sp->loss, c->y0), c->y1) : c->y1);

		tip = fmax(tip, MARGIN_T + 9.0); /* the whole triangle inside the box */
		fprintf(f, "<g class=\"spike-marker ");
		put_escaped(f, sp->action);
		fprintf(f, "\" data-step=\"%ld\" data-action=\"", sp->step);
		put_escaped(f, sp->action);
		fprintf(f, "\"><polyline points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\"/><title>loss "
			   "spike at step %ld: loss %.4g (z %.1f), grad norm %.4g (z %.1f); ", x - 5,
			tip - 9, x + 5, tip - 9, x, tip, x - 5, tip - 9, sp->step, sp->loss, sp->loss_z,
			sp->norm, sp->norm_z);
		put_escaped(f, sp->action);
		fprintf(f, "</title></g>\n");
	}
}

/*
 * restart.in_place: a marker where each node was lost while the others
 * went on, at the step they went on from (a dotted line), its title the
 * node, why and what it cost; listed under the chart (member_list).
 */
static void member_markers(FILE *f, const struct run_report *rep, const struct chart *c)
{
	for (int i = 0; i < rep->nmembers; i++) {
		const struct report_member *m = &rep->members[i];
		double x = px(c, (double)m->step);

		fprintf(f, "<g class=\"member-marker\" data-step=\"%ld\"><line x1=\"%.1f\" x2=\"%.1f\" "
			   "y1=\"%d\" y2=\"%d\"/><title>", m->step, x, x, MARGIN_T, MARGIN_T + PLOT_H);
		put_escaped(f, m->lost);
		if (m->joined) {
			fprintf(f, " back at step %ld; %d ranks went on</title></g>\n", m->step,
				m->ranks);
			continue;
		}
		fprintf(f, " lost after step %ld: ", m->step);
		put_escaped(f, m->why);
		fprintf(f, "; %d ranks went on; the failure cost %.2f s</title></g>\n", m->ranks,
			m->lost_s);
	}
}

static void member_list(FILE *f, const struct run_report *rep)
{
	if (!rep->nmembers)
		return;
	fprintf(f, "<ul class=\"members\">\n");
	for (int i = 0; i < rep->nmembers; i++) {
		const struct report_member *m = &rep->members[i];

		fprintf(f, "<li data-step=\"%ld\">step %ld: <b>", m->step, m->step);
		put_escaped(f, m->lost);
		if (m->joined) {
			fprintf(f, " back</b> (restart.rejoin); %d ranks went on (regroup %.2f s)</li>\n",
				m->ranks, m->seconds);
			continue;
		}
		fprintf(f, " lost</b> (");
		put_escaped(f, m->why);
		fprintf(f, ")%s", m->by[0] ? "; in its place: " : "");
		put_escaped(f, m->by);
		fprintf(f, "; %d ranks went on; the failure cost %.2f s (regroup %.2f s)</li>\n",
			m->ranks, m->lost_s, m->seconds);
	}
	fprintf(f, "</ul>\n");
}

/* The loss spikes, a row each, under the loss chart. */
static void spike_table(FILE *f, const struct run_report *rep)
{
	if (!rep->nspikes)
		return;
	fprintf(f, "<h3>Loss spikes (train.on_spike)</h3>\n<table class=\"spikes\"><tr><th>step</th>"
		   "<th>action</th><th>loss</th><th>loss z</th><th>grad norm</th><th>grad norm z</th>"
		   "</tr>\n");
	for (int i = 0; i < rep->nspikes; i++) {
		const struct report_spike *sp = &rep->spikes[i];

		fprintf(f, "<tr class=\"spike\" data-step=\"%ld\"><td>%ld</td><td>", sp->step, sp->step);
		put_escaped(f, sp->action);
		fprintf(f, "</td><td>%.4g</td><td>%.1f</td><td>%.4g</td><td>%.1f</td></tr>\n", sp->loss,
			sp->loss_z, sp->norm, sp->norm_z);
	}
	fprintf(f, "</table>\n");
}

/*
 * Loss against step, one curve per attempt (train solid, validation
 * dashed), a numbered marker where each attempt but the last stopped (its
 * last trained step, the reason node 0 recorded for it or the rollback,
 * listed below), and a triangle at each loss spike (a table below). The
 * range leaves the spikes out; a spike's point sits on the top edge.
 */
/* What a figure the run did not log is called. */
static const char *not_logged(const struct run_report *rep)
{
	return rep->program ? "not reported by the program" : "none logged";
}

static void section_loss(FILE *f, const struct run_report *rep)
{
	struct chart c;

	fprintf(f, "<section id=\"loss\"><h2>Loss</h2>\n");
	if (!rep->train_loss.n && !rep->val_loss.n) {
		fprintf(f, "<p class=\"not-reported\" id=\"loss-chart\">Loss: %s.</p>\n",
			not_logged(rep));
		stop_list(f, rep);
		fprintf(f, "</section>\n");
		return;
	}
	chart_empty(&c);
	for (int i = 0; i < rep->nattempts; i++) {
		widen_unspiked(&c, rep, &rep->attempts[i].train_loss);
		widen(&c, &rep->attempts[i].val_loss);
	}
	chart_finish(&c, 0);
	chart_begin(f, &c, "loss-chart", "step", "loss (nats)");
	for (int i = 0; i < rep->nattempts; i++) {
		const struct report_attempt *a = &rep->attempts[i];
		char attrs[160], name[64], title[128];

		attempt_name(name, sizeof name, a, i);
		snprintf(attrs, sizeof attrs, "class=\"train-loss\" data-requeue=\"%d\" data-attempt=\"%d\"",
			 a->requeue, a->attempt);
		snprintf(title, sizeof title, "train loss, %s", name);
		chart_curve(f, &c, &a->train_loss, attrs, COLOUR(i), title);
		snprintf(attrs, sizeof attrs, "class=\"val-loss\" data-requeue=\"%d\" data-attempt=\"%d\" "
			 "stroke-dasharray=\"6 3\"", a->requeue, a->attempt);
		snprintf(title, sizeof title, "validation loss, %s", name);
		chart_curve(f, &c, &a->val_loss, attrs, COLOUR(i), title);
	}
	stop_markers(f, rep, &c);
	member_markers(f, rep, &c);
	spike_markers(f, rep, &c);
	chart_end(f);
	fprintf(f, "<p class=\"legend\">");
	for (int i = 0; i < rep->nattempts; i++) {
		char name[64];

		attempt_name(name, sizeof name, &rep->attempts[i], i);
		fprintf(f, "<span style=\"color:%s\">&#9632; %s: %zu steps", COLOUR(i), name,
			rep->attempts[i].train_loss.n);
		if (rep->attempts[i].ended[0]) {
			fprintf(f, ", ended ");
			put_escaped(f, rep->attempts[i].ended);
		}
		fprintf(f, "</span> ");
	}
	fprintf(f, "(solid: train, dashed: validation). Final train loss %.4f, last validation loss "
		   "%.4f.</p>\n", series_last(&rep->train_loss), series_last(&rep->val_loss));
	stop_list(f, rep);
	member_list(f, rep);
	spike_table(f, rep);
	fprintf(f, "</section>\n");
}

/* Which colour is which rank, under each per-rank chart. */
static void rank_legend(FILE *f, const struct run_report *rep)
{
	fprintf(f, "<p class=\"legend rank-legend\">");
	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];

		fprintf(f, "<span data-rank=\"%d\" style=\"color:%s\">&#9632; rank %d%s</span> ",
			rk->rank, rk->straggler ? "#d62728" : COLOUR(r), rk->rank,
			rk->straggler ? " (straggler)" : "");
	}
	fprintf(f, "</p>\n");
}

/* Whether any rank logged a value of the series pick chooses. */
static int any_rank_has(const struct run_report *rep,
			const struct series *(*pick)(const struct report_rank *))
{
	for (int r = 0; r < rep->nranks; r++)
		if (pick(&rep->ranks[r])->n)
			return 1;
	return 0;
}

/* One chart with a curve per rank of the series member picks; a note when none logged it. */
static void rank_chart(FILE *f, const struct run_report *rep, const char *id, const char *cls,
		       const char *ylabel, const struct series *(*pick)(const struct report_rank *))
{
	struct chart c;

	if (!any_rank_has(rep, pick)) {
		fprintf(f, "<p class=\"not-reported\" id=\"%s\">%s.</p>\n", id, not_logged(rep));
		return;
	}
	chart_empty(&c);
	c.bytes = !strcmp(ylabel, "bytes");
	for (int r = 0; r < rep->nranks; r++)
		widen(&c, pick(&rep->ranks[r]));
	chart_finish(&c, 1);
	chart_begin(f, &c, id, "step", ylabel);
	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];
		char attrs[128], title[64];

		snprintf(attrs, sizeof attrs, "class=\"%s%s\" data-rank=\"%d\"", cls,
			 rk->straggler ? " straggler" : "", rk->rank);
		snprintf(title, sizeof title, "rank %d%s", rk->rank, rk->straggler ? " (straggler)" : "");
		chart_curve(f, &c, pick(rk), attrs, rk->straggler ? "#d62728" : COLOUR(r), title);
	}
	chart_end(f);
	rank_legend(f, rep);
}

static const struct series *pick_step_ms(const struct report_rank *r)
{
	return &r->step_ms;
}

static const struct series *pick_compute_ms(const struct report_rank *r)
{
	return &r->compute_ms;
}

static const struct series *pick_tps(const struct report_rank *r)
{
	return &r->tps;
}

static const struct series *pick_pipe_wait(const struct report_rank *r)
{
	return &r->pipe_wait_ms;
}

static const struct series *pick_net_bytes(const struct report_rank *r)
{
	return &r->net_bytes;
}

static const struct series *pick_data_wait(const struct report_rank *r)
{
	return &r->data_wait_ms;
}

static const struct series *pick_rank_bytes(const struct report_rank *r)
{
	return &r->rank_bytes;
}

static const struct series *pick_rss(const struct report_rank *r)
{
	return &r->rss;
}

static const struct series *pick_mfu(const struct report_rank *r)
{
	return &r->mfu;
}

static const struct series *pick_cpu(const struct report_rank *r)
{
	return &r->cpu_pct;
}

static const struct series *pick_gpu_util(const struct report_rank *r)
{
	return &r->gpu_util;
}

static const struct series *pick_gpu_mem(const struct report_rank *r)
{
	return &r->gpu_mem;
}

/* A table cell of v, or "-" when the run logged none. */
static void put_figure(FILE *f, int decimals, double v)
{
	if (isfinite(v))
		fprintf(f, "<td>%.*f</td>", decimals, v);
	else
		fprintf(f, "<td>-</td>");
}

static void section_ranks(FILE *f, const struct run_report *rep)
{
	fprintf(f, "<section id=\"ranks\"><h2>Ranks</h2>\n<p class=\"stragglers\">");
	if (!isfinite(rep->median_compute_ms))
		fprintf(f, "Stragglers: not measured (compute time per rank: %s).", not_logged(rep));
	else if (!rep->stragglers)
		fprintf(f, "Stragglers: none (no rank's median compute time more than %.0f%% above "
			   "the median of all ranks, %.2f ms).", 100 * REPORT_STRAGGLER_MARGIN,
			rep->median_compute_ms);
	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];

		if (rk->straggler)
			fprintf(f, "<span class=\"straggler\">Straggler: rank %d, median compute %.2f ms, "
				   "%.0f%% above the median of all ranks (%.2f ms).</span> ", rk->rank,
				rk->median_compute_ms,
				100 * (rk->median_compute_ms / rep->median_compute_ms - 1),
				rep->median_compute_ms);
	}
	fprintf(f, "</p>\n<h3>Step time per rank</h3>\n");
	rank_chart(f, rep, "step-time-chart", "step-time", "step time (ms)", pick_step_ms);
	fprintf(f, "<h3>Compute time per rank (forward and backward, before the reduction)</h3>\n");
	rank_chart(f, rep, "compute-chart", "compute-time", "compute (ms)", pick_compute_ms);
	fprintf(f, "<h3>Tokens/s per rank</h3>\n");
	rank_chart(f, rep, "tps-chart", "tokens-per-sec", "tokens/s", pick_tps);
	if (any_rank_has(rep, pick_pipe_wait)) {
		fprintf(f, "<h3>Pipeline wait per rank (a stage waiting for its neighbours: the "
			   "bubble)</h3>\n");
		rank_chart(f, rep, "pipeline-wait-chart", "pipeline-wait", "wait (ms)", pick_pipe_wait);
	}
	if (any_rank_has(rep, pick_net_bytes)) {
		fprintf(f, "<h3>Bytes sent to other nodes per rank and step</h3>\n");
		rank_chart(f, rep, "net-bytes-chart", "net-bytes", "bytes", pick_net_bytes);
	}
	if (any_rank_has(rep, pick_mfu)) {
		fprintf(f, "<h3>Model FLOP utilisation (the run's model FLOPs per second over its "
			   "peak: stork(1), MFU)</h3>\n");
		rank_chart(f, rep, "mfu-chart", "mfu", "MFU", pick_mfu);
	}
	if (any_rank_has(rep, pick_data_wait)) {
		fprintf(f, "<h3>Data wait per rank (the time a step waited for its batch)</h3>\n");
		rank_chart(f, rep, "data-wait-chart", "data-wait", "wait (ms)", pick_data_wait);
	}
	if (any_rank_has(rep, pick_rss)) {
		fprintf(f, "<h3>Host memory: %s</h3>\n",
			rep->program ? "each rank's resident memory, its children with it" :
				       "storkd's resident memory (a node's first rank; every engine "
				       "rank of the node lives in it)");
		rank_chart(f, rep, "rss-chart", "host-rss", "bytes", pick_rss);
	}
	if (any_rank_has(rep, pick_cpu)) {
		fprintf(f, "<h3>CPU use per rank (its children with it; 100%% = one core)</h3>\n");
		rank_chart(f, rep, "cpu-chart", "cpu", "CPU (%)", pick_cpu);
	}
	if (any_rank_has(rep, pick_gpu_util)) {
		fprintf(f, "<h3>GPU utilisation per rank (NVML)</h3>\n");
		rank_chart(f, rep, "gpu-util-chart", "gpu-util", "utilisation (%)", pick_gpu_util);
	}
	if (any_rank_has(rep, pick_gpu_mem)) {
		fprintf(f, "<h3>GPU memory used per rank (NVML: the whole device's)</h3>\n");
		rank_chart(f, rep, "gpu-mem-chart", "gpu-mem", "bytes", pick_gpu_mem);
	}
	if (any_rank_has(rep, pick_rank_bytes)) {
		fprintf(f, "<h3>Memory each rank holds (parameters, gradients, moments, "
			   "activations)</h3>\n");
		rank_chart(f, rep, "rank-memory-chart", "rank-memory", "bytes", pick_rank_bytes);
	}
	fprintf(f, "<table class=\"ranks\"><tr><th>rank</th><th>median step ms</th><th>median "
		   "compute ms</th><th>median tokens/s</th><th>median pipeline wait ms</th>"
		   "<th>median bytes sent to other nodes</th><th>straggler</th></tr>\n");
	for (int r = 0; r < rep->nranks; r++) {
		const struct report_rank *rk = &rep->ranks[r];

		fprintf(f, "<tr><td>%d</td>", rk->rank);
		put_figure(f, 2, rk->median_step_ms);
		put_figure(f, 2, rk->median_compute_ms);
		put_figure(f, 0, rk->median_tps);
		if (rk->pipe_wait_ms.n)
			fprintf(f, "<td class=\"pipeline-wait\">%.2f</td>",
				series_median(&rk->pipe_wait_ms));
		else
			fprintf(f, "<td>-</td>");
		if (rk->net_bytes.n)
			fprintf(f, "<td class=\"net-bytes\">%.0f</td>", series_median(&rk->net_bytes));
		else
			fprintf(f, "<td>-</td>");
		fprintf(f, "<td>%s</td></tr>\n", rk->straggler ? "yes" : "no");
	}
	fprintf(f, "</table>\n</section>\n");
}

static void section_checkpoints(FILE *f, const struct run_report *rep)
{
	const struct series *s = &rep->checkpoint_s;
	struct chart c;

	fprintf(f, "<section id=\"checkpoints\"><h2>Checkpoints</h2>\n");
	if (rep->program) {
		fprintf(f, "<p>The program's own, in STORK_CHECKPOINT_DIR: ");
		if (rep->program_checkpoint[0]) {
			fprintf(f, "newest ");
			put_escaped(f, rep->program_checkpoint);
		} else {
			fprintf(f, "none saved");
		}
		fprintf(f, ".</p>\n</section>\n");
		return;
	}
	fprintf(f, "<p>Latest: ");
	put_escaped(f, rep->latest_checkpoint[0] ? rep->latest_checkpoint : "none");
	fprintf(f, ". Commits: %zu", s->n);
	if (s->n)
		fprintf(f, ", median %.3f s", series_median(s));
	if (rep->checkpoint_stall_ms.n)
		fprintf(f, "; <span class=\"checkpoint-stall\">training stalled a median %.1f ms "
			   "per checkpoint</span>", series_median(&rep->checkpoint_stall_ms));
	fprintf(f, ".</p>\n");
	if (s->n) {
		chart_empty(&c);
		widen(&c, s);
		c.x0 = 0;
		chart_finish(&c, 1);
		chart_begin(f, &c, "checkpoint-chart", "step", "commit (s)");
		for (size_t i = 0; i < s->n; i++)
			fprintf(f, "<rect class=\"checkpoint\" data-step=\"%ld\" x=\"%.1f\" y=\"%.1f\" "
				   "width=\"4\" height=\"%.1f\"><title>step %ld: %.3f s</title></rect>\n",
				s->step[i], px(&c, (double)s->step[i]) - 2, py(&c, s->v[i]),
				py(&c, c.y0) - py(&c, s->v[i]), s->step[i], s->v[i]);
		chart_end(f);
	}
	fprintf(f, "</section>\n");
}

static void section_layout(FILE *f, const struct run_report *rep)
{
	const json_t *env = rep->env, *par = json_object_get(env, "parallel"), *n;
	size_t i;

	fprintf(f, "<section id=\"layout\"><h2>Layout and binding</h2>\n");
	if (!env) {
		fprintf(f, "<p>No config/slurm_env.json.</p></section>\n");
		return;
	}
	fprintf(f, "<p>dp %lld &#215; tp %lld &#215; pp %lld%s%.0lld, %lld rank(s) on %zu node(s); "
		   "rendezvous ", (long long)sj_int(par, "dp", 1), (long long)sj_int(par, "tp", 1),
		(long long)sj_int(par, "pp", 1), sj_int(par, "zero", 0) ? " with ZeRO-" : "",
		(long long)sj_int(par, "zero", 0),
		(long long)sj_int(env, "world_size", 0), json_array_size(json_object_get(env, "nodes")));
	put_escaped(f, json_text(env, "rendezvous", "?"));
	fprintf(f, " (%.3f s).</p>\n<table class=\"layout\"><tr><th>node</th><th>host</th>"
		   "<th>rank</th><th>cpus</th><th>gpu</th><th>numa</th><th>threads</th></tr>\n",
		sj_real(env, "rendezvous_seconds", 0));
	json_array_foreach(json_object_get(env, "nodes"), i, n) {
		long long base = sj_int(n, "rank_base", 0);
		size_t k;
		json_t *b;

		json_array_foreach(json_object_get(n, "ranks"), k, b) {
			fprintf(f, "<tr><td>%zu</td><td>", i);
			put_escaped(f, json_text(n, "host", "?"));
			fprintf(f, "</td><td>%lld</td><td>", base + (long long)k);
			put_escaped(f, json_text(b, "cpus", "?"));
			fprintf(f, "</td><td>%lld</td><td>%lld</td><td>%lld</td></tr>\n",
				(long long)sj_int(b, "gpu", -1), (long long)sj_int(b, "numa", -1),
				(long long)sj_int(b, "threads", 1));
		}
	}
	fprintf(f, "</table>\n</section>\n");
}

/* sacct -P's table, or its comment line when accounting is off. */
/* Cell col of one sacct -P line (up to its newline), or "". */
static void sacct_cell(const char *line, int col, char *buf, size_t len)
{
	size_t end = strcspn(line, "\n");

	for (int c = 0; c < col; c++) {
		size_t cl = strcspn(line, "|\n");

		if (cl >= end) {
			buf[0] = '\0';
			return;
		}
		line += cl + 1;
		end -= cl + 1;
	}
	snprintf(buf, len, "%.*s", (int)strcspn(line, "|\n"), line);
}

/* The column of name in sacct's header line, or -1. */
static int sacct_column(const char *header, const char *name)
{
	char cell[64];

	for (int c = 0; c < 32; c++) {
		sacct_cell(header, c, cell, sizeof cell);
		if (!strcmp(cell, name))
			return c;
	}
	return -1;
}

/* sacct's memory figures ("10988K", "1.5G") in bytes; 0 when empty. */
static double sacct_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'K': return v * 1024;
	case 'M': return v * 1024 * 1024;
	case 'G': return v * 1024 * 1024 * 1024;
	case 'T': return v * 1024 * 1024 * 1024 * 1024;
	default: return v;
	}
}

/*
 * One sentence above the table: what the job asked for (its row's
 * AllocTRES and ReqMem), what it used (the largest MaxRSS of its steps)
 * and how long it ran.
 */
static void resources_summary(FILE *f, const char *text)
{
	int tres = sacct_column(text, "AllocTRES"), req = sacct_column(text, "ReqMem");
	int rss = sacct_column(text, "MaxRSS"), elapsed = sacct_column(text, "Elapsed");
	const char *job = strchr(text, '\n');
	char a[256] = "", m[64] = "", e[64] = "", best[64] = "", step[64] = "", cell[64];
	double peak = 0;

	if (!job || !job[1])
		return;
	job++;
	sacct_cell(job, tres, a, sizeof a);
	sacct_cell(job, req, m, sizeof m);
	sacct_cell(job, elapsed, e, sizeof e);
	for (const char *l = job; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		sacct_cell(l, rss, cell, sizeof cell);
		if (sacct_bytes(cell) > peak) {
			peak = sacct_bytes(cell);
			snprintf(best, sizeof best, "%s", cell);
			sacct_cell(l, 0, step, sizeof step);
		}
	}
	fprintf(f, "<p class=\"resources-summary\">Requested: ");
	put_escaped(f, a[0] ? a : "?");
	fprintf(f, ", memory ");
	put_escaped(f, m[0] ? m : "?");
	fprintf(f, ". Used: ");
	if (peak > 0) {
		fprintf(f, "a peak of %.1f MiB resident (", peak / (1024 * 1024));
		put_escaped(f, step);
		fprintf(f, ")");
	} else {
		fprintf(f, "no memory sample yet");
	}
	fprintf(f, ", for ");
	put_escaped(f, e[0] ? e : "?");
	fprintf(f, ".</p>\n");
}

static void section_resources(FILE *f, const struct run_report *rep)
{
	const char *p = rep->sacct;

	fprintf(f, "<section id=\"resources\"><h2>Resources requested and used</h2>\n");
	if (!p) {
		fprintf(f, "<p>No metrics/sacct.csv.</p></section>\n");
		return;
	}
	if (*p == '#') {
		fprintf(f, "<p>");
		put_escaped(f, p + 2);
		fprintf(f, "</p></section>\n");
		return;
	}
	resources_summary(f, p);
	fprintf(f, "<p class=\"sacct-when\">%s</p>\n", rep->sacct_refreshed ?
		"As sacct reports the ended job now (metrics/sacct.csv holds what it said while the "
		"job ran)." : "As metrics/sacct.csv holds it (sacct's answer when the last attempt "
		"ended).");
	fprintf(f, "<table class=\"sacct\">\n");
	for (int row = 0; *p; row++) {
		size_t len = strcspn(p, "\n");
		const char *cell = p, *end = p + len;

		fprintf(f, "<tr>");
		while (cell <= end) {
			size_t cl = strcspn(cell, "|\n");
			char buf[256];

			if (cell + cl > end)
				cl = (size_t)(end - cell);
			snprintf(buf, sizeof buf, "%.*s", (int)cl, cell);
			fprintf(f, row ? "<td>" : "<th>");
			put_escaped(f, buf);
			fprintf(f, row ? "</td>" : "</th>");
			cell += cl + 1;
		}
		fprintf(f, "</tr>\n");
		p = *end ? end + 1 : end;
	}
	fprintf(f, "</table>\n</section>\n");
}

static const char style[] =
	"body{font-family:sans-serif;margin:2em;max-width:60em;color:#222}"
	"h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #ccc}h3{font-size:1em}"
	"table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:2px 6px}"
	"th{background:#f0f0f0}.frame{fill:#fff;stroke:#888}.grid{stroke:#eee}"
	".tick{font-size:11px;fill:#555}.label{font-size:12px;fill:#222}"
	"polyline{stroke-width:1.5}.restart-marker line{stroke:#d62728;stroke-dasharray:4 3}"
	".restart-marker text{font-size:11px;font-weight:bold;fill:#d62728}"
	".stops{color:#d62728;font-size:.9em}.checkpoint{fill:#2ca02c}"
	".spike-marker polyline{fill:#ff7f0e;stroke:none}.spike-marker.skip polyline{fill:#9467bd}"
	".spike-marker.rollback polyline{fill:#d62728}"
	".member-marker line{stroke:#1f77b4;stroke-dasharray:1 3;stroke-width:2}.members{color:#1f77b4;font-size:.9em}"
	".straggler{color:#d62728;font-weight:bold}.problems{color:#a00}";

int report_write_html(const struct run_report *rep, FILE *f)
{
	const char *name = strrchr(rep->dir, '/');

	name = name && name[1] ? name + 1 : rep->dir;
	errno = 0;
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
	put_escaped(f, name);
	fprintf(f, " - stork report</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", style);
	put_escaped(f, name);
	fprintf(f, "</h1>\n<p class=\"meta\">Run directory ");
	put_escaped(f, rep->dir);
	fprintf(f, "; job ");
	put_escaped(f, json_text(rep->exit_info, "job_id", "?"));
	fprintf(f, "; %zu step(s), %d rank(s).</p>\n", rep->train_loss.n, rep->nranks);
	if (rep->problems[0]) {
		fprintf(f, "<pre class=\"problems\">");
		put_escaped(f, rep->problems);
		fprintf(f, "</pre>\n");
	}
	section_outcome(f, rep);
	section_loss(f, rep);
	section_ranks(f, rep);
	section_checkpoints(f, rep);
	section_layout(f, rep);
	section_resources(f, rep);
	fprintf(f, "</body>\n</html>\n");
	return ferror(f) ? -1 : 0;
}
