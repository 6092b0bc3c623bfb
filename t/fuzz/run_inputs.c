/*
 * t/fuzz/run_inputs.c - a main() for a harness without libFuzzer: calls
 * LLVMFuzzerTestOneInput on every file given (a directory: on each file in
 * it, by name), so that `make check` runs the seed corpus and the inputs
 * that once crashed (t/fuzz/regress/NAME/crash-WHAT) through a gcc build,
 * with or without sanitizers. Prints one line per file to stdout when
 * STORK_FUZZ_VERBOSE is set; a crash or a sanitizer report ends it.
 *
 *   t/fuzz/input_NAME FILE-OR-DIR...
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The inputs can be larger than any text file: read them whole, bytes as they are. */
static int run_file(const char *path, long *count)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "run_inputs: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			unsigned char *more = realloc(buf, cap = cap ? 2 * cap : 4096);
			if (!more) {
				fprintf(stderr, "run_inputs: out of memory reading %s\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = more;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	if (getenv("STORK_FUZZ_VERBOSE"))
		printf("%s (%zu bytes)\n", path, len);
	/* an exact-size copy, so that ASan sees a read past the input's end */
	unsigned char *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	(*count)++;
	return 0;
}

static int skip_dots(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

static int run_dir(const char *path, long *count)
{
	struct dirent **list;
	char file[4096];
	int n = scandir(path, &list, skip_dots, alphasort), rc = 0;

	if (n < 0) {
		fprintf(stderr, "run_inputs: cannot read %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(file, sizeof file, "%s/%s", path, list[i]->d_name);
		if (rc == 0)
			rc = run_file(file, count);
		free(list[i]);
	}
	free(list);
	return rc;
}

int main(int argc, char **argv)
{
	long count = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE-OR-DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "run_inputs: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if ((S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i], &count)) < 0)
			return 1;
	}
	printf("%ld inputs\n", count);
	return 0;
}
