/*
 * daemon/storkd.c - storkd, the per-node training daemon.
 *
 * Started by `stork run` (one per node, or one per task); runs one worker
 * thread per local rank. This file holds main(): option parsing and handing
 * over to the training engine.
 */
#include "config.h"
#include "kernels/device.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/version.h"

#include <stdio.h>
#include <string.h>

static void print_version(void)
{
	printf("storkd %s (git %s, %s)\n", stork_version(), stork_git_describe(),
	       stork_compiler());
	printf("backends: %s; %s, %d device(s) visible\n", kernels_cpu_backend_name(),
	       kernels_cuda_versions(), kernels_cuda_device_count());
}

int main(int argc, char **argv)
{
	stork_log_init("storkd", STORK_LOG_INFO);
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		print_version();
		return STORK_EXIT_OK;
	}
	fprintf(stderr, "usage: storkd --version\n"
			"storkd is started by 'stork run'; see storkd(8).\n");
	return STORK_EXIT_USAGE;
}
