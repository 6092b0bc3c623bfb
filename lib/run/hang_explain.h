/*
 * lib/run/hang_explain.h - a hang, explained from where each rank was: which
 * ranks wait in which collective, and which members of its group never
 * entered it (and where those were instead).
 *
 * Each node's storkd, when its watchdog finds a rank stuck, writes one
 * record per local rank (daemon/engine/train/hang_report.c) in
 * logs/where.node-NNN.requeue-R.restart-A.json:
 *
 *   {"rank": 3, "host": "n2", "step": 812, "op": "all-reduce", "group": "dp",
 *    "first": 1, "block": 1, "stride": 2, "count": 4, "call": 5, "bytes": 4096,
 *    "peer": -1, "waiting_s": 30.2, "failed": false, "phase": "forward", "layer": 9}
 *
 * op is "" when the rank was in no collective (phase and layer then say
 * where it was: layer -1 outside the model's blocks); step is the step it
 * was in; the group's members are first + (i / block) * stride + i % block
 * for i < count; call counts the calls on that group, so two members wait
 * in the same collective when group, first and call agree.
 */
#ifndef STORK_LIB_HANG_EXPLAIN_H
#define STORK_LIB_HANG_EXPLAIN_H

#include <stddef.h>

#include <jansson.h>

/*
 * The explanation of records (a JSON array of such objects, any order, any
 * number of nodes) into out: "rank 2 (n2) waits in all-reduce #5 of the tp
 * group (ranks 2-3) in step 6 for 31 s; rank 3 (n2) never entered it: it
 * is in forward, layer 0 of step 6". Ranks without a record are said to
 * have none. Returns the length written (0: nothing to say).
 */
size_t hang_explain(const json_t *records, char *out, size_t len);

/* Path of node n's records for this requeue and restart. */
void hang_records_path(char *out, size_t len, const char *run_dir, int node, int requeue,
		       int attempt);

#endif
