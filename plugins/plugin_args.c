/*
 * plugins/plugin_args.c - parse the plugstack.conf arguments of spank_stork.so
 * (see plugin_args.h and spank_stork(8)). No Slurm types: unit-tested directly.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "plugins/plugin_args.h"

static const char *value_of(const char *arg, const char *key)
{
	size_t n = strlen(key);

	return strncmp(arg, key, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

static int parse_one(struct plugin_args *c, const char *arg, char *err, size_t errlen)
{
	const char *v;
	int n;

	if ((v = value_of(arg, "default")) != NULL) {
		if ((n = bind_parse_bool(v)) < 0)
			goto bad;
		c->default_on = n;
	} else if ((v = value_of(arg, "topology")) != NULL) {
		n = snprintf(c->topology, sizeof(c->topology), "%s", v);
		if (*v == '\0' || n < 0 || (size_t)n >= sizeof(c->topology))
			goto bad;
	} else if ((v = value_of(arg, "port_base")) != NULL) {
		if ((n = bind_parse_uint(v, 65535)) < 1)
			goto bad;
		c->port_base = (unsigned)n;
	} else if ((v = value_of(arg, "port_range")) != NULL) {
		if ((n = bind_parse_uint(v, 65535)) < 1)
			goto bad;
		c->port_range = (unsigned)n;
	} else {
		snprintf(err, errlen, "unknown plugstack argument '%s' (valid: default=on|off, "
			 "topology=PATH, port_base=N, port_range=N)", arg);
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "plugstack argument '%s': invalid value '%s' (expected %s)", arg, v,
		 value_of(arg, "default") ? "on or off" :
		 value_of(arg, "topology") ? "a file path" : "an integer from 1 to 65535");
	return -1;
}

int plugin_args_parse(struct plugin_args *args, int ac, char **av, char *err, size_t errlen)
{
	memset(args, 0, sizeof(*args));
	args->default_on = true;
	args->port_base = STORK_DEFAULT_PORT_BASE;
	args->port_range = STORK_DEFAULT_PORT_RANGE;
	for (int i = 0; i < ac; i++)
		if (parse_one(args, av[i], err, errlen) < 0)
			return -1;
	if (args->port_base + args->port_range - 1 > 65535) {
		snprintf(err, errlen, "plugstack arguments port_base=%u port_range=%u reach past port 65535",
			 args->port_base, args->port_range);
		return -1;
	}
	return 0;
}
