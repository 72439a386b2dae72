"""The designed cluster as a whole (ClusterDesign) and the small context a component needs of the
cluster it belongs to (ClusterContext). Above the parts and the Kubernetes slices it holds; below
design/cluster.py, which builds it from a spec.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from aicluster.design.budget import BudgetDesign
from aicluster.design.parts import NetworkDesign, PoolDesign, SlurmDesign, StorageDesign
from aicluster.design.workload_shapes import params_b, shapes
from aicluster.errors import SpecError
from aicluster.perf.tags import workload_tags
from aicluster.spec.cluster import WorkloadSpec, reserved_tag_problem

if TYPE_CHECKING:   # a Slurm plan never loads the Kubernetes design
    from aicluster.design.kubernetes import KubernetesDesign


@dataclass(frozen=True)
class ClusterContext:
    """What a component needs of the cluster it belongs to, beside its own design slice: the
    cluster's name, where it is, the user's tags and the workload hints. Small on purpose, so a
    Pulumi program of one's own can build an aicluster component without an aicluster spec."""
    name: str
    region: str
    zone: str
    tags: Mapping[str, str] = field(default_factory=dict)
    workload: WorkloadSpec | None = None

    def __post_init__(self) -> None:
        # A program of one's own passes tags without a spec: the same reserved keys are refused, or
        # a user tag could become the aicluster-node label the power programs read back.
        problems = [p for key in self.tags if (p := reserved_tag_problem(key, f"ClusterContext.tags.{key}"))]
        if problems:
            raise SpecError(problems, subject="ClusterContext")

    def labels(self, role: str, pool: str | None = None) -> dict[str, str]:
        """The tags every resource carries: user tags plus the aicluster ones (cluster, role, pool)."""
        labels = {**self.tags, "aicluster-cluster": self.name, "aicluster-role": role}
        if pool:
            labels["aicluster-pool"] = pool
        return labels

    def pool_facts(self, pool: PoolDesign) -> dict[str, str]:
        """Facts the policy pack reads off a pool's launch or instance template (a hand-written
        stack can set them too): the pool's size, the workload hints and, when the workload
        describes its model, the model and its training (aicluster.perf.tags). On templates only."""
        facts = {"aicluster-min-nodes": str(pool.min_nodes), "aicluster-max-nodes": str(pool.max_nodes)}
        if pool.partition:       # pools of one Slurm partition: one job spans them
            facts["aicluster-partition"] = pool.partition
        if self.workload:
            facts |= {
                "aicluster-model-params-b": f"{self.model_params_b:g}",
                "aicluster-checkpoint-interval-min": f"{self.workload.checkpoint_interval_min:g}",
                "aicluster-max-checkpoint-stall-pct": f"{self.workload.max_checkpoint_stall_pct:g}",
            } | self.workload_tags
        return facts

    @functools.cached_property
    def model_params_b(self) -> float | None:
        """Billions of parameters: as written, or counted from the described model."""
        return None if self.workload is None else params_b(self.workload)

    @functools.cached_property
    def workload_tags(self) -> dict[str, str]:
        """aicluster-model and aicluster-training, when the workload describes its model. A model
        past what 63 characters can spell (the spec's bounds allow more than any published one)
        goes untagged: the policy pack then judges it by model_params_b alone, as before."""
        described = None if self.workload is None else shapes(self.workload)
        if described is None:
            return {}
        try:
            return workload_tags(*described)
        except ValueError:
            return {}

@dataclass(frozen=True)
class ClusterDesign:
    """The whole cluster, designed from its spec."""
    name: str
    cloud: str
    region: str
    zone: str
    scheduler: str
    network: NetworkDesign
    pools: tuple[PoolDesign, ...]
    storage: tuple[StorageDesign, ...]
    workload: WorkloadSpec | None
    tags: Mapping[str, str]
    slurm: SlurmDesign | None = None
    kubernetes: KubernetesDesign | None = None
    alert_emails: tuple[str, ...] = ()      # spec monitoring.alert_emails: who the alerts are e-mailed to
    metrics_on_delete: str = "retain"       # spec monitoring.on_delete: the metrics workspace (aws)
    budget: BudgetDesign | None = None      # spec cost: the monthly budget and its alerts (design/budget.py)

    def pool(self, name: str) -> PoolDesign:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool {name!r}; pools: {', '.join(p.name for p in self.pools)}")

    @functools.cached_property   # labels() asks for it once per resource; the design never changes
    def context(self) -> ClusterContext:
        return ClusterContext(name=self.name, region=self.region, zone=self.zone, tags=self.tags,
                              workload=self.workload)

    def labels(self, role: str, pool: str | None = None) -> dict[str, str]:
        return self.context.labels(role, pool)

    def pool_facts(self, pool: PoolDesign) -> dict[str, str]:
        return self.context.pool_facts(pool)

    @property
    def model_params_b(self) -> float | None:
        return self.context.model_params_b

# What name- and region-only helpers read of a cluster: a whole design, or the context a
# component takes (a Pulumi program of one's own has only the context).
Cluster = ClusterContext | ClusterDesign
