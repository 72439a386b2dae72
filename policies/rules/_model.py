"""The cluster as raw resources describe it: pools, filesystems and head nodes.

Stack rules build this model from `StackValidationArgs.resources` and hand its shapes to
`aicluster.balance` (the same model `aicluster plan` uses). Nothing here reads our spec: a pool is
whatever a hand-written stack would write too.

AWS pools
  * a launch template whose instance type (or whose launchers' types) is an accelerated type in
    the catalog; its nodes come from, in order: the policy config `poolNodes`, the template's
    `aicluster-max-nodes` tag, the autoscaling groups (maxSize), EKS node groups
    (scalingConfig.maxSize) and instances that launch from it;
  * an autoscaling group or EKS node group with accelerated types and no such template;
  * accelerated `aws:ec2/instance`s that use no template, grouped by their `aicluster-pool` tag, else
    by type and placement group (one instance = one node).
GCP pools
  * an instance template with an accelerated machine type, sized by the instance group managers
    that use it (targetSize), in the zones of those groups and of its `aicluster-zone` label;
    accelerated instances grouped like AWS instances;
  * a GKE node pool (autoscaling max x zones, else nodeCount x zones); TPU node pools included;
  * a Cloud TPU VM (`gcp:tpu/v2Vm`): one slice, its hosts are the nodes.

References between resources (a template's placement group, a filesystem's subnet) are resolved
first through the engine's property dependencies (they exist even when the referenced id is not
known yet, during a preview) and otherwise by matching ids, ARNs, self links and names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from aicluster.balance import FilesystemShape, PoolShape, WorkloadShape
from aicluster.catalog import Accelerator, InstanceType, TpuGeneration, load_catalog

from ._props import (POOL, ROLE, get, integer, is_unknown, items, kind, matches, number, plain, strings,
                     tags_of, truthy)

LT, ASG, NODE_GROUP, INSTANCE = "aws:ec2/launchTemplate", "aws:autoscaling/group", "aws:eks/nodeGroup", "aws:ec2/instance"
PLACEMENT_GROUP, SUBNET, SG, ENI = "aws:ec2/placementGroup", "aws:ec2/subnet", "aws:ec2/securityGroup", "aws:ec2/networkInterface"
FSX = "aws:fsx/lustreFileSystem"
GCE, GCE_TEMPLATE, GCE_REGION_TEMPLATE = "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:compute/regionInstanceTemplate"
MIG, REGION_MIG, RESOURCE_POLICY = "gcp:compute/instanceGroupManager", "gcp:compute/regionInstanceGroupManager", "gcp:compute/resourcePolicy"
GKE_POOL, TPU_VM = "gcp:container/nodePool", "gcp:tpu/v2Vm"
GCP_LUSTRE, FILESTORE = "gcp:lustre/instance", "gcp:filestore/instance"

HINT_TAGS = {
    "model_params_b": "aicluster-model-params-b",
    "checkpoint_interval_min": "aicluster-checkpoint-interval-min",
    "max_checkpoint_stall_pct": "aicluster-max-checkpoint-stall-pct",
}
MAX_NODES_TAG = "aicluster-max-nodes"
ZONE_TAG = "aicluster-zone"     # GCP instance templates are global: the zone their nodes launch in
_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")           # GCP zone (us-central1-a)
_TPU_TYPE = re.compile(r"^(v\d+[a-z]*|v5litepod)-(\d+)$")  # v5p-128, v5litepod-16, v6e-8
_TPU_CONFIG_TYPES = {"V4": "v4", "V5P": "v5p", "V5LITE_POD": "v5e", "V6E": "v6e"}
_TPU_PREFIX = {"v4": "v4", "v5p": "v5p", "v5litepod": "v5e", "v5e": "v5e", "v6e": "v6e"}
_TPU_CORES_PER_CHIP = {"v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}   # the type suffix counts TensorCores (hardware.md)


# ---------------------------------------------------------------- the resource index


class Index:
    """Every resource of the stack with plain props, and reference lookups."""

    def __init__(self, resources: Sequence[Any]):
        self.resources = list(resources)
        self._props = {id(r): plain(r.props) for r in self.resources}
        self._by_ref: dict[str, list[Any]] = {}
        for r in self.resources:
            p = self.props(r)
            keys = {r.urn, *(v for k in ("id", "arn", "selfLink", "name", "selfLinkUnique")
                             if isinstance(v := p.get(k), str) and not is_unknown(v))}
            for key in keys:
                self._by_ref.setdefault(key, []).append(r)

    def props(self, r: Any) -> dict:
        return self._props[id(r)]

    def of(self, *kinds: str) -> list[Any]:
        return [r for r in self.resources if kind(r.resource_type) in kinds]

    def tags(self, r: Any) -> dict[str, str]:
        return tags_of(self.props(r), r.resource_type)

    def refs(self, r: Any, prop: str, kinds: Iterable[str], value: Any = ...) -> list[Any]:
        """Resources of `kinds` that property `prop` of `r` (or the given part of it) refers to."""
        kinds = set(kinds)
        found: list[Any] = []
        value = get(self.props(r), prop) if value is ... else value
        for text in strings(value):
            for candidate in self._by_ref.get(text, []):
                if kind(candidate.resource_type) in kinds and candidate not in found:
                    found.append(candidate)
        if found:
            return found
        # The engine's property dependencies: known even when the ids are not (preview).
        deps = (getattr(r, "property_dependencies", None) or {}).get(prop) or []
        return [d for d in deps if kind(d.resource_type) in kinds and d is not r]

    def refers(self, r: Any, prop: str, target: Any) -> bool:
        return target in self.refs(r, prop, {kind(target.resource_type)})


# ---------------------------------------------------------------- model types


@dataclass
class Fabric:
    wired: int = 0                      # AWS: EFA devices on distinct EFA cards; GCP: GPU NICs
    layout: str = "none"                # efa-only | efa (older) | mixed | gpu-nics | none
    cards: tuple[int, ...] = ()         # AWS: network cards carrying an EFA device
    security_groups: list[Any] | None = field(default_factory=list)   # None: not resolvable
    detail: str = ""


@dataclass
class Placement:
    group: str | None = None            # placement group / resource policy name
    strategy: str | None = None         # cluster | spread | partition | COLLOCATED | COMPACT | None
    verified: bool = True               # False: the group is not in this stack (cannot be read)
    reservation: str | None = None      # how a reservation / capacity block fixes the placement

    @property
    def compact(self) -> bool:
        return (self.strategy or "").lower() in ("cluster", "collocated", "compact")


@dataclass
class Pool:
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
    key: str
    resource: Any
    kind: str                           # fsx-lustre | gcp-lustre | filestore
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


# ---------------------------------------------------------------- helpers


def _catalog_type(name: Any) -> InstanceType | None:
    return load_catalog().find(name) if isinstance(name, str) and not is_unknown(name) else None


def _tpu_instance(gen: TpuGeneration, chips_per_host: int, name: str) -> InstanceType:
    """A catalog-shaped view of one TPU host, so the balance model can count its chips and HBM.
    The host network is not a fact we hold: it is left unbounded (inf) rather than guessed."""
    chip = Accelerator(model=f"TPU {gen.name}", vendor="google", kind="tpu", gres_type="tpu",
                       memory_mib=int(gen.hbm_gib_per_chip * 1024), bf16_tflops=gen.bf16_tflops,
                       hbm_bandwidth_gbs=gen.hbm_bandwidth_gbs, source=gen.source)
    return InstanceType(name=name, cloud="gcp", accelerator=chip, accelerator_count=chips_per_host,
                        vcpu=None, memory_gib=None, network_gbps=float("inf"), source=gen.source)


def _hosts(gen: TpuGeneration, chips: int) -> tuple[int, int]:
    """(hosts, chips per host) of a slice: single-host shapes hold all chips, multi-host use 4."""
    if chips in gen.single_host_topologies.values():
        return 1, chips
    return max(1, chips // 4), 4


def _topology_chips(topology: Any) -> int | None:
    if not isinstance(topology, str) or not re.fullmatch(r"\d+(x\d+)+", topology):
        return None
    out = 1
    for part in topology.split("x"):
        out *= int(part)
    return out


def _hints(tags: Mapping[str, str]) -> dict[str, float]:
    out = {}
    for field_name, tag in HINT_TAGS.items():
        value = number(tags.get(tag))
        if value is not None:
            out[field_name] = value
    return out


def _config_nodes(config: Mapping[str, Any], *names: str) -> int | None:
    table = config.get("poolNodes")
    if not isinstance(table, Mapping):
        return None
    for pattern, value in table.items():
        if matches(str(pattern), *names):
            n = integer(value)
            if n is not None:
                return n
    return None


def _zone_of_subnets(ix: Index, subnets: Iterable[Any]) -> set[str]:
    zones = set()
    for s in subnets:
        z = get(ix.props(s), "availabilityZone")
        if isinstance(z, str) and z:
            zones.add(z)
    return zones


def _gcp_zone(value: Any) -> set[str]:
    return {value.split("/")[-1]} if isinstance(value, str) and _ZONE.match(value.split("/")[-1]) else set()


def _name(r: Any) -> str:
    return r.name


# ---------------------------------------------------------------- AWS


def _lt_fabric(ix: Index, lt: Any, instance: InstanceType) -> Fabric:
    p = ix.props(lt)
    nics = items(p, "networkInterfaces")
    efa = [n for n in nics if get(n, "interfaceType") in ("efa", "efa-only")]
    types = {get(n, "interfaceType") for n in efa}
    layout = "none" if not efa else ("efa-only" if types == {"efa-only"} else "efa" if types == {"efa"} else "mixed")
    cards = sorted({integer(get(n, "networkCardIndex")) or 0 for n in efa} & set(instance.efa_cards or ()))
    sg_values = [get(n, "securityGroups") for n in efa] or [get(p, "vpcSecurityGroupIds")]
    groups: list[Any] = []
    for value in sg_values:
        for g in ix.refs(lt, "networkInterfaces" if efa else "vpcSecurityGroupIds", {SG}, value=value):
            if g not in groups:
                groups.append(g)
    named = any(True for v in sg_values for _ in strings(v)) or any(is_unknown(v) for v in sg_values)
    return Fabric(wired=len(cards), layout=layout, cards=tuple(cards),
                  security_groups=groups if groups or not named else None,
                  detail=f"{len(efa)} EFA interface(s) on cards {cards}" if efa else "no EFA interface")


def _instance_fabric(ix: Index, inst: Any, instance: InstanceType) -> Fabric:
    p = ix.props(inst)
    cards, groups, efa_count = set(), [], 0
    for attachment in items(p, "networkInterfaces"):
        for eni in ix.refs(inst, "networkInterfaces", {ENI}, value=get(attachment, "networkInterfaceId")):
            if get(ix.props(eni), "interfaceType") in ("efa", "efa-only"):
                efa_count += 1
                cards.add(integer(get(attachment, "networkCardIndex")) or 0)
                groups += [g for g in ix.refs(eni, "securityGroups", {SG}) if g not in groups]
    cards &= set(instance.efa_cards or ())
    return Fabric(wired=len(cards), layout="efa" if efa_count else "none", cards=tuple(sorted(cards)),
                  security_groups=groups, detail=f"{efa_count} EFA network interface(s)")


_WHOLE = object()


def _pg(ix: Index, r: Any, prop: str, value: Any = _WHOLE) -> Placement | None:
    value = get(ix.props(r), prop) if value is _WHOLE else value
    if value is None or value == "":
        return None
    groups = ix.refs(r, prop, {PLACEMENT_GROUP}, value=value)
    if groups:
        g = groups[0]
        strategy = get(ix.props(g), "strategy")
        return Placement(group=g.name, strategy=strategy if isinstance(strategy, str) else None)
    return Placement(group=value if isinstance(value, str) and not is_unknown(value) else "(unknown)",
                     verified=False)


def _aws_reservation(p: Mapping) -> str | None:
    target = get(p, "capacityReservationSpecification", "capacityReservationTarget", default={})
    for key in ("capacityReservationId", "capacityReservationResourceGroupArn"):
        if get(target, key):
            return f"capacity reservation {get(target, key)}"
    for key in ("capacityReservationIds", "capacityReservationResourceGroupArns"):
        if items(target, key):
            return f"capacity reservation {items(target, key)[0]}"
    if get(p, "instanceMarketOptions", "marketType") == "capacity-block":
        return "capacity block"
    return None


def _aws_pools(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    pools: list[Pool] = []
    lts = ix.of(LT)
    launchers: dict[int, list[Any]] = {id(lt): [] for lt in lts}
    claimed: set[int] = set()
    for r in ix.of(ASG, NODE_GROUP, INSTANCE):
        refs = ix.refs(r, "launchTemplate", {LT})
        if not refs and kind(r.resource_type) == ASG:
            refs = ix.refs(r, "mixedInstancesPolicy", {LT})
        for lt in refs[:1]:
            launchers[id(lt)].append(r)
            claimed.add(id(r))

    for lt in lts:
        p, tags = ix.props(lt), ix.tags(lt)
        if tags.get(ROLE) in ("head", "control-plane", "login"):
            continue
        users = launchers[id(lt)]
        types = [t for t in [get(p, "instanceType")] if isinstance(t, str) and not is_unknown(t)]
        for u in users:
            up = ix.props(u)
            types += [t for t in items(up, "instanceTypes") if isinstance(t, str)]
            types += [t for o in items(up, "mixedInstancesPolicy", "launchTemplate", "overrides")
                      if isinstance(t := get(o, "instanceType"), str)]
            if kind(u.resource_type) == INSTANCE and isinstance(get(up, "instanceType"), str):
                types.append(get(up, "instanceType"))
        catalog_types = [c for t in types if (c := _catalog_type(t))]
        if not catalog_types:
            continue
        instance = catalog_types[0]
        key = tags.get(POOL) or lt.name
        nodes, source = _config_nodes(config, key, lt.name), "policy config poolNodes"
        if nodes is None and integer(tags.get(MAX_NODES_TAG)) is not None:
            nodes, source = integer(tags.get(MAX_NODES_TAG)), f"tag {MAX_NODES_TAG}"
        if nodes is None and users:
            counts = []
            for u in users:
                up = ix.props(u)
                k = kind(u.resource_type)
                counts.append(1 if k == INSTANCE else
                              integer(get(up, "maxSize")) if k == ASG else integer(get(up, "scalingConfig", "maxSize")))
            if all(c is not None for c in counts):
                nodes = sum(counts)
                source = " + ".join(sorted({kind(u.resource_type).split("/")[-1] for u in users}))
        placement = _pg(ix, lt, "placement", value=get(p, "placement", "groupName"))
        zones = {z for z in [get(p, "placement", "availabilityZone")] if isinstance(z, str) and z}
        zones |= _zone_of_subnets(ix, ix.refs(lt, "networkInterfaces", {SUBNET},
                                              value=[get(n, "subnetId") for n in items(p, "networkInterfaces")]))
        reservation = _aws_reservation(p)
        for u in users:
            up, k = ix.props(u), kind(u.resource_type)
            placement = placement or _pg(ix, u, "placementGroup")
            if k == ASG:
                zones |= {z for z in items(up, "availabilityZones") if isinstance(z, str)}
                zones |= _zone_of_subnets(ix, ix.refs(u, "vpcZoneIdentifiers", {SUBNET}))
                reservation = reservation or _aws_reservation(up)
            elif k == NODE_GROUP:
                zones |= _zone_of_subnets(ix, ix.refs(u, "subnetIds", {SUBNET}))
                if get(up, "capacityType") == "CAPACITY_BLOCK":
                    reservation = reservation or "capacity block (node group)"
            else:
                zones |= {z for z in [get(up, "availabilityZone")] if isinstance(z, str)}
                zones |= _zone_of_subnets(ix, ix.refs(u, "subnetId", {SUBNET}))
                reservation = reservation or _aws_reservation(up)
        placement = placement or Placement()
        placement.reservation = reservation
        pools.append(Pool(key=key, cloud="aws", anchor=lt, instance=instance,
                          instance_types=tuple(dict.fromkeys(types)), nodes=nodes, nodes_source=source,
                          fabric=_lt_fabric(ix, lt, instance), placement=placement, zones=zones,
                          hints=_hints(tags), members=[lt, *users]))
        claimed.update(id(u) for u in users)

    # Autoscaling groups and node groups without an accelerated template of their own.
    for r in ix.of(ASG, NODE_GROUP):
        if id(r) in claimed:
            continue
        p, tags = ix.props(r), ix.tags(r)
        types = [t for t in items(p, "instanceTypes") if isinstance(t, str)]
        types += [t for o in items(p, "mixedInstancesPolicy", "launchTemplate", "overrides")
                  if isinstance(t := get(o, "instanceType"), str)]
        catalog_types = [c for t in types if (c := _catalog_type(t))]
        if not catalog_types:
            continue
        k = kind(r.resource_type)
        key = tags.get(POOL) or r.name
        nodes, source = _config_nodes(config, key, r.name), "policy config poolNodes"
        if nodes is None:
            nodes = integer(get(p, "maxSize")) if k == ASG else integer(get(p, "scalingConfig", "maxSize"))
            source = "maxSize" if k == ASG else "scalingConfig.maxSize"
        zones = _zone_of_subnets(ix, ix.refs(r, "vpcZoneIdentifiers" if k == ASG else "subnetIds", {SUBNET}))
        zones |= {z for z in items(p, "availabilityZones") if isinstance(z, str)}
        placement = _pg(ix, r, "placementGroup") or Placement()
        placement.reservation = _aws_reservation(p) or (
            "capacity block (node group)" if get(p, "capacityType") == "CAPACITY_BLOCK" else None)
        pools.append(Pool(key=key, cloud="aws", anchor=r, instance=catalog_types[0],
                          instance_types=tuple(dict.fromkeys(types)), nodes=nodes, nodes_source=source,
                          fabric=Fabric(detail="no launch template: no EFA interface"), placement=placement,
                          zones=zones, hints=_hints(tags), members=[r]))

    # Instances that use no pool template: one instance, one node.
    groups: dict[str, list[Any]] = {}
    for r in ix.of(INSTANCE):
        if id(r) in claimed:
            continue
        p, tags = ix.props(r), ix.tags(r)
        if tags.get(ROLE) in ("head", "control-plane", "login") or not _catalog_type(get(p, "instanceType")):
            continue
        key = tags.get(POOL) or f"{get(p, 'instanceType')}@{get(p, 'placementGroup') or 'no-placement-group'}"
        groups.setdefault(key, []).append(r)
    for key, members in groups.items():
        types = [get(ix.props(m), "instanceType") for m in members]
        instance = _catalog_type(types[0])
        nodes = _config_nodes(config, key, *[m.name for m in members])
        fabrics = [_instance_fabric(ix, m, instance) for m in members]
        fabric = min(fabrics, key=lambda f: f.wired)
        placements = [_pg(ix, m, "placementGroup") for m in members]
        placement = next((pl for pl in placements if pl), None) if all(placements) else None
        placement = placement or Placement()
        reservations = [_aws_reservation(ix.props(m)) for m in members]
        placement.reservation = reservations[0] if all(reservations) else None
        zones: set[str] = set()
        for m in members:
            mp = ix.props(m)
            zones |= {z for z in [get(mp, "availabilityZone")] if isinstance(z, str)}
            zones |= _zone_of_subnets(ix, ix.refs(m, "subnetId", {SUBNET}))
        hints: dict[str, float] = {}
        for m in members:
            hints = {**_hints(ix.tags(m)), **hints}
        pools.append(Pool(key=key, cloud="aws", anchor=members[0], instance=instance,
                          instance_types=tuple(dict.fromkeys(types)),
                          nodes=nodes if nodes is not None else len(members),
                          nodes_source="policy config poolNodes" if nodes is not None else f"{len(members)} instance(s)",
                          fabric=fabric, placement=placement, zones=zones, hints=hints, members=members))
    return pools


# ---------------------------------------------------------------- GCP


def _gcp_fabric(nics: list, instance: InstanceType) -> Fabric:
    if instance.gpu_nic_stack == "rdma":
        wired = sum(1 for n in nics if get(n, "nicType") == "MRDMA")
    else:
        wired = max(0, len(nics) - instance.host_nics)
    return Fabric(wired=wired, layout="gpu-nics", detail=f"{len(nics)} NICs ({instance.host_nics} for the host)")


def _gcp_placement(ix: Index, r: Any, p: Mapping) -> Placement:
    policies = ix.refs(r, "resourcePolicies", {RESOURCE_POLICY})
    placement = Placement()
    for pol in policies:
        collocation = get(ix.props(pol), "groupPlacementPolicy", "collocation")
        if isinstance(collocation, str):
            placement = Placement(group=pol.name, strategy=collocation)
            break
    else:
        named = [s for s in strings(get(p, "resourcePolicies"))]
        if named and not policies:
            placement = Placement(group=named[0], verified=False)
    affinity = get(p, "reservationAffinity", "type") or get(p, "scheduling", "reservationAffinity", "type")
    if affinity == "SPECIFIC_RESERVATION":
        placement.reservation = "specific reservation"
    return placement


def _gcp_pools(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    pools: list[Pool] = []
    catalog = load_catalog()
    # Instance templates, sized by the instance group managers that use them.
    users: dict[int, list[Any]] = {}
    for mig in ix.of(MIG, REGION_MIG):
        for tmpl in ix.refs(mig, "versions", {GCE_TEMPLATE, GCE_REGION_TEMPLATE}):
            users.setdefault(id(tmpl), []).append(mig)
    for tmpl in ix.of(GCE_TEMPLATE, GCE_REGION_TEMPLATE):
        p, tags = ix.props(tmpl), ix.tags(tmpl)
        instance = _catalog_type(get(p, "machineType"))
        if instance is None or tags.get(ROLE) in ("head", "control-plane", "login"):
            continue
        key = tags.get(POOL) or tmpl.name
        migs = users.get(id(tmpl), [])
        nodes, source = _config_nodes(config, key, tmpl.name), "policy config poolNodes"
        if nodes is None and integer(tags.get(MAX_NODES_TAG)) is not None:
            nodes, source = integer(tags.get(MAX_NODES_TAG)), f"label {MAX_NODES_TAG}"
        if nodes is None and migs:
            sizes = [integer(get(ix.props(m), "targetSize")) for m in migs]
            if all(s is not None for s in sizes):
                nodes, source = sum(sizes), "instance group targetSize"
        zones: set[str] = _gcp_zone(tags.get(ZONE_TAG))
        for m in migs:
            zones |= _gcp_zone(get(ix.props(m), "zone"))
            for z in items(ix.props(m), "distributionPolicyZones"):
                zones |= _gcp_zone(z)
        pools.append(Pool(key=key, cloud="gcp", anchor=tmpl, instance=instance, instance_types=(instance.name,),
                          nodes=nodes, nodes_source=source, fabric=_gcp_fabric(items(p, "networkInterfaces"), instance),
                          placement=_gcp_placement(ix, tmpl, p), zones=zones, hints=_hints(tags),
                          members=[tmpl, *migs]))
    # Plain instances, grouped by pool label.
    groups: dict[str, list[Any]] = {}
    for r in ix.of(GCE):
        p, tags = ix.props(r), ix.tags(r)
        if tags.get(ROLE) in ("head", "control-plane", "login") or not _catalog_type(get(p, "machineType")):
            continue
        key = tags.get(POOL) or f"{get(p, 'machineType')}@{','.join(strings(get(p, 'resourcePolicies'))) or 'no-placement'}"
        groups.setdefault(key, []).append(r)
    for key, members in groups.items():
        types = [get(ix.props(m), "machineType") for m in members]
        instance = _catalog_type(types[0])
        nodes = _config_nodes(config, key, *[m.name for m in members])
        fabrics = [_gcp_fabric(items(ix.props(m), "networkInterfaces"), instance) for m in members]
        placements = [_gcp_placement(ix, m, ix.props(m)) for m in members]
        placement = placements[0] if all(pl.compact for pl in placements) else next(
            (pl for pl in placements if not pl.compact), placements[0])
        zones: set[str] = set()
        for m in members:
            zones |= _gcp_zone(get(ix.props(m), "zone"))
        pools.append(Pool(key=key, cloud="gcp", anchor=members[0], instance=instance,
                          instance_types=tuple(dict.fromkeys(types)),
                          nodes=nodes if nodes is not None else len(members),
                          nodes_source="policy config poolNodes" if nodes is not None else f"{len(members)} instance(s)",
                          fabric=min(fabrics, key=lambda f: f.wired), placement=placement, zones=zones,
                          hints=_hints(ix.tags(members[0])), members=members))
    # GKE node pools (GPU and TPU).
    for r in ix.of(GKE_POOL):
        p, tags = ix.props(r), ix.tags(r)
        machine = get(p, "nodeConfig", "machineType")
        instance, tpu = _catalog_type(machine), False
        if instance is None and isinstance(machine, str):
            for gen in catalog.tpus.values():
                for chips, mt in gen.machine_types.items():
                    if mt == machine:
                        instance, tpu = _tpu_instance(gen, chips, machine), True
        if instance is None:
            continue
        key = tags.get(POOL) or r.name
        locations = [z for z in items(p, "nodeLocations") if isinstance(z, str)]
        zones = set().union(*[_gcp_zone(z) for z in locations]) if locations else _gcp_zone(get(p, "location"))
        spread = max(1, len(locations))
        nodes, source = _config_nodes(config, key, r.name), "policy config poolNodes"
        if nodes is None:
            for path, scale, label in ((("autoscaling", "totalMaxNodeCount"), 1, "autoscaling.totalMaxNodeCount"),
                                       (("autoscaling", "maxNodeCount"), spread, "autoscaling.maxNodeCount"),
                                       (("nodeCount",), spread, "nodeCount"),
                                       (("initialNodeCount",), spread, "initialNodeCount")):
                n = integer(get(p, *path))
                if n:
                    nodes, source = n * scale, label
                    break
        if tpu and nodes is None:
            chips = _topology_chips(get(p, "placementPolicy", "tpuTopology"))
            if chips:
                nodes, source = max(1, chips // instance.accelerator_count), "placementPolicy.tpuTopology"
        placement = Placement()
        ptype = get(p, "placementPolicy", "type")
        if isinstance(ptype, str):
            placement = Placement(group=get(p, "placementPolicy", "policyName") or "placementPolicy", strategy=ptype)
        if get(p, "nodeConfig", "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION":
            placement.reservation = "specific reservation"
        # GKE: the node network plus one NIC per additional node network; the first host_nics carry host traffic.
        nics = 1 + len(items(p, "networkConfig", "additionalNodeNetworkConfigs"))
        fabric = Fabric(layout="ici", detail="TPU ICI") if tpu else Fabric(
            wired=max(0, nics - instance.host_nics), layout="gpu-nics",
            detail=f"{nics} node networks ({instance.host_nics} for the host)")
        pools.append(Pool(key=key, cloud="gcp", anchor=r, instance=instance, instance_types=(str(machine),),
                          nodes=nodes, nodes_source=source, fabric=fabric, placement=placement, zones=zones,
                          hints=_hints(tags), tpu=tpu, members=[r]))
    # Cloud TPU VMs: one slice each.
    for r in ix.of(TPU_VM):
        p, tags = ix.props(r), ix.tags(r)
        gen_name, chips = None, None
        accel = get(p, "acceleratorType")
        if isinstance(accel, str) and (m := _TPU_TYPE.match(accel)):
            gen_name = _TPU_PREFIX.get(m.group(1))
            if gen_name:
                chips = int(m.group(2)) // _TPU_CORES_PER_CHIP[gen_name]
        cfg_type = get(p, "acceleratorConfig", "type")
        if gen_name is None and isinstance(cfg_type, str):
            gen_name = _TPU_CONFIG_TYPES.get(cfg_type.upper())
            chips = _topology_chips(get(p, "acceleratorConfig", "topology"))
        gen = catalog.tpus.get(gen_name or "")
        if gen is None or not chips:
            continue
        hosts, per_host = _hosts(gen, chips)
        key = tags.get(POOL) or r.name
        nodes = _config_nodes(config, key, r.name)
        pools.append(Pool(key=key, cloud="gcp", anchor=r,
                          instance=_tpu_instance(gen, per_host, f"tpu-{gen.name} ({chips} chips)"),
                          instance_types=(f"tpu-{gen.name}",), nodes=nodes if nodes is not None else hosts,
                          nodes_source="policy config poolNodes" if nodes is not None else f"{chips} chips / {per_host} per host",
                          fabric=Fabric(layout="ici", detail="TPU ICI"), placement=Placement(strategy="ici"),
                          zones=_gcp_zone(get(p, "zone")), hints=_hints(tags), tpu=True, members=[r]))
    return pools


# ---------------------------------------------------------------- filesystems and heads


def _filesystems(ix: Index) -> list[Filesystem]:
    catalog = load_catalog()
    out: list[Filesystem] = []
    for r in ix.of(FSX):
        p = ix.props(r)
        deployment = get(p, "deploymentType") or "SCRATCH_1"   # the API's default deployment type
        tier = catalog.fsx.get(deployment) if isinstance(deployment, str) else None
        tput = number(get(p, "perUnitStorageThroughput"))
        if tput is None and tier is not None:
            tput = tier.baseline_mbps_per_tib
        out.append(Filesystem(key=r.name, resource=r, kind="fsx-lustre", parallel=True,
                              capacity_gib=number(get(p, "storageCapacity")), throughput_mbps_per_tib=tput,
                              zones=_zone_of_subnets(ix, ix.refs(r, "subnetIds", {SUBNET})),
                              hints=_hints(ix.tags(r)), detail=f"FSx for Lustre {deployment}"))
    for r in ix.of(GCP_LUSTRE):
        p = ix.props(r)
        out.append(Filesystem(key=r.name, resource=r, kind="gcp-lustre", parallel=True,
                              capacity_gib=number(get(p, "capacityGib")),
                              throughput_mbps_per_tib=number(get(p, "perUnitStorageThroughput")),
                              zones=_gcp_zone(get(p, "location")), hints=_hints(ix.tags(r)), detail="Managed Lustre"))
    for r in ix.of(FILESTORE):
        p = ix.props(r)
        capacity = sum(number(get(s, "capacityGb")) or 0 for s in items(p, "fileShares")) or None
        out.append(Filesystem(key=r.name, resource=r, kind="filestore", parallel=False, capacity_gib=capacity,
                              throughput_mbps_per_tib=None, zones=_gcp_zone(get(p, "location")),
                              hints=_hints(ix.tags(r)), detail=f"Filestore {get(p, 'tier')} (NFS)"))
    return out


def _heads(ix: Index) -> list[Any]:
    return [r for r in ix.of(INSTANCE, GCE) if ix.tags(r).get(ROLE) in ("head", "control-plane")]


def build(resources: Sequence[Any], config: Mapping[str, Any] | None = None) -> Cluster:
    config = config or {}
    ix = Index(resources)
    return Cluster(ix, _aws_pools(ix, config) + _gcp_pools(ix, config), _filesystems(ix), _heads(ix))


def plural(n: float, word: str) -> str:
    return f"{n:g} {word}" + ("" if n == 1 else "s")


def gpus(pools: Sequence[Pool]) -> str:
    return "GPU" if all(p.instance.accelerator.kind == "gpu" for p in pools) else "accelerator"


def config_number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = number(config.get(key))
    return default if value is None else value


def rule_config(args: Any) -> dict:
    cfg = args.get_config() if hasattr(args, "get_config") else {}
    return dict(plain(cfg or {}))


__all__ = ["Cluster", "Filesystem", "Index", "Pool", "Placement", "Fabric", "build", "truthy"]
