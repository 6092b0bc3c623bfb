/*
 * lib/machine_id.h - which machine this process runs on, as a number that
 * is the same in every container and namespace of one kernel boot: two
 * Slurm "nodes" of a test cluster on one machine (each with its own host
 * name and /tmp) give the same number, two machines different ones.
 *
 * UCX uses it to send data to a peer on the same machine through shared
 * memory; slurm_env.json records it for each node, so that `stork plan
 * --check` knows which nodes shared their cores.
 */
#ifndef STORK_LIB_MACHINE_ID_H
#define STORK_LIB_MACHINE_ID_H

#include <stdint.h>

/*
 * FNV-1a 64 of the kernel's boot id (/proc/sys/kernel/random/boot_id), or
 * of the host name where there is none.
 */
uint64_t machine_id(void);

#endif
