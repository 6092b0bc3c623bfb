/*
 * t/unit/fake/scontrol.c - stands in for scontrol in check_slurm_job: it
 * records, into $FAKE_SCONTROL_REPORT, its arguments, which signals it was
 * started with blocked, what its stdout and stderr lead to, and every other
 * descriptor it was started with but stdin ("fd N TARGET": one inherited
 * from the parent, which should have none to give), then answers like
 * scontrol. The descriptors are listed before it opens anything itself.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *report = getenv("FAKE_SCONTROL_REPORT");
	char fds[4096] = "", line[256], target[256], path[300];
	size_t used = 0;
	struct dirent *e;
	FILE *status, *f;
	DIR *d;

	if (!report || !(d = opendir("/proc/self/fd")))
		return 2;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		ssize_t n;

		if (e->d_name[0] == '.' || fd == 0 || fd == dirfd(d))
			continue;
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		n = readlink(path, target, sizeof target - 1);
		target[n > 0 ? n : 0] = '\0';
		if (used < sizeof fds)
			used += (size_t)snprintf(fds + used, sizeof fds - used, "%s %d %s\n",
						 fd == 1 ? "stdout" : fd == 2 ? "stderr" : "fd", fd,
						 target);
	}
	closedir(d);
	if (!(status = fopen("/proc/self/status", "r")) || !(f = fopen(report, "w")))
		return 2;
	for (int i = 1; i < argc; i++)
		fprintf(f, "arg %s\n", argv[i]);
	while (fgets(line, sizeof line, status))
		if (!strncmp(line, "SigBlk:", 7))
			fprintf(f, "sigblk %s", line + 8);
	fclose(status);
	fputs(fds, f);
	fclose(f);
	printf("Job %s requeued (fake)\n", argc > 2 ? argv[2] : "?");
	return 0;
}
