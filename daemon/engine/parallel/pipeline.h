/*
 * daemon/engine/parallel/pipeline.h - one training step of a pipeline stage: the 1F1B
 * schedule over the step's micro-batches.
 *
 * Stage s of P runs min(P - s - 1, m) forward passes to fill the pipeline,
 * then alternates one forward and one backward until every micro-batch has
 * gone forward, then drains the remaining backwards. At most P - s
 * micro-batches are in flight on stage s, so it keeps that many activation
 * sets (gpt2_set_slots), not m. Activations go to the next stage and
 * their gradients come back on the pipeline group, in the model's memory:
 * comm_send and comm_recv while the pipeline fills and drains (a send
 * never waits for its receiver), and in between comm_sendrecv, each
 * stage's send paired with its neighbour's (GPU to GPU on NCCL, where a
 * send does wait for its receiver: only the pairs cannot deadlock).
 * Every stage reads every micro-batch from the data loader, so all stages
 * keep the same data position; the first stage uses the inputs, the last
 * the targets.
 *
 * The bubble (time a stage waits for its neighbours) is measured: the
 * seconds spent blocked in receives and exchanges, reported per step.
 */
#ifndef STORK_DAEMON_PIPELINE_H
#define STORK_DAEMON_PIPELINE_H

#include <stddef.h>

#include "daemon/engine/model/model.h"

struct comm;
struct data_loader;

struct pipeline {
	struct comm *pp;           /* stage k is rank k */
	int stage, nstages;
	int B, T, micro;           /* micro-batches per step */
	float *x, *dx;             /* (B, T, C) activations in and out, and their gradients */
	const struct ops *mem;     /* whose memory x and dx are in: the model's */
	int *inputs, *targets;     /* (B, T) of the micro-batch being read */
	double wait_seconds;       /* blocked in receives during the last step */
	size_t bytes_sent;         /* during the last step */
	/* the model's layer hook for the step's last backward pass (pipeline_set_layer_hook) */
	void (*layer_done)(void *arg, struct gpt2 *m, int layer);
	void *layer_done_arg;
};

/* Set up stage `stage` of the pipeline group pp for a model shard; 0 or -1 (memory). */
int pipeline_init(struct pipeline *p, struct comm *pp, struct gpt2 *m, int stage, int nstages,
		  int B, int T, int micro);

void pipeline_free(struct pipeline *p);

/*
 * Forward and backward of micro batches read from train (loss scaled by
 * 1/micro so the gradients add up to the mean), adding into m->grads. On
 * the last stage *loss is the mean loss over the micro-batches; elsewhere
 * 0. Returns 0; or an exit code with a message in err (data errors), or -1
 * when a model pass or a transfer failed (err says which).
 */
int pipeline_step(struct pipeline *p, struct gpt2 *m, struct data_loader *train, float *loss,
		  char *err, size_t errlen);

/*
 * Have the step's last backward pass (micro-batch m - 1's: the gradients
 * of a layer are final when it is done with that layer) call fn after each
 * layer, as gpt2_set_layer_hook: parallel.overlap's all-reduce of the
 * stage's layers over its data-parallel replicas. NULL: none.
 */
void pipeline_set_layer_hook(struct pipeline *p, void (*fn)(void *arg, struct gpt2 *m, int layer),
			     void *arg);

/*
 * Forward only, for validation: the last stage's mean loss over `batches`
 * micro-batches from val in *loss (0 elsewhere). Returns as pipeline_step.
 */
int pipeline_eval(struct pipeline *p, struct gpt2 *m, struct data_loader *val, int batches,
		  float *loss, char *err, size_t errlen);

#endif
