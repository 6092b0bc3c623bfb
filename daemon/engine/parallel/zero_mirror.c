/*
 * daemon/engine/parallel/zero_mirror.c - see zero_mirror.h.
 */
#include "config.h"
#include "daemon/engine/parallel/zero_mirror.h"

#include "lib/comm/comm.h"

#include <string.h>

int zero_mirror_kept(int D, int d)
{
	return (d + D / 2) % D;
}

int zero_mirror_keeper(int D, int d)
{
	return (d + D - D / 2) % D;
}

int zero_mirror_make(struct zero_mirror *mm, const struct zero_plan *own, const struct gpt2 *m,
		     const struct ops *o)
{
	memset(mm, 0, sizeof *mm);
	if (own->D < 2)
		return 0;
	zero_plan_layout(&mm->plan, m->sizes, own->D, zero_mirror_kept(own->D, own->d));
	if (adamw_init_on(&mm->opt, mm->plan.state_n, o) < 0)
		return -2;
	mm->on = 1;
	return 0;
}

void zero_mirror_free(struct zero_mirror *mm)
{
	if (mm->on)
		adamw_free(&mm->opt);
	memset(mm, 0, sizeof *mm);
}

/*
 * Send n floats to this rank's keeper and receive k from the rank whose
 * part it keeps. A part may be empty (the last ranks' when the segment is
 * short); the two sides agree, since the receiver's k is the sender's n.
 */
static int exchange(const struct zero_plan *own, struct comm *dp, const float *send, size_t n,
		    float *recv, size_t k)
{
	int keeper = zero_mirror_keeper(own->D, own->d), kept = zero_mirror_kept(own->D, own->d);
	int rc = 0;

	if (n && k)
		return comm_sendrecv(dp, send, n, keeper, recv, k, kept, COMM_FLOAT32);
	if (n)
		rc = comm_send(dp, send, n, COMM_FLOAT32, keeper);
	if (!rc && k)
		rc = comm_recv(dp, recv, k, COMM_FLOAT32, kept);
	return rc;
}

int zero_mirror_fill(struct zero_mirror *mm, const struct zero_plan *own,
		     const struct adamw_state *opt, struct comm *dp)
{
	int rc;

	if (!mm->on)
		return 0;
	if ((rc = exchange(own, dp, opt->m, own->state_n, mm->opt.m, mm->plan.state_n)) ||
	    (rc = exchange(own, dp, opt->v, own->state_n, mm->opt.v, mm->plan.state_n)))
		return rc;
	mm->opt.step = opt->step; /* every replica has done as many updates */
	mm->filled = 1;
	return 0;
}

int zero_mirror_grads(struct zero_mirror *mm, const struct zero_plan *own, struct gpt2 *m,
		      struct comm *dp)
{
	if (!mm->on)
		return 0;
	for (int k = 0; k < own->nseg; k++) {
		const struct zero_segment *s = &own->seg[k], *t = &mm->plan.seg[k];
		int rc = exchange(own, dp, m->grads + s->lo, s->hi - s->lo, m->grads + t->lo,
				  t->hi - t->lo);

		if (rc)
			return rc;
	}
	return 0;
}

void zero_mirror_adamw(struct zero_mirror *mm, const struct adamw_params *h, float lr,
		       struct gpt2 *m)
{
	if (mm->on)
		zero_adamw(&mm->plan, &mm->opt, h, lr, m);
}
