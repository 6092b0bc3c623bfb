/*
 * t/fuzz/fuzz_config.c - stork.yaml (lib/config/stork_config.c): the input as a
 * configuration, loaded and validated. A valid one is written as the
 * resolved YAML of a run directory and loaded again, which must hold the
 * promise of lib/config/stork_config.h, else the harness aborts: the same text
 * when written again, and an equal configuration unless a URL's secret was
 * left out of the text ("<redacted>").
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "lib/config/stork_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[2048];

/* Load text as a configuration and validate it; 0 when both pass, else -1 with err. */
static int load(struct stork_config *c, const char *text, const char *name)
{
	if (config_load_string(c, text, name, err, sizeof err) < 0)
		return -1;
	return config_validate(c, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stork_config c, again;
	char *text = malloc(size + 1), *yaml = NULL, *yaml2 = NULL;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	if (load(&c, text, "fuzz.yaml") == 0) {
		if (!(yaml = config_to_yaml(&c)))
			abort();
		if (load(&again, yaml, "resolved.yaml") < 0 || !(yaml2 = config_to_yaml(&again)) ||
		    strcmp(yaml, yaml2) || (!strstr(yaml, "<redacted>") && !config_equal(&c, &again))) {
			fprintf(stderr, "fuzz_config: the resolved configuration does not read back "
				"the same (%s):\n%s\nwritten again:\n%s\n", err, yaml,
				yaml2 ? yaml2 : "");
			abort();
		}
		config_free(&again);
	}
	config_free(&c);
	free(yaml);
	free(yaml2);
	free(text);
	return 0;
}
