/*
 * daemon/engine/parallel/zero_mirror.h - ZeRO-1 under restart.in_place: each
 * replica also keeps the next replica's part of the optimizer state.
 *
 * ZeRO-1 leaves each part of the moments on one replica only, so the loss
 * of a replica would lose its part for good: nobody could go on exactly.
 * With the mirror, data-parallel rank d keeps a copy of the moments of
 * rank d + D/2 (mod D), half the group away, and updates it alike (the
 * same gradients, the same bits), so every part lives on two replicas.
 * Half the group away is another node in Stork's node-major order of the
 * ranks whenever the group spans two nodes or more, so the loss of a
 * whole node leaves every part on a survivor (train_recover_zero.c); a
 * neighbour (d + 1) would be lost with it. The cost: twice the moments'
 * memory (2/D of the model's instead of 1/D), a second AdamW pass over
 * 1/D of the parameters, and one exchange of 1/D of the gradients per
 * step, each rank sending its part to the rank that keeps its copy (an
 * all-reduce moves 2 (D-1)/D).
 */
#ifndef STORK_DAEMON_ZERO_MIRROR_H
#define STORK_DAEMON_ZERO_MIRROR_H

#include "daemon/engine/parallel/zero.h"

struct zero_mirror {
	int on;                    /* D > 1: there is another replica to mirror */
	int filled;                /* the copy is whole: zero_mirror_fill ended */
	struct zero_plan plan;     /* the parts of rank zero_mirror_kept(D, d) */
	struct adamw_state opt;    /* their moments, in the rank's memory */
};

/* Whose parts rank d of D keeps a copy of, and which rank keeps d's. */
int zero_mirror_kept(int D, int d);
int zero_mirror_keeper(int D, int d);

/*
 * The mirror of own (rank d of D): zero_mirror_kept's parts, with zeroed moments
 * in o's memory. Nothing to do (on = 0) when D is 1. 0, or -2 (memory).
 */
int zero_mirror_make(struct zero_mirror *mm, const struct zero_plan *own, const struct gpt2 *m,
		     const struct ops *o);

void zero_mirror_free(struct zero_mirror *mm);

/*
 * Fill the mirror from the neighbour's live moments (at the start, after a
 * checkpoint was read, or after a regroup): every rank sends its own part
 * to its keeper and receives the part it keeps. Collective over dp. 0 or a
 * COMM_E* code.
 */
int zero_mirror_fill(struct zero_mirror *mm, const struct zero_plan *own,
		     const struct adamw_state *opt, struct comm *dp);

/*
 * The kept part's final gradients (averaged, clipped) into its parts of
 * m->grads, the same exchange as zero_mirror_fill. Collective over dp.
 */
int zero_mirror_grads(struct zero_mirror *mm, const struct zero_plan *own, struct gpt2 *m,
		      struct comm *dp);

/*
 * AdamW over the kept parts, as their owner does: the moments stay its
 * copy, bit for bit; the parameters written there are those the
 * all-gather then brings from the owner.
 */
void zero_mirror_adamw(struct zero_mirror *mm, const struct adamw_params *h, float lr,
		       struct gpt2 *m);

#endif
