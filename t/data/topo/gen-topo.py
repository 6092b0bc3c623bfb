#!/usr/bin/env python3
"""Writes the hwloc XML topologies the binding tests read (t/data/topo/*.xml).

Each node is described by its packages; a package holds one NUMA node, its
cores (each with one or two PUs, numbered as Linux numbers them: the second
hyperthread of core c is PU c + total cores) and the NVIDIA GPUs attached to
it, each behind its own host bridge. A GPU is a PCI device with vendor 0x10de
and class 0x0302 (3D controller); its bus id decides its CUDA index under
CUDA_DEVICE_ORDER=PCI_BUS_ID. Run from anywhere: ./gen-topo.py writes next to
itself. The files are committed; this script documents how they were made.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def mask(bits):
    """hwloc bitmap string: comma-separated 32-bit words, most significant first."""
    v = 0
    for b in bits:
        v |= 1 << b
    words = []
    while True:
        words.append(v & 0xffffffff)
        v >>= 32
        if v == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def topology(name, packages, smt):
    ncores = sum(len(p["cores"]) for p in packages)
    allpus = [c + t * ncores for p in packages for c in p["cores"] for t in range(smt)]
    allnodes = list(range(len(packages)))
    gp = [1]

    def gpi():
        gp[0] += 1
        return gp[0]

    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
           '<topology version="2.0">']
    m = mask(allpus)
    n = mask(allnodes)
    out.append(f'  <object type="Machine" os_index="0" cpuset="{m}" complete_cpuset="{m}" '
               f'allowed_cpuset="{m}" nodeset="{n}" complete_nodeset="{n}" allowed_nodeset="{n}" gp_index="1">')
    out.append(f'    <info name="StorkTestTopology" value="{name}"/>')
    for pi, p in enumerate(packages):
        pus = [c + t * ncores for c in p["cores"] for t in range(smt)]
        pm, nm = mask(pus), mask([pi])
        out.append(f'    <object type="Package" os_index="{pi}" cpuset="{pm}" complete_cpuset="{pm}" '
                   f'nodeset="{nm}" complete_nodeset="{nm}" gp_index="{gpi()}">')
        out.append(f'      <object type="NUMANode" os_index="{pi}" cpuset="{pm}" complete_cpuset="{pm}" '
                   f'nodeset="{nm}" complete_nodeset="{nm}" gp_index="{gpi()}" local_memory="68719476736"/>')
        for c in p["cores"]:
            cpus = [c + t * ncores for t in range(smt)]
            cm = mask(cpus)
            out.append(f'      <object type="Core" os_index="{c}" cpuset="{cm}" complete_cpuset="{cm}" '
                       f'nodeset="{nm}" complete_nodeset="{nm}" gp_index="{gpi()}">')
            for pu in cpus:
                um = mask([pu])
                out.append(f'        <object type="PU" os_index="{pu}" cpuset="{um}" complete_cpuset="{um}" '
                           f'nodeset="{nm}" complete_nodeset="{nm}" gp_index="{gpi()}"/>')
            out.append('      </object>')
        for bus in p.get("gpus", []):
            out.append(f'      <object type="Bridge" gp_index="{gpi()}" bridge_type="0-1" depth="0" '
                       f'bridge_pci="0000:[{bus:02x}-{bus:02x}]">')
            out.append(f'        <object type="PCIDev" gp_index="{gpi()}" pci_busid="0000:{bus:02x}:00.0" '
                       f'pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="0.000000"/>')
            out.append('      </object>')
        out.append('    </object>')
    out.append('  </object>')
    out.append('</topology>')
    with open(os.path.join(HERE, name + ".xml"), "w") as f:
        f.write("\n".join(out) + "\n")


# 8 GPUs, two sockets of 8 cores with 2 hyperthreads each: GPUs 0-3 (buses
# 07, 0f, 47, 4e) on NUMA 0 (cores 0-7, PUs 0-7 and 16-23), GPUs 4-7 (buses
# 87, 90, b7, bd) on NUMA 1 (cores 8-15, PUs 8-15 and 24-31).
topology("gpu8-2socket", [
    {"cores": range(0, 8), "gpus": [0x07, 0x0f, 0x47, 0x4e]},
    {"cores": range(8, 16), "gpus": [0x87, 0x90, 0xb7, 0xbd]},
], smt=2)

# 4 GPUs on one socket of 16 cores, no hyperthreads.
topology("gpu4-1socket", [
    {"cores": range(0, 16), "gpus": [0x17, 0x31, 0xb1, 0xca]},
], smt=1)

# No GPU; two NUMA nodes of 4 cores each (PUs 0-3 and 4-7).
topology("cpu-2numa", [
    {"cores": range(0, 4)},
    {"cores": range(4, 8)},
], smt=1)

# The test cluster's nodes: this machine's 2 real cores (PUs 0-1, one NUMA
# node) and the 4 fake GPUs of gres.conf.
topology("testcluster-2core-4gpu", [
    {"cores": range(0, 2), "gpus": [0x01, 0x02, 0x03, 0x04]},
], smt=1)
