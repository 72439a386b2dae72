"""The model's types: a pool of accelerated nodes, its fabric and placement, a filesystem, the cluster."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from aicluster.design.balance import FilesystemShape, PoolShape, WorkloadShape
from aicluster.catalog import InstanceType

from .._props import number
from .index import Index


@dataclass
class Fabric:
    """A pool's fabric, as the policy pack's model sees it."""
    wired: int = 0                      # AWS: EFA devices on distinct EFA cards; GCP: GPU NICs
    layout: str = "none"                # efa-only | efa (older) | mixed | gpu-nics | none
    cards: tuple[int, ...] = ()         # AWS: network cards carrying an EFA device
    security_groups: list[Any] | None = field(default_factory=list)   # None: not resolvable
    detail: str = ""


@dataclass
class Placement:
    """A pool's placement, as the policy pack's model sees it."""
    group: str | None = None            # placement group / resource policy name
    strategy: str | None = None         # cluster | spread | partition | COLLOCATED | COMPACT | None
    verified: bool = True               # False: the group is not in this stack (cannot be read)
    reservation: str | None = None      # how a reservation / capacity block fixes the placement

    @property
    def compact(self) -> bool:
        return (self.strategy or "").lower() in ("cluster", "collocated", "compact")


@dataclass
class Pool:
    """One node pool, as the policy pack's model sees it."""
    key: str
    cloud: str
    anchor: Any                         # the resource violations point at
    instance: InstanceType
    instance_types: tuple[str, ...]
    nodes: int | None
    nodes_source: str
    fabric: Fabric
    placement: Placement
    zones: set[str]
    hints: dict[str, float]
    tpu: bool = False
    members: list[Any] = field(default_factory=list)

    @property
    def accelerators(self) -> int:
        return (self.nodes or 0) * self.instance.accelerator_count

    @property
    def fabric_capable(self) -> bool:
        """EFA on AWS, GPU NICs (TCPX, TCPXO, RDMA) on GCP; TPU slices use ICI, not a NIC fabric."""
        if self.tpu:
            return False
        return self.instance.efa_capable if self.cloud == "aws" else self.instance.gpu_nics > 0

    @property
    def multi_node(self) -> bool:
        return (self.nodes or 0) >= 2

    def label(self) -> str:
        n = "?" if self.nodes is None else str(self.nodes)
        return f"pool {self.key} ({n} x {self.instance.name})"

    def shape(self) -> PoolShape:
        return PoolShape(self.key, self.instance, self.nodes or 0, self.fabric.wired)


@dataclass
class Filesystem:
    """One filesystem, as the policy pack's model sees it."""
    key: str
    resource: Any
    kind: str                           # fsx-lustre | gcp-lustre | filestore | efs
    parallel: bool
    capacity_gib: float | None
    throughput_mbps_per_tib: float | None
    zones: set[str]
    hints: dict[str, float]
    detail: str = ""

    @property
    def throughput_mbps(self) -> float | None:
        if self.capacity_gib is None or self.throughput_mbps_per_tib is None:
            return None
        return self.capacity_gib / 1024 * self.throughput_mbps_per_tib

    def shape(self) -> FilesystemShape:
        return FilesystemShape(self.key, self.capacity_gib or 0, self.throughput_mbps_per_tib or 0)


@dataclass
class Cluster:
    """The whole cluster, as the policy pack's model sees it."""
    index: Index
    pools: list[Pool]
    filesystems: list[Filesystem]
    heads: list[Any]

    @property
    def accelerator_pools(self) -> list[Pool]:
        return self.pools

    @property
    def sized_pools(self) -> list[Pool]:
        return [p for p in self.pools if p.nodes]

    @property
    def unsized_pools(self) -> list[Pool]:
        return [p for p in self.pools if p.nodes is None]

    @property
    def parallel_filesystems(self) -> list[Filesystem]:
        return [f for f in self.filesystems if f.parallel]

    @property
    def nodes(self) -> int:
        return sum(p.nodes or 0 for p in self.pools)

    def workload(self, config: Mapping[str, Any]) -> tuple[WorkloadShape | None, str]:
        """Workload hints: the policy config wins, then tags on pools and filesystems."""
        found: dict[str, float] = {}
        sources: dict[str, str] = {}
        config_keys = {"model_params_b": "modelParamsB", "checkpoint_interval_min": "checkpointIntervalMin",
                       "max_checkpoint_stall_pct": "maxCheckpointStallPct"}
        for field_name, key in config_keys.items():
            value = number(config.get(key))
            if value is not None:
                found[field_name], sources[field_name] = value, "policy config"
        for owner in [*self.pools, *self.filesystems]:
            for field_name, value in owner.hints.items():
                if field_name not in found:
                    found[field_name], sources[field_name] = value, f"tag on {owner.key}"
        if "model_params_b" not in found:
            return None, "no workload hints (tag aicluster-model-params-b or config modelParamsB)"
        return WorkloadShape(found["model_params_b"], found.get("checkpoint_interval_min", 30.0),
                             found.get("max_checkpoint_stall_pct", 5.0)), sources["model_params_b"]

