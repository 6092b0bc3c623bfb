/*
 * plugins/plugin_args.h - the plugin's plugstack.conf arguments:
 *   default=on|off  port_base=N  port_range=N  topology=PATH
 * Parsed strictly: an unknown key or a bad value is an error that names it.
 * (The options users give srun are stork_args.h; stork.yaml, the training
 * configuration, is lib/config/stork_config.h.)
 */
#ifndef STORK_PLUGINS_PLUGIN_ARGS_H
#define STORK_PLUGINS_PLUGIN_ARGS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define STORK_DEFAULT_PORT_BASE 29500
#define STORK_DEFAULT_PORT_RANGE 1000

struct plugin_args {
	bool default_on;		/* bind (auto) and set the environment without options */
	char topology[PATH_MAX];	/* hwloc XML file; "" probes the machine */
	unsigned port_base;		/* first MASTER_PORT */
	unsigned port_range;		/* number of MASTER_PORTs */
};

/*
 * Fill args from plugstack arguments av[0..ac-1], defaults first. Returns 0,
 * or -1 with a message naming the argument in err.
 */
int plugin_args_parse(struct plugin_args *args, int ac, char **av, char *err, size_t errlen);

#endif
