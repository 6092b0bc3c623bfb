/*
 * launcher/commands.h - the subcommands of `stork`. Each takes argc/argv with
 * argv[0] being the subcommand's own name and returns a process exit code.
 */
#ifndef STORK_LAUNCHER_COMMANDS_H
#define STORK_LAUNCHER_COMMANDS_H

#include "lib/exit_codes.h"

struct stork_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

#endif
