/*
 * t/unit/fake/scontrol.c - stands in for scontrol in check_slurm_job: it
 * records, into $FAKE_SCONTROL_REPORT, its arguments, which signals it was
 * started with blocked, and how many of its descriptors lead to the pipe
 * its stdout is (a descriptor leaked from the parent would be one more),
 * then answers like scontrol.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *report = getenv("FAKE_SCONTROL_REPORT");
	char line[256], out[256], target[256], path[300];
	FILE *status = fopen("/proc/self/status", "r"), *f;
	struct dirent *e;
	DIR *d;
	ssize_t n;
	int same = 0;

	if (!report || !status || !(f = fopen(report, "w")))
		return 2;
	for (int i = 1; i < argc; i++)
		fprintf(f, "arg %s\n", argv[i]);
	while (fgets(line, sizeof line, status))
		if (!strncmp(line, "SigBlk:", 7))
			fprintf(f, "sigblk %s", line + 8);
	n = readlink("/proc/self/fd/1", out, sizeof out - 1);
	out[n > 0 ? n : 0] = '\0';
	if ((d = opendir("/proc/self/fd"))) {
		while ((e = readdir(d))) {
			snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
			n = readlink(path, target, sizeof target - 1);
			if (n > 0) {
				target[n] = '\0';
				same += !strcmp(target, out);
			}
		}
		closedir(d);
	}
	fprintf(f, "pipe_fds %d\n", same);
	fclose(f);
	printf("Job %s requeued (fake)\n", argc > 2 ? argv[2] : "?");
	return 0;
}
