/*
 * launcher/run/run_name.c - see run_name.h.
 */
#include "config.h"
#include "launcher/run/run_name.h"

#include "lib/run/rundir.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Programs that run another, named by their first argument that is not an option. */
static bool runs_another(const char *base)
{
	static const char *const runners[] = { "python", "bash", "sh", "dash", "zsh", "node",
					       "perl", "ruby", "Rscript", "julia", "torchrun",
					       "env", "nice", "uv", "deepspeed", "accelerate", NULL };

	for (int i = 0; runners[i]; i++) {
		size_t n = strlen(runners[i]);

		/* python3, python3.11 */
		if (!strncmp(base, runners[i], n) && (!base[n] || isdigit((unsigned char)base[n])))
			return true;
	}
	return false;
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The word that names the program: past runners and their options;
 * python -m MODULE: MODULE (*module set). */
static const char *naming_word(char *const *argv, size_t argc, bool *module)
{
	size_t i = 0;

	*module = false;
	while (i + 1 < argc && runs_another(base_of(argv[i]))) {
		size_t j = i + 1;

		/* options, and env's NAME=VALUE */
		while (j < argc && (argv[j][0] == '-' || strchr(argv[j], '=')) &&
		       strcmp(argv[j], "-m"))
			j++;
		if (j + 1 < argc && !strcmp(argv[j], "-m")) {
			*module = true;
			return argv[j + 1];
		}
		if (j < argc && !strcmp(argv[j - 1], "-c"))
			return argv[i]; /* python -c CODE, sh -c SCRIPT: the runner's name */
		if (j >= argc)
			break;
		i = j;
	}
	return argv[i];
}

/* word's base (a file's without its extension) in the characters a run name may hold. */
static void name_of(const char *word, bool module, char *out, size_t len)
{
	const char *b = module ? word : base_of(word), *dot = strrchr(b, '.');
	size_t n = !module && dot && dot != b ? (size_t)(dot - b) : strlen(b), k = 0;

	for (size_t i = 0; i < n && k + 1 < len; i++)
		out[k++] = isalnum((unsigned char)b[i]) || strchr("-_.", b[i]) ? b[i] : '_';
	out[k] = '\0';
	if (!k || !strcmp(out, ".") || !strcmp(out, ".."))
		snprintf(out, len, "program");
}

int program_run_name(char *const *argv, size_t argc, const char *runs_root, char *out,
		     size_t len)
{
	const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
	char name[128], path[4096];
	struct stat st;

	bool module = false;
	const char *word = argc ? naming_word(argv, argc, &module) : "program";

	name_of(word, module, name, sizeof name);
	if (job && *job) {
		long s = step ? strtol(step, NULL, 10) : 0;

		return (size_t)(s > 0 ? snprintf(out, len, "%s.step%ld", name, s) :
					snprintf(out, len, "%s", name)) < len ? 0 : -1;
	}
	for (int n = 1; n < 100000; n++) {
		if ((size_t)(n == 1 ? snprintf(out, len, "%s", name) :
				      snprintf(out, len, "%s.%d", name, n)) >= len ||
		    rundir_path(path, sizeof path, runs_root, out) < 0)
			return -1;
		if (lstat(path, &st) < 0)
			return 0;
	}
	return -1;
}
