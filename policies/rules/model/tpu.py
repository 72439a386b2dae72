"""TPU facts the finders need: a catalog-shaped view of one TPU host, and slice shapes."""
from __future__ import annotations

import re
from typing import Any

from aicluster.catalog import Accelerator, InstanceType, TpuGeneration, load_catalog

_TOPOLOGY = re.compile(r"\d+(x\d+)+")


def tpu_instance(gen: TpuGeneration, chips_per_host: int, name: str) -> InstanceType:
    """A catalog-shaped view of one TPU host, so the balance model can count its chips and HBM.
    The host network is not a fact we hold: it is left unbounded (inf) rather than guessed."""
    chip = Accelerator(model=f"TPU {gen.name}", vendor="google", kind="tpu", gres_type="tpu",
                       memory_mib=int(gen.hbm_gib_per_chip * 1024), bf16_tflops=gen.bf16_tflops,
                       hbm_bandwidth_gbs=gen.hbm_bandwidth_gbs, source=gen.source)
    return InstanceType(name=name, cloud="gcp", accelerator=chip, accelerator_count=chips_per_host,
                        vcpu=None, memory_gib=None, network_gbps=float("inf"), source=gen.source)


def tpu_host(machine: str) -> InstanceType | None:
    """The TPU host of a GKE machine type (ct5p-hightpu-4t ...); the catalog's last match wins."""
    found = None
    for gen in load_catalog().tpus.values():
        for chips, mt in gen.machine_types.items():
            if mt == machine:
                found = tpu_instance(gen, chips, machine)
    return found


def hosts(gen: TpuGeneration, chips: int) -> tuple[int, int]:
    """(hosts, chips per host) of a slice: single-host shapes hold all chips, multi-host use 4."""
    if chips in gen.single_host_topologies.values():
        return 1, chips
    return max(1, chips // 4), 4


def topology_chips(topology: Any) -> int | None:
    """Chips of a topology such as 4x4x8."""
    if not isinstance(topology, str) or not _TOPOLOGY.fullmatch(topology):
        return None
    out = 1
    for part in topology.split("x"):
        out *= int(part)
    return out
