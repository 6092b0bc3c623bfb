/*
 * lib/bind/topology.c - load an hwloc topology and index its NVIDIA GPUs.
 *
 * The topology keeps PCI devices (hwloc's "important" I/O filter) so that
 * GPUs and their locality are visible; GPUs are collected once at load time
 * and sorted by PCI bus id. See lib/bind/topology.h for the numbering contract.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/topology.h"

#define NVIDIA_VENDOR_ID 0x10de
#define PCI_CLASS_DISPLAY 0x03

struct topo_gpu {
	hwloc_obj_t pci;
	hwloc_const_cpuset_t cpuset;
	int numa;
	char busid[32];
};

struct topo {
	hwloc_topology_t hw;
	struct topo_gpu *gpus;
	int ngpus;
};

static int is_nvidia_gpu(hwloc_obj_t o)
{
	return o->attr->pcidev.vendor_id == NVIDIA_VENDOR_ID &&
	       (o->attr->pcidev.class_id >> 8) == PCI_CLASS_DISPLAY;
}

static int cmp_busid(const void *a, const void *b)
{
	const struct hwloc_pcidev_attr_s *x = &((const struct topo_gpu *)a)->pci->attr->pcidev;
	const struct hwloc_pcidev_attr_s *y = &((const struct topo_gpu *)b)->pci->attr->pcidev;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	if (x->bus != y->bus)
		return x->bus < y->bus ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (int)x->func - (int)y->func;
}

/* Locality of one GPU: its NUMA node if a single one is local, else the ancestor. */
static void gpu_locality(hwloc_topology_t hw, struct topo_gpu *g)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, g->pci);
	hwloc_obj_t numa = NULL;

	g->cpuset = anc->cpuset;
	g->numa = -1;
	if (anc->nodeset != NULL && hwloc_bitmap_weight(anc->nodeset) == 1)
		numa = hwloc_get_numanode_obj_by_os_index(hw, (unsigned)hwloc_bitmap_first(anc->nodeset));
	if (numa != NULL) {
		g->cpuset = numa->cpuset;
		g->numa = (int)numa->os_index;
	}
}

static int collect_gpus(struct topo *t)
{
	hwloc_obj_t o = NULL;
	int n = 0;

	while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL)
		n += is_nvidia_gpu(o);
	t->gpus = calloc(n > 0 ? (size_t)n : 1, sizeof(*t->gpus));
	if (t->gpus == NULL)
		return -1;
	while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL) {
		if (!is_nvidia_gpu(o))
			continue;
		t->gpus[t->ngpus++].pci = o;
	}
	qsort(t->gpus, (size_t)t->ngpus, sizeof(*t->gpus), cmp_busid);
	for (int i = 0; i < t->ngpus; i++) {
		const struct hwloc_pcidev_attr_s *p = &t->gpus[i].pci->attr->pcidev;

		snprintf(t->gpus[i].busid, sizeof(t->gpus[i].busid), "%04x:%02x:%02x.%x",
			 p->domain, p->bus, p->dev, p->func);
		gpu_locality(t->hw, &t->gpus[i]);
	}
	return 0;
}

struct topo *topo_load(const char *xml_path, char *err, size_t errlen)
{
	struct topo *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		snprintf(err, errlen, "out of memory loading the topology");
		return NULL;
	}
	if (hwloc_topology_init(&t->hw) < 0) {
		snprintf(err, errlen, "hwloc_topology_init: %s", strerror(errno));
		free(t);
		return NULL;
	}
	hwloc_topology_set_io_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (xml_path != NULL && hwloc_topology_set_xml(t->hw, xml_path) < 0) {
		snprintf(err, errlen, "topology file %s: cannot read it as hwloc XML (%s); "
			 "write one with `lstopo --of xml FILE`", xml_path, strerror(errno));
		goto fail;
	}
	if (hwloc_topology_load(t->hw) < 0) {
		snprintf(err, errlen, "%s%s: hwloc could not load the topology (%s)",
			 xml_path ? "topology file " : "this machine", xml_path ? xml_path : "",
			 strerror(errno));
		goto fail;
	}
	if (collect_gpus(t) < 0) {
		snprintf(err, errlen, "out of memory indexing GPUs");
		goto fail;
	}
	return t;
fail:
	topo_free(t);
	return NULL;
}

void topo_free(struct topo *t)
{
	if (t == NULL)
		return;
	hwloc_topology_destroy(t->hw);
	free(t->gpus);
	free(t);
}

hwloc_topology_t topo_hwloc(const struct topo *t)
{
	return t->hw;
}

int topo_gpu_count(const struct topo *t)
{
	return t->ngpus;
}

int topo_gpu_locality(const struct topo *t, int i, hwloc_const_cpuset_t *cpuset, int *numa)
{
	if (i < 0 || i >= t->ngpus)
		return -1;
	*cpuset = t->gpus[i].cpuset;
	*numa = t->gpus[i].numa;
	return 0;
}

int topo_numa_of(const struct topo *t, hwloc_const_cpuset_t set)
{
	hwloc_obj_t numa = NULL;

	if (hwloc_bitmap_iszero(set))
		return -1;
	while ((numa = hwloc_get_next_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, numa)) != NULL) {
		if (hwloc_bitmap_isincluded(set, numa->cpuset))
			return (int)numa->os_index;
	}
	return -1;
}
