/*
 * launcher/engine/export.c - `stork export CHECKPOINT MODEL.bin`: one llm.c model
 * file from any checkpoint, whole or sharded over a tensor/pipeline layout.
 *
 * CHECKPOINT is a step_N directory, a checkpoints/ directory or a run
 * directory (then its newest usable checkpoint). The file is written under
 * a temporary name and renamed, so a failed export leaves nothing behind.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "daemon/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void skip_notice(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "stork export: %s\n", msg);
}

int cmd_export(int argc, char **argv)
{
	char dir[4096], tmp[4200], err[1024];

	if (argc != 3 || argv[1][0] == '-') {
		fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr,
			"usage: stork export CHECKPOINT MODEL.bin\n"
			"Write the model of a checkpoint (a step_N directory, a checkpoints/ directory\n"
			"or a run directory) as one llm.c model file, whatever layout wrote it.\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : STORK_EXIT_USAGE;
	}
	if (!ckpt_find_any(argv[1], dir, sizeof dir, skip_notice, NULL)) {
		fprintf(stderr, "stork export: %s holds no usable checkpoint\n", argv[1]);
		return STORK_EXIT_CHECKPOINT_BAD;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", argv[2], (int)getpid());
	if (ckpt_export(dir, tmp, err, sizeof err) < 0) {
		unlink(tmp);
		fprintf(stderr, "stork export: %s\n", err);
		return STORK_EXIT_CHECKPOINT_BAD;
	}
	if (rename(tmp, argv[2]) < 0) {
		fprintf(stderr, "stork export: cannot rename %s to %s: %s\n", tmp, argv[2],
			strerror(errno));
		unlink(tmp);
		return STORK_EXIT_INTERNAL;
	}
	printf("exported %s to %s\n", dir, argv[2]);
	return 0;
}
