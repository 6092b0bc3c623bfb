/*
 * launcher/engine/plan_cpus.c - the cores `stork plan` may measure on (this
 * process's CPU affinity) and the pinning of a probe's thread to one of
 * them (plan.h). Below the probes (plan_probe.c, plan_link.c) and the
 * figures they feed (plan_figures.c).
 */
#include "config.h"
#include "launcher/engine/plan.h"

#include <pthread.h>
#include <sched.h>

int plan_cores(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 ?
		       CPU_COUNT(&set) : 1;
}

int plan_allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof set, &set) < 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

void plan_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
