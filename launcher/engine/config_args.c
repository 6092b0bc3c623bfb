/*
 * launcher/engine/config_args.c - a command's CONFIG and its overrides
 * (commands.h): stork bench train and stork plan read them alike.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "lib/config/stork_config.h"

#include <getopt.h>

int engine_config_load(struct stork_config *cfg, int argc, char **argv,
		       const struct option *longopts, int config_at, char *err, size_t errlen)
{
	int c;

	if (config_load(cfg, argv[config_at], err, errlen) < 0)
		return -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		if (c == 's' && config_set(cfg, optarg, err, errlen) < 0)
			return -1;
	for (int i = config_at + 1; i < argc; i++)
		if (config_set(cfg, argv[i], err, errlen) < 0)
			return -1;
	return config_validate(cfg, err, errlen);
}
