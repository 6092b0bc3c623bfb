/*
 * daemon/engine/train/spike.c - see spike.h.
 *
 * The window is two arrays in step order; a full one shifts by one value
 * per accepted step (at most SPIKE_WINDOW_MAX floats, next to a training
 * step nothing). The mean and deviation are summed again from the arrays
 * at each step, in order and in double, rather than kept as running sums:
 * a window read back from a checkpoint then gives the very same bits.
 */
#include "config.h"
#include "daemon/engine/train/spike.h"

#include <math.h>
#include <string.h>

void spike_init(struct spike_window *w)
{
	w->n = 0;
	w->in_row = 0;
}

void spike_trim(struct spike_window *w, int window)
{
	int drop = w->n - window;

	if (drop <= 0)
		return;
	memmove(w->loss, w->loss + drop, (size_t)window * sizeof *w->loss);
	memmove(w->norm, w->norm + drop, (size_t)window * sizeof *w->norm);
	w->n = window;
}

/* How many standard deviations x lies above the mean of v[0..n-1] (n >= 2). */
static double zscore(const float *v, int n, double x, double *mean_out)
{
	double sum = 0, sq = 0, mean, sd;

	for (int i = 0; i < n; i++)
		sum += v[i];
	mean = sum / n;
	for (int i = 0; i < n; i++)
		sq += (v[i] - mean) * (v[i] - mean);
	sd = sqrt(sq / (n - 1));
	if (sd < SPIKE_STD_FLOOR * fabs(mean))
		sd = SPIKE_STD_FLOOR * fabs(mean);
	*mean_out = mean;
	if (sd == 0) /* every value 0: anything above is infinitely far */
		return x > mean ? INFINITY : 0;
	return (x - mean) / sd;
}

int spike_judge(const struct spike_window *w, const struct spike_params *p, float loss,
		float norm, struct spike_verdict *v)
{
	int need = p->min_steps > 2 ? p->min_steps : 2;

	memset(v, 0, sizeof *v);
	v->loss_z = v->norm_z = v->loss_mean = v->norm_mean = NAN;
	v->window = w->n;
	if (w->n < need || !isfinite(loss) || !isfinite(norm))
		return 0;
	v->judged = 1;
	v->loss_z = zscore(w->loss, w->n, loss, &v->loss_mean);
	v->norm_z = zscore(w->norm, w->n, norm, &v->norm_mean);
	v->spike = v->loss_z > p->zscore || v->norm_z > p->zscore;
	return v->spike;
}

/* Append a step's values, the oldest leaving a full window. */
static void accept(struct spike_window *w, int window, float loss, float norm)
{
	if (window < 1)
		window = 1;
	if (window > SPIKE_WINDOW_MAX)
		window = SPIKE_WINDOW_MAX;
	spike_trim(w, window - 1);
	w->loss[w->n] = loss;
	w->norm[w->n] = norm;
	w->n++;
	w->in_row = 0;
}

int spike_observe(struct spike_window *w, const struct spike_params *p, float loss, float norm,
		  struct spike_verdict *v)
{
	if (spike_judge(w, p, loss, norm, v)) {
		if (++w->in_row >= p->max_in_row) {
			spike_init(w);
			v->restarted = 1;
		}
		return 1;
	}
	if (isfinite(loss) && isfinite(norm))
		accept(w, p->window, loss, norm);
	return 0;
}
