/*
 * lib/run/stage_path.h - where a node keeps the data shards it stages from
 * http(s) URLs (data.train and data.val entries that are URLs): the
 * launcher downloads them there (launcher/run/stage.c), storkd reads them from
 * there, and both find the same file from the same URL and environment.
 */
#ifndef STORK_STAGE_PATH_H
#define STORK_STAGE_PATH_H

#include <stddef.h>

/*
 * The node's stage directory: data.stage_dir when set, else $SLURM_TMPDIR,
 * else /tmp/stork-USER/JOB (JOB: SLURM_JOB_ID, or "local"). 0, or -1 when
 * the path does not fit.
 */
int stage_dir_resolve(const char *configured, char *out, size_t len);

/*
 * The staged file of url under dir: its host and path, every byte but
 * letters, digits, '.' and '-' written as '_' and two hex digits ('/' as
 * _2f, '_' as _5f), so the name is never a glob, never leaves dir, and
 * two URLs never share it (h/a/b.bin and h/a_b.bin stay apart), e.g.
 * data.example.org_2fshards_2fx_5ftrain.bin. The query is left out. 0, or
 * -1 when the path does not fit or the URL has neither host nor path.
 */
int stage_local_path(const char *dir, const char *url, char *out, size_t len);

#endif
