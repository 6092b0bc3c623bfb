/*
 * launcher/run/stage.h - data shards given as http(s) URLs, staged once per
 * node before the first step.
 *
 * Every launcher stages the URLs of data.train and data.val into the
 * node's stage directory (lib/run/stage_path.h) before it starts storkd; the
 * launchers of one node take turns (a lock file), so each shard is
 * downloaded once per node, and what an earlier attempt staged and
 * verified is used again. A shard arrives as NAME.part, is checked (the
 * llm.c header and size always, data.sha256 when configured) and renamed
 * into place; an interrupted download goes on from where it stopped (HTTP
 * Range). Transfers run data.downloads at a time (curl multi), connection
 * errors and 5xx answers are tried again with backoff, a 4xx answer stops
 * the run naming the URL and the status. TLS is verified (the system's CA
 * store, or data.ca_file); credentials come from data.netrc (or ~/.netrc)
 * or the variable named by data.token_env, and no URL is logged with its
 * query or user.
 */
#ifndef STORK_LAUNCHER_STAGE_H
#define STORK_LAUNCHER_STAGE_H

#include "lib/config/stork_config.h"

#include <stddef.h>
#include <time.h>

/*
 * Stage every URL shard. 0 (nothing to do included), or an exit code
 * (lib/exit_codes.h) with the reason in err. job_end (0: no limit) bounds
 * the time it takes: staging stops STAGE_END_RESERVE_S plus
 * preempt.deadline_lead before the job's end, keeping what it has for the
 * next attempt to go on from.
 */
#define STAGE_END_RESERVE_S 60
int stage_data(const struct stork_config *cfg, time_t job_end, char *err, size_t errlen);

#endif
