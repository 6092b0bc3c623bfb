/*
 * daemon/engine/checkpoint/train_checkpoint_local.c - the node-local checkpoint tier
 * (checkpoint.local_dir), for clusters whose shared file system is the
 * bottleneck.
 *
 * Every checkpoint is committed first in a directory of each node's own
 * (node-local disk or $SLURM_TMPDIR): each rank writes its shard there (under
 * plain data parallelism, where the replicas are equal, the node's first
 * rank writes one), the shards' checksums go round the world, and the
 * node's first rank commits its node's part: a manifest of its node's shards
 * alone, state.json, then its own `latest`, as the run directory's commit
 * does. Every checkpoint.persist_every-th periodic checkpoint, and that of a
 * stop and of the last step, is then written to the run directory as
 * without the tier.
 *
 * A resume prefers the newest checkpoint that is complete and verified on
 * every node's tier over the run directory's, when it is newer: only in the
 * same job (the directory is named after it), on the same nodes, with the
 * same ranks on each and the same layout; a node that was lost, or a
 * layout that changed, leaves the run directory's. The first rank of each
 * node looks and verifies, and one all-reduce makes every rank choose the
 * same.
 */
#include "config.h"
#include "daemon/engine/train/train_rank.h"
#include "daemon/engine/checkpoint/checkpoint_schedule.h"

#include "kernels/ops.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/io/private_dir.h"
#include "lib/run/stage_path.h"
#include "lib/config/stork_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* What ckpt_find says of the checkpoints it passes over, for the rank log. */
static void notice_local(void *arg, const char *msg)
{
	rank_logf(&((struct rank *)arg)->log, "checkpoint.local_dir: %s", msg);
}

