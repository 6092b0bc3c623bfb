/*
 * t/fuzz/fuzz_ckpt_state.c - a checkpoint's state.json as a resume reads
 * it (daemon/engine/checkpoint/checkpoint.c): the step, the data position, the hashes, the
 * settings it was written under (ckpt_read_state), and the layout that
 * wrote it (ckpt_read_layout).
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/engine/checkpoint/checkpoint.h"

#include <limits.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX], err[1024];
	struct ckpt_state st;
	struct ckpt_layout l;

	fuzz_write(path, sizeof path, "step_00000004/state.json", data, size);
	*strrchr(path, '/') = '\0';
	ckpt_read_state(path, &st, err, sizeof err);
	ckpt_read_layout(path, &l, err, sizeof err);
	return 0;
}
