"""Cloud TPU slices: a pool's `tpu: {type, topology}` -> chips, hosts and the host machine type.

Pure (no Pulumi). Facts come from catalog/tpu.yaml: a topology is valid only when the catalog lists
it for the generation; a single-host shape runs on the machine type with that many chips, every
multi-host shape on 4-chip hosts (Cloud TPU and GKE docs: v5p 4x4x4 = 64 chips on 16 hosts of
ct5p-hightpu-4t; v6e 8x8 = 64 chips on 16 VMs of ct6e-standard-4t). A TPU host is also given a
catalog-shaped `InstanceType`, so the balance model, the plan and the Slurm design count its chips,
HBM and TFLOPS the same way they count GPUs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from aicluster.catalog import Accelerator, InstanceType, TpuGeneration

MULTI_HOST_CHIPS = 4        # chips per host of every multi-host slice (tpu.yaml header)
TPU_RESOURCE = "google.com/tpu"


@dataclass(frozen=True)
class TpuSlice:
    """One TPU slice: its generation and topology."""
    generation: TpuGeneration
    topology: str               # 4x4x4
    chips: int                  # 64
    hosts: int                  # 16
    chips_per_host: int         # 4
    machine_type: str           # ct5p-hightpu-4t

    @property
    def name(self) -> str:
        return self.generation.name

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def gke_accelerator(self) -> str:
        return self.generation.gke_accelerator

    @property
    def tpu_vm_config_type(self) -> str:
        """acceleratorConfig.type of a Cloud TPU VM (tpu.googleapis.com v2): V4, V5P, V5LITE_POD, V6E."""
        return {"v4": "V4", "v5p": "V5P", "v5e": "V5LITE_POD", "v6e": "V6E"}[self.generation.name]

    def describe(self) -> str:
        hosts = "1 host" if self.hosts == 1 else f"{self.hosts} hosts"
        return f"TPU {self.name} {self.topology}: {self.chips} chips on {hosts} of {self.machine_type}"


def topology_chips(topology: str) -> int:
    return math.prod(int(part) for part in topology.split("x"))


def tpu_slice(generation: TpuGeneration, topology: str) -> TpuSlice:
    """The slice of a topology the catalog lists (ValueError otherwise; the spec checks first)."""
    if topology not in generation.topologies:
        raise ValueError(f"{topology} is not a {generation.name} topology")
    chips = topology_chips(topology)
    if topology in generation.single_host_topologies:
        per_host = generation.single_host_topologies[topology]
    else:
        per_host = MULTI_HOST_CHIPS
    return TpuSlice(generation=generation, topology=topology, chips=chips, hosts=chips // per_host,
                    chips_per_host=per_host, machine_type=generation.machine_types[per_host])


def topology_problem(generation: TpuGeneration, topology: str) -> str | None:
    """Why a topology is not a slice of this generation (with the allowed shapes), or None."""
    if topology in generation.topologies:
        return None
    dims = "x".join(["N"] * generation.ici_dims)
    return (f"a {generation.name} slice topology ({generation.ici_dims}D, {dims}): "
            f"{', '.join(generation.topologies)}")


# host_instance names a TPU host's chips `TPU <generation>`; host_generation reads it back.
_TPU_MODEL_PREFIX = "TPU "


def host_generation(instance: InstanceType) -> str | None:
    """The TPU generation (catalog.tpus key, `v5p`) of a host made by host_instance; None for any
    other instance type."""
    model = instance.accelerator.model
    return model.removeprefix(_TPU_MODEL_PREFIX) if instance.accelerator.kind == "tpu" else None


def host_instance(tpu: TpuSlice) -> InstanceType:
    """A catalog-shaped view of one TPU host: chips as accelerators (HBM and BF16 TFLOPS per chip),
    vCPUs and memory where the catalog has them, the host's data-center network (DCN) as its
    network; TPU slices talk over ICI, so they have no GPU NICs."""
    gen = tpu.generation
    chip = Accelerator(model=f"{_TPU_MODEL_PREFIX}{gen.name}", vendor="google", kind="tpu", gres_type="tpu",
                       memory_mib=int(gen.hbm_gib_per_chip * 1024), bf16_tflops=gen.bf16_tflops,
                       hbm_bandwidth_gbs=gen.hbm_bandwidth_gbs, source=gen.source, fp8_tflops=gen.fp8_tflops)
    vcpu, memory = gen.hosts.get(tpu.machine_type, (None, None))
    network = gen.dcn_gbps_per_chip * tpu.chips_per_host if gen.dcn_gbps_per_chip else 0.0
    return InstanceType(name=tpu.machine_type, cloud="gcp", accelerator=chip, accelerator_count=tpu.chips_per_host,
                        vcpu=vcpu, memory_gib=memory, network_gbps=float(network),
                        # No cores / threads: no source gives a TPU host's CPU topology, so Slurm is
                        # told CPUs only (which slurmd accepts whatever the socket layout).
                        source=f"{gen.source}; {gen.host_source}".rstrip("; "))
