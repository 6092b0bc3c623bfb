/*
 * launcher/engine/check.c - `stork check`: what this node offers a training run,
 * before a job is submitted: the build, the CPU backend, and the GPUs
 * (driver, CUDA and NCCL versions, one line per device, and a one-float
 * NCCL all-reduce over all of them).
 *
 * Exit status: 0 when every check passed or there is no GPU to check
 * (a CPU node is a valid node), 20 when the GPUs are there but the
 * all-reduce failed (the rank_failed code: a run would fail the same way).
 */
#include "config.h"
#include "launcher/commands.h"
#include "launcher/engine/commands.h"

#include "kernels/device.h"
#include "lib/exit_codes.h"
#include "lib/version.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int cmd_check(int argc, char **argv)
{
	int rc;

	if (argc != 1) {
		bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");

		fprintf(help ? stdout : stderr, "%s", CHECK_USAGE);
		return help ? STORK_EXIT_OK : STORK_EXIT_USAGE;
	}
	printf("stork %s (git %s, %s)\n", stork_version(), stork_git_describe(), stork_compiler());
	printf("cpu: %s\n", kernels_cpu_backend_name());
	rc = kernels_cuda_check(stdout);
	if (rc == 1)
		printf("gpus: none; runs with run.device: auto train on the CPU\n");
	fflush(stdout);
	return rc < 0 ? STORK_EXIT_RANK_FAILED : STORK_EXIT_OK;
}
