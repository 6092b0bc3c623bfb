/*
 * daemon/node/node_result.c - the node's result for the launcher's exit_info.
 *
 * A rank's result struct belongs to its thread until the thread stores
 * progress->done (an atomic store after its last write, so whoever loads
 * done = 1 sees the whole result). The normal path joins every thread
 * first; the watchdog's path reports while a stuck rank may still run and
 * even write its result as the abort wakes it, so a rank that is not done
 * is read only through its atomic heartbeat.
 */
#include "config.h"
#include "daemon/node/node_result.h"
#include "lib/exit_codes.h"
#include "lib/formats/stork_json.h"

#include <stdatomic.h>

static int is_done(const struct node_rank_view *v)
{
	return atomic_load(&v->progress->done);
}

/* A primary failure comes before any secondary one, then time. */
static int fails_first(const struct train_rank_result *r, const struct train_rank_result *first)
{
	if (r->fail_time <= 0 || r->exit_code == STORK_EXIT_PREEMPTED || r->exit_code == STORK_EXIT_TIMEOUT)
		return 0;
	return !first || r->secondary < first->secondary ||
	       (r->secondary == first->secondary && r->fail_time < first->fail_time);
}

json_t *node_result_json(int code, const struct node_rank_view *ranks, int n, const char *message)
{
	const struct train_rank_result *first = NULL, *ckpt = NULL;
	int first_rank = -1;
	int64_t last_step = -1;
	json_t *v;

	for (int i = 0; i < n; i++) {
		const struct train_rank_result *r = ranks[i].result;
		int64_t step = is_done(&ranks[i]) ? r->last_step : atomic_load(&ranks[i].progress->step);

		if (last_step < 0 || step < last_step)
			last_step = step;
		if (!is_done(&ranks[i]))
			continue;
		if (fails_first(r, first)) {
			first = r;
			first_rank = ranks[i].rank;
		}
		if (r->checkpoint[0] && (!ckpt || r->checkpoint_step > ckpt->checkpoint_step))
			ckpt = r;
	}
	v = json_pack("{s:i, s:I}", "exit_code", code, "last_step", (json_int_t)last_step);
	if (!v)
		return NULL;
	if (message) {
		json_object_set_new(v, "message", sj_text(message));
	} else if (first) {
		json_object_update_new(v, json_pack("{s:i, s:o, s:I, s:i, s:b}", "failed_rank", first_rank,
					       "fail_time", sj_number(first->fail_time),
					       "failed_rank_step", (json_int_t)first->last_step,
					       "failed_rank_code", first->exit_code,
					       "secondary", first->secondary));
		json_object_set_new(v, "message", sj_text(first->message));
	} else {
		for (int i = 0; i < n; i++)
			if (is_done(&ranks[i]) && ranks[i].result->exit_code == code) {
				json_object_set_new(v, "message", sj_text(ranks[i].result->message));
				break;
			}
	}
	if (ckpt) {
		json_object_set_new(v, "checkpoint", sj_text(ckpt->checkpoint));
		json_object_set_new(v, "checkpoint_step", json_integer(ckpt->checkpoint_step));
	}
	return v;
}
