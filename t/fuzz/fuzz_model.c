/*
 * t/fuzz/fuzz_model.c - an llm.c model file (daemon/engine/model/), as
 * model.init_from and a checkpoint's model.bin are read, its bytes as the
 * fuzzer makes them; what is read of it: t/fuzz/fuzz_model.h.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "t/fuzz/fuzz_model.h"

#include <limits.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX];

	fuzz_quiet();
	fuzz_write(path, sizeof path, "model.bin", data, size);
	fuzz_load_model(path);
	return 0;
}
