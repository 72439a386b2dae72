"""GCP pools from GKE node pools, GPU and TPU: sized by autoscaling max x zones, else node count x
zones, else (TPU) the placement policy's topology."""
from __future__ import annotations

from typing import Any, Mapping

from aicluster.catalog import InstanceType

from .._props import POOL, get, integer, items
from .cluster import Fabric, Placement, Pool
from .common import Size, catalog_type, first_size, from_config, gcp_zone, hints
from .index import Index
from .kinds import CONFIG_SOURCE, GKE_POOL
from .tpu import topology_chips, tpu_host

# (property path, multiplied by the node locations?, nodes_source)
_COUNTS = ((("autoscaling", "totalMaxNodeCount"), False, "autoscaling.totalMaxNodeCount"),
           (("autoscaling", "maxNodeCount"), True, "autoscaling.maxNodeCount"),
           (("nodeCount",), True, "nodeCount"),
           (("initialNodeCount",), True, "initialNodeCount"))


def _machine(machine: Any) -> tuple[InstanceType | None, bool]:
    """(host type, is a TPU host) of a node pool's machine type."""
    instance = catalog_type(machine)
    if instance is None and isinstance(machine, str):
        host = tpu_host(machine)
        return host, host is not None
    return instance, False


def _from_counts(p: Mapping, spread: int) -> Size | None:
    for path, per_zone, label in _COUNTS:
        n = integer(get(p, *path))
        if n:
            return n * (spread if per_zone else 1), label
    return None


def _from_topology(p: Mapping, instance: InstanceType) -> Size | None:
    chips = topology_chips(get(p, "placementPolicy", "tpuTopology"))
    return (max(1, chips // instance.accelerator_count), "placementPolicy.tpuTopology") if chips else None


def _placement(p: Mapping) -> Placement:
    placement = Placement()
    ptype = get(p, "placementPolicy", "type")
    if isinstance(ptype, str):
        placement = Placement(group=get(p, "placementPolicy", "policyName") or "placementPolicy", strategy=ptype)
    if get(p, "nodeConfig", "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION":
        placement.reservation = "specific reservation"
    return placement


def _fabric(p: Mapping, instance: InstanceType, tpu: bool) -> Fabric:
    """TPU slices use ICI. GPU pools: the node network plus one NIC per additional node network;
    the first host_nics carry host traffic."""
    if tpu:
        return Fabric(layout="ici", detail="TPU ICI")
    nics = 1 + len(items(p, "networkConfig", "additionalNodeNetworkConfigs"))
    return Fabric(wired=max(0, nics - instance.host_nics), layout="gpu-nics",
                  detail=f"{nics} node networks ({instance.host_nics} for the host)")


def _pool(config: Mapping[str, Any], r: Any, p: Mapping, tags: Mapping[str, str]) -> Pool | None:
    machine = get(p, "nodeConfig", "machineType")
    instance, tpu = _machine(machine)
    if instance is None:
        return None
    key = tags.get(POOL) or r.name
    locations = [z for z in items(p, "nodeLocations") if isinstance(z, str)]
    zones = set().union(*[gcp_zone(z) for z in locations]) if locations else gcp_zone(get(p, "location"))
    nodes, source = first_size(CONFIG_SOURCE, from_config(config, key, r.name),
                               lambda: _from_counts(p, max(1, len(locations))),
                               lambda: _from_topology(p, instance) if tpu else None)
    return Pool(key=key, cloud="gcp", anchor=r, instance=instance, instance_types=(str(machine),),
                nodes=nodes, nodes_source=source, fabric=_fabric(p, instance, tpu), placement=_placement(p),
                zones=zones, hints=hints(tags), tpu=tpu, members=[r])


def find(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    pools = [_pool(config, r, ix.props(r), ix.tags(r)) for r in ix.of(GKE_POOL)]
    return [p for p in pools if p is not None]
