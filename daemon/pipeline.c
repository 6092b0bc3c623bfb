/*
 * daemon/pipeline.c - see pipeline.h.
 */
#include "config.h"
#include "daemon/pipeline.h"

#include "daemon/data.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pipeline_init(struct pipeline *p, struct comm *pp, struct gpt2 *m, int stage, int nstages,
		  int B, int T, int micro)
{
	size_t btc = (size_t)B * T * m->config.channels;
	int inflight = nstages - stage < micro ? nstages - stage : micro;

	memset(p, 0, sizeof *p);
	p->pp = pp;
	p->stage = stage;
	p->nstages = nstages;
	p->B = B;
	p->T = T;
	p->micro = micro;
	p->x = malloc(btc * sizeof(float));
	p->dx = malloc(btc * sizeof(float));
	p->inputs = malloc(2 * (size_t)B * T * sizeof(int));
	if (!p->x || !p->dx || !p->inputs || gpt2_set_slots(m, inflight < 1 ? 1 : inflight)) {
		pipeline_free(p);
		return -1;
	}
	p->targets = p->inputs + (size_t)B * T;
	return 0;
}

void pipeline_free(struct pipeline *p)
{
	free(p->x);
	free(p->dx);
	free(p->inputs);
	memset(p, 0, sizeof *p);
}

static int first(const struct pipeline *p)
{
	return p->stage == 0;
}

static int last(const struct pipeline *p)
{
	return p->stage == p->nstages - 1;
}

static size_t btc(const struct pipeline *p, const struct gpt2 *m)
{
	return (size_t)p->B * p->T * m->config.channels;
}

static int transfer_failed(struct pipeline *p, int rc, const char *what, int peer, char *err,
			   size_t errlen)
{
	snprintf(err, errlen, "pipeline stage %d: %s stage %d failed: %s", p->stage, what, peer,
		 rc == COMM_EABORTED ? comm_abort_reason(p->pp) : comm_strerror(rc));
	return -1;
}

/* Receive from a neighbour stage, counting the time spent waiting (the bubble). */
static int recv_from(struct pipeline *p, float *buf, size_t n, int peer, char *err, size_t errlen)
{
	double t0 = clock_monotonic();
	int rc = comm_recv(p->pp, buf, n, COMM_FLOAT32, peer);

	p->wait_seconds += clock_monotonic() - t0;
	return rc ? transfer_failed(p, rc, "receiving from", peer, err, errlen) : 0;
}

static int send_to(struct pipeline *p, const float *buf, size_t n, int peer, char *err,
		   size_t errlen)
{
	int rc = comm_send(p->pp, buf, n, COMM_FLOAT32, peer);

	p->bytes_sent += n * sizeof(float);
	return rc ? transfer_failed(p, rc, "sending to", peer, err, errlen) : 0;
}

static int model_failed(struct gpt2 *m, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", m->err);
	return -1;
}

/* Forward of the next micro-batch into slot k; adds its loss on the last stage. */
static int forward(struct pipeline *p, struct gpt2 *m, struct data_loader *dl, int k, float scale,
		   float *loss, char *err, size_t errlen)
{
	float l = 0.0f;
	int rc;

	if ((rc = data_next(dl, p->inputs, p->targets, err, errlen)))
		return rc;
	if (!first(p) && recv_from(p, p->x, btc(p, m), p->stage - 1, err, errlen))
		return -1;
	gpt2_use_slot(m, k);
	if (gpt2_stage_forward(m, p->inputs, last(p) ? p->targets : NULL, p->B, p->T, p->x, p->x,
			       &l))
		return model_failed(m, err, errlen);
	if (!last(p))
		return send_to(p, p->x, btc(p, m), p->stage + 1, err, errlen);
	*loss += l * scale;
	return 0;
}

/* Backward of micro-batch j; the last one's (j = micro - 1) calls the layer hook. */
static int backward(struct pipeline *p, struct gpt2 *m, int j, float scale, char *err,
		    size_t errlen)
{
	int rc;

	if (!last(p) && recv_from(p, p->dx, btc(p, m), p->stage + 1, err, errlen))
		return -1;
	gpt2_use_slot(m, j % m->nslots);
	if (j == p->micro - 1)
		gpt2_set_layer_hook(m, p->layer_done, p->layer_done_arg);
	rc = gpt2_stage_backward(m, scale, p->dx, p->dx);
	gpt2_set_layer_hook(m, NULL, NULL);
	if (rc)
		return model_failed(m, err, errlen);
	if (!first(p))
		return send_to(p, p->dx, btc(p, m), p->stage - 1, err, errlen);
	return 0;
}

int pipeline_step(struct pipeline *p, struct gpt2 *m, struct data_loader *train, float *loss,
		  char *err, size_t errlen)
{
	int mb = p->micro, warmup = p->nstages - p->stage - 1, rc;
	float scale = 1.0f / (float)mb, sum = 0.0f;

	if (warmup > mb)
		warmup = mb;
	p->wait_seconds = 0;
	p->bytes_sent = 0;
	for (int i = 0; i < warmup; i++)
		if ((rc = forward(p, m, train, i % m->nslots, scale, &sum, err, errlen)))
			return rc;
	for (int i = warmup; i < mb; i++) {
		int j = i - warmup;

		if ((rc = forward(p, m, train, i % m->nslots, scale, &sum, err, errlen)) ||
		    (rc = backward(p, m, j, scale, err, errlen)))
			return rc;
	}
	for (int j = mb - warmup; j < mb; j++)
		if ((rc = backward(p, m, j, scale, err, errlen)))
			return rc;
	*loss = last(p) ? sum : 0.0f;
	return 0;
}

void pipeline_set_layer_hook(struct pipeline *p, void (*fn)(void *arg, struct gpt2 *m, int layer),
			     void *arg)
{
	p->layer_done = fn;
	p->layer_done_arg = arg;
}

int pipeline_eval(struct pipeline *p, struct gpt2 *m, struct data_loader *val, int batches,
		  float *loss, char *err, size_t errlen)
{
	float sum = 0.0f;
	int rc;

	for (int i = 0; i < batches; i++)
		if ((rc = forward(p, m, val, 0, 1.0f, &sum, err, errlen)))
			return rc;
	*loss = last(p) ? sum / (float)batches : 0.0f;
	return 0;
}
