/*
 * plugins/stork_config.h - the plugin's plugstack.conf arguments:
 *   default=on|off  port_base=N  port_range=N  topology=PATH
 * Parsed strictly: an unknown key or a bad value is an error that names it.
 */
#ifndef STORK_PLUGIN_STORK_CONFIG_H
#define STORK_PLUGIN_STORK_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define STORK_DEFAULT_PORT_BASE 29500
#define STORK_DEFAULT_PORT_RANGE 1000

struct stork_config {
	bool default_on;		/* bind (auto) and set the environment without options */
	char topology[PATH_MAX];	/* hwloc XML file; "" probes the machine */
	unsigned port_base;		/* first MASTER_PORT */
	unsigned port_range;		/* number of MASTER_PORTs */
};

/*
 * Fill config from plugstack arguments av[0..ac-1], defaults first. Returns 0,
 * or -1 with a message naming the argument in err.
 */
int stork_config_parse(struct stork_config *config, int ac, char **av, char *err, size_t errlen);

#endif
