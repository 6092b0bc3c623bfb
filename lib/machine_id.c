/*
 * lib/machine_id.c - see machine_id.h.
 */
#include "config.h"
#include "lib/machine_id.h"

#include <stdio.h>
#include <unistd.h>

uint64_t machine_id(void)
{
	char id[64] = "", host[256] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	uint64_t h = 0xcbf29ce484222325ULL;

	if (f) {
		if (!fgets(id, sizeof id, f))
			id[0] = 0;
		fclose(f);
	}
	if (!id[0])     /* no boot id: fall back to the host name */
		gethostname(host, sizeof host);
	for (const char *p = id[0] ? id : host; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	return h;
}
