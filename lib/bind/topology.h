/*
 * lib/bind/topology.h - the node's hardware as binding needs it: cores, NUMA nodes
 * and NVIDIA GPUs, read with hwloc from the machine or from an XML file.
 *
 * GPU numbering. GPU i of a topology is the i-th NVIDIA PCI device (vendor
 * 0x10de, PCI class 0x03xx: VGA or 3D controller) in PCI bus id order
 * (domain, bus, device, function): the order CUDA uses under
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, and the order of /dev/nvidiaN on the usual
 * driver setups, which is what Slurm's gres.conf File=/dev/nvidia[0-N] lists.
 * A test topology declares a fake GPU as a PCIDev object with
 * pci_type="0302 [10de:XXXX] ..." placed (behind a host bridge) under the
 * Package or Group whose NUMA node it is local to; see t/data/topo/gen-topo.py.
 *
 * A GPU's locality is the NUMA node of its nearest non-I/O ancestor when that
 * ancestor covers exactly one NUMA node; otherwise (a GPU hanging off the
 * machine root, or a package with several NUMA nodes) the locality is the
 * ancestor's cpuset and no NUMA node is preferred.
 */
#ifndef STORK_TOPOLOGY_H
#define STORK_TOPOLOGY_H

#include <stddef.h>
#include <hwloc.h>

struct topo;

/*
 * Load the topology from xml_path (an hwloc XML file) or, when xml_path is
 * NULL, by probing this machine. Returns NULL on failure with a message that
 * names the file in err.
 */
struct topo *topo_load(const char *xml_path, char *err, size_t errlen);

void topo_free(struct topo *t);

/* The hwloc handle (owned by t). */
hwloc_topology_t topo_hwloc(const struct topo *t);

/* Number of NVIDIA GPUs found (see the numbering above). */
int topo_gpu_count(const struct topo *t);

/*
 * Locality of GPU i: *cpuset (owned by t) is the cpuset of its NUMA node, or
 * of its nearest non-I/O ancestor when that covers several NUMA nodes; *numa
 * is the NUMA node's OS index, or -1 when no single node is local.
 * Returns 0, or -1 when i is out of range.
 */
int topo_gpu_locality(const struct topo *t, int i, hwloc_const_cpuset_t *cpuset, int *numa);

/* OS index of the NUMA node whose cpuset contains all of set, or -1. */
int topo_numa_of(const struct topo *t, hwloc_const_cpuset_t set);

#endif