int local_tier_root(const struct rank *r, char *out, size_t len)
{
	const char *configured = r->cfg->checkpoint.local_dir;
	char base[4096];
	int n;

	if (!configured[0])
		return -1;
	if (!strcmp(configured, "auto")) {
		if (stage_dir_resolve("", base, sizeof base) < 0)
			return -1;
	} else {
		snprintf(base, sizeof base, "%s", configured);
	}
	/* this job's, this run directory's and this host's: a requeue finds it, nothing else does */
	n = snprintf(out, len, "%s/stork-checkpoints.%s.%016llx.%s", base, r->node->job_id,
		     (unsigned long long)XXH3_64bits(r->node->run_dir, strlen(r->node->run_dir)),
		     r->node->host);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Data parallelism alone: the node's first rank writes the node's one replica. */
static int writes_locally(const struct rank *r)
{
	return !plain_layout(&r->lay) || r->local == 0;
}

/* The shards a node's tier holds: from the node's first rank, one or all of its ranks'. */
static int node_shards(const struct rank *r)
{
	return plain_layout(&r->lay) ? 1 : r->node->local_ranks;
}

/* An int all ranks agree on: the least of theirs. */
static int agree_min(struct rank *r, int32_t *v)
{
	return comm_allreduce(r->comm, v, 1, COMM_INT32, COMM_MIN) < 0 ? rank_fail_collective(r) : 0;
}

/* Each node's first rank makes its tier's step_N.tmp/; 0 or the exit code, *failed if a node could not. */
static int prepare_local(struct rank *r, const char *root, int64_t step, int *failed)
{
	int32_t ok = 1;
	int code;

	if (r->local == 0 &&
	    (private_dir_make(root, "node-local checkpoint directory", "checkpoint.local_dir", r->err,
			      sizeof r->err) < 0 ||
	     ckpt_prepare(root, step, r->err, sizeof r->err) < 0))
		ok = 0;
	if ((code = agree_min(r, &ok)))
		return code;
	if (!ok && r->err[0] == '\0')
		snprintf(r->err, sizeof r->err, "a node could not prepare its node-local checkpoint "
			 "step %" PRId64, step);
	*failed = !ok;
	return 0;
}

/* This rank's shard into its node's tier: its checksum and size, or size UINT64_MAX. */
static void write_local_shard(struct rank *r, const char *root, int64_t step,
			      struct ckpt_shard_info *info, uint64_t mine[2])
{
	float *p, *m, *v;

	mine[0] = mine[1] = 0;
	if (!writes_locally(r))
		return;
	shard_info(r, info);
	if (checkpoint_host_state(r, &p, &m, &v) ||
	    ckpt_write_shard(root, step, info, p, m, v, &mine[0], &mine[1], r->err,
			     sizeof r->err) < 0)
		mine[1] = UINT64_MAX;
}

/* The node's first rank commits its node's shards (every rank's checksums in pairs). */
static int commit_node(struct rank *r, const char *root, const struct ckpt_state *st,
		       const struct ckpt_shard_info *info, const uint64_t *pairs)
{
	int first = r->node->rank_base, count = node_shards(r);
	uint64_t *sums = calloc(2 * (size_t)count, sizeof *sums);
	int rc = -1;

	if (!sums) {
		snprintf(r->err, sizeof r->err, "out of memory committing a node-local checkpoint");
		return -1;
	}
	for (int k = 0; k < count; k++) {
		sums[k] = pairs[2 * (first + k)];
		sums[count + k] = pairs[2 * (first + k) + 1];
	}
	rc = ckpt_commit_part(root, st, &info->layout, first, count, sums, sums + count,
			      checkpoint_keep(r->cfg), r->err, sizeof r->err);
	free(sums);
	return rc;
}

int checkpoint_local(struct rank *r, int64_t steps_done, int *failed)
{
	int W = r->node->world_size, code;
	uint64_t mine[2], *pairs = NULL;
	struct ckpt_shard_info info;
	struct ckpt_state st;
	char root[4096];
	double t0 = clock_monotonic();
	int32_t ok = 1;

	*failed = 0;
	r->err[0] = '\0';
	/* a GPU rank's host copy is what a background write may still be reading */
	if (r->ops != &ops_cpu && (code = checkpoint_async_drain(r)))
		return code;
	if (local_tier_root(r, root, sizeof root) < 0)
		return rank_fail(r, STORK_EXIT_CONFIG, "checkpoint.local_dir: the path does not fit");
	checkpoint_state(r, steps_done, &st);
	if ((code = prepare_local(r, root, steps_done, failed)) || *failed)
		return code;
	write_local_shard(r, root, steps_done, &info, mine);
	if (!(pairs = calloc(2 * (size_t)W, sizeof *pairs)))
		return rank_fail(r, STORK_EXIT_INTERNAL, "out of memory for the checkpoint");
	if (comm_allgather(r->comm, mine, pairs, 2, COMM_INT64) < 0) {
		free(pairs);
		return rank_fail_collective(r);
	}
	for (int k = 0; k < W; k++)
		if (pairs[2 * k + 1] == UINT64_MAX)
			ok = 0;
	if (!ok && mine[1] != UINT64_MAX)
		snprintf(r->err, sizeof r->err, "a rank could not write its shard of node-local "
			 "checkpoint step %" PRId64, steps_done);
	if (ok && r->local == 0 && commit_node(r, root, &st, &info, pairs) < 0)
		ok = 0;
	free(pairs);
	if ((code = agree_min(r, &ok)))
		return code;
	if (!ok) {
		if (r->local == 0)
			ckpt_abandon(root, steps_done);
		if (r->err[0] == '\0')
			snprintf(r->err, sizeof r->err, "a node could not commit its node-local "
				 "checkpoint step %" PRId64, steps_done);
		*failed = 1;
		return 0;
	}
	rank_logf(&r->log, "checkpoint step_%08" PRId64 " committed on the node-local tier %s in "
		  "%.0f ms", steps_done, root, 1e3 * (clock_monotonic() - t0));
	if (r->rank == 0)
		rank_metric(&r->log, steps_done, "checkpoint_local_s", clock_monotonic() - t0, "s");
	return 0;
}

/*
 * The node's first rank: the step of its tier's newest verified checkpoint
 * that this very world could read back as its own shards (same layout,
 * this node's ranks), or -1.
 */
static int64_t usable_local_step(struct rank *r, const char *root, char *dir, size_t len)
{
	const struct par_layout *p = &r->lay;
	struct ckpt_layout l;
	struct ckpt_state st;
	char why[1024];
	int first, count;

	if (!ckpt_find(root, dir, len, notice_local, r))
		return -1;
	if (ckpt_read_layout(dir, &l, why, sizeof why) < 0 ||
	    ckpt_read_part(dir, &first, &count, why, sizeof why) < 0 ||
	    ckpt_read_state(dir, &st, why, sizeof why) < 0)
		return -1;
	if (!l.sharded || l.world != p->world || l.dp != p->dp || l.tp != p->tp || l.pp != p->pp ||
	    l.zero != p->zero || first != r->node->rank_base || count != node_shards(r)) {
		rank_logf(&r->log, "checkpoint.local_dir: %s is of another layout or of other ranks "
			  "on this node: not used", dir);
		return -1;
	}
	return st.step;
}

/* A node's first rank could not make its tier: below every step and "none" (-1). */
#define REFUSED (-2)

int local_tier_find(struct rank *r, int64_t shared_step, char *dir, size_t len)
{
	/* {least step, -(greatest step)}: one MIN all-reduce gives both */
	int64_t v[2] = { INT64_MAX, INT64_MAX }, step;
	char root[4096], mine[4096];

	if (local_tier_root(r, root, sizeof root) < 0) {
		rank_fail(r, STORK_EXIT_CONFIG, "checkpoint.local_dir: the path does not fit");
		return 1;
	}
	/* the tier is made (or refused) before the first step, not at the first checkpoint */
	if (r->local == 0 && private_dir_make(root, "node-local checkpoint directory",
					      "checkpoint.local_dir", r->err, sizeof r->err) < 0) {
		v[0] = REFUSED;
	} else if (r->local == 0) {
		step = usable_local_step(r, root, mine, sizeof mine);
		v[0] = step;
		v[1] = -step;
	}
	if (comm_allreduce(r->comm, v, 2, COMM_INT64, COMM_MIN) < 0) {
		rank_fail_collective(r);
		return 1;
	}
	if (v[0] == REFUSED) {
		rank_fail(r, STORK_EXIT_CONFIG, r->local == 0 && r->err[0] ? r->err :
			  "checkpoint.local_dir: another node refused its directory (its rank log says why)");
		return 1;
	}
	if (v[0] < 0 || v[0] != -v[1] || v[0] <= shared_step) {
		if (r->rank == 0 && shared_step >= 0)
			printf("checkpoint.local_dir: the run directory's checkpoint is the one to resume "
			       "from (the node-local tiers hold %s)\n",
			       v[0] < 0 ? "none complete on every node" :
			       v[0] != -v[1] ? "different steps on different nodes" : "nothing newer");
		return 0;
	}
	snprintf(dir, len, "%s/step_%08" PRId64, root, v[0]);
	rank_logf(&r->log, "checkpoint.local_dir: resuming from the node-local tier's step %" PRId64
		  " (%s), newer than the run directory's (%s)", v[0], dir,
		  shared_step < 0 ? "none" : "older");
	if (r->rank == 0) {
		printf("checkpoint.local_dir: resuming from the node-local tier's step %" PRId64
		       ", newer than the run directory's ", v[0]);
		if (shared_step < 0)
			printf("(none)\n");
		else
			printf("step %" PRId64 "\n", shared_step);
		fflush(stdout);
	}
	return 1;
}
