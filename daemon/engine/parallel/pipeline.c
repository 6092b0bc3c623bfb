/*
 * daemon/engine/parallel/pipeline.c - see pipeline.h.
 */
#include "config.h"
#include "daemon/engine/parallel/pipeline.h"

#include "daemon/engine/data/data.h"
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
	/* in the model's memory: a GPU stage's go from GPU to GPU */
	p->mem = m->ops;
	p->x = p->mem->alloc(btc * sizeof(float));
	p->dx = p->mem->alloc(btc * sizeof(float));
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
	if (p->mem) {
		p->mem->free(p->x);
		p->mem->free(p->dx);
	}
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

/* Send to a neighbour and receive from it at once (it makes the mirror call); the wait counts. */
static int exchange_with(struct pipeline *p, const float *out, float *in, size_t n, int peer,
			 char *err, size_t errlen)
{
	double t0 = clock_monotonic();
	int rc = comm_sendrecv(p->pp, out, n, peer, in, n, peer, COMM_FLOAT32);

	p->wait_seconds += clock_monotonic() - t0;
	p->bytes_sent += n * sizeof(float);
	return rc ? transfer_failed(p, rc, "exchanging with", peer, err, errlen) : 0;
}

static int model_failed(struct gpt2 *m, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", m->err);
	return -1;
}

/* The next micro-batch's tokens (every stage reads each, to keep the same data position). */
static int read_next(struct pipeline *p, struct data_loader *dl, char *err, size_t errlen)
{
	return data_next(dl, p->inputs, p->targets, err, errlen);
}

/*
 * Forward of the micro-batch just read into slot k, its input already in
 * p->x (but on the first stage, which embeds the tokens); its output is
 * left in p->x. Adds its loss on the last stage.
 */
static int forward(struct pipeline *p, struct gpt2 *m, int k, float scale, float *loss, char *err,
		   size_t errlen)
{
	float l = 0.0f;

	gpt2_use_slot(m, k);
	if (gpt2_stage_forward(m, p->inputs, last(p) ? p->targets : NULL, p->B, p->T, p->x, p->x,
			       &l))
		return model_failed(m, err, errlen);
	if (last(p))
		*loss += l * scale;
	return 0;
}

/*
 * Backward of micro-batch j, the gradient of its output already in p->dx
 * (but on the last stage, which starts at the loss); the gradient of its
 * input is left in p->dx. The last one's (j = micro - 1) calls the layer hook.
 */
static int backward(struct pipeline *p, struct gpt2 *m, int j, float scale, char *err,
		    size_t errlen)
{
	int rc;

	gpt2_use_slot(m, j % m->nslots);
	if (j == p->micro - 1)
		gpt2_set_layer_hook(m, p->layer_done, p->layer_done_arg);
	rc = gpt2_stage_backward(m, scale, p->dx, p->dx);
	gpt2_set_layer_hook(m, NULL, NULL);
	return rc ? model_failed(m, err, errlen) : 0;
}

/* The transfers around the passes; a stage at an end of the pipeline skips its side. */
static int recv_input(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return first(p) ? 0 : recv_from(p, p->x, btc(p, m), p->stage - 1, err, errlen);
}

static int send_output(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return last(p) ? 0 : send_to(p, p->x, btc(p, m), p->stage + 1, err, errlen);
}

static int recv_output_grad(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return last(p) ? 0 : recv_from(p, p->dx, btc(p, m), p->stage + 1, err, errlen);
}

static int send_input_grad(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return first(p) ? 0 : send_to(p, p->dx, btc(p, m), p->stage - 1, err, errlen);
}

/* The output forward and its gradient back, with the next stage. */
static int send_output_recv_grad(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return last(p) ? 0 : exchange_with(p, p->x, p->dx, btc(p, m), p->stage + 1, err, errlen);
}

/* The input's gradient back and the next input forward, with the previous stage. */
static int send_grad_recv_input(struct pipeline *p, struct gpt2 *m, char *err, size_t errlen)
{
	return first(p) ? 0 : exchange_with(p, p->dx, p->x, btc(p, m), p->stage - 1, err, errlen);
}

/*
 * 1F1B. In the steady part the stage's send and its neighbour's send go
 * together (comm_sendrecv: the output forward with its gradient back, the
 * input's gradient back with the next input forward), the pairs the
 * neighbours make at the same point of their own schedules; the warm-up
 * and the drain use plain sends and receives. On host communicators the
 * calls are the same sends and receives in the same order either way.
 */
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
		if ((rc = read_next(p, train, err, errlen)) || (rc = recv_input(p, m, err, errlen)) ||
		    (rc = forward(p, m, i % m->nslots, scale, &sum, err, errlen)) ||
		    (rc = send_output(p, m, err, errlen)))
			return rc;
	if (warmup < mb &&
	    ((rc = read_next(p, train, err, errlen)) || (rc = recv_input(p, m, err, errlen))))
		return rc;
	for (int i = warmup; i < mb; i++) {
		int j = i - warmup, more = i < mb - 1;

		if ((rc = forward(p, m, i % m->nslots, scale, &sum, err, errlen)) ||
		    (rc = send_output_recv_grad(p, m, err, errlen)) ||
		    (rc = backward(p, m, j, scale, err, errlen)) ||
		    (more && (rc = read_next(p, train, err, errlen))) ||
		    (rc = more ? send_grad_recv_input(p, m, err, errlen) :
				 send_input_grad(p, m, err, errlen)))
			return rc;
	}
	for (int j = mb - warmup; j < mb; j++)
		if ((rc = recv_output_grad(p, m, err, errlen)) ||
		    (rc = backward(p, m, j, scale, err, errlen)) ||
		    (rc = send_input_grad(p, m, err, errlen)))
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
		if ((rc = read_next(p, val, err, errlen)) || (rc = recv_input(p, m, err, errlen)) ||
		    (rc = forward(p, m, 0, 1.0f, &sum, err, errlen)) ||
		    (rc = send_output(p, m, err, errlen)))
			return rc;
	*loss = last(p) ? sum / (float)batches : 0.0f;
	return 0;
}
