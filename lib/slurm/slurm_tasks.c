/*
 * lib/slurm/slurm_tasks.c - SLURM_STEP_TASKS_PER_NODE parsed (lib/slurm/slurm_tasks.h).
 */
#include "config.h"
#include "lib/slurm/slurm_tasks.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int slurm_tasks_per_node(const char *s, int *counts, int max)
{
	int n = 0;

	if (!s || !*s)
		return -1;
	while (*s) {
		char *end;
		long c = strtol(s, &end, 10), rep = 1;

		if (end == s || c < 0 || c > INT_MAX)
			return -1;
		s = end;
		if (strncmp(s, "(x", 2) == 0) {
			rep = strtol(s + 2, &end, 10);
			if (end == s + 2 || *end != ')' || rep < 1)
				return -1;
			s = end + 1;
		}
		for (long r = 0; r < rep; r++) {
			if (n >= max)
				return -1;
			counts[n++] = (int)c;
		}
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n;
}
