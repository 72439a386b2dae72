"""GCP: the GPU NIC fabric and the placement of an instance or instance template."""
from __future__ import annotations

from typing import Any, Mapping

from aicluster.catalog import InstanceType

from .._props import get, strings
from .cluster import Fabric, Placement
from .index import Index
from .kinds import RESOURCE_POLICY


def gcp_fabric(nics: list, instance: InstanceType) -> Fabric:
    """RDMA stacks count their MRDMA NICs; TCPX/TCPXO count the NICs beyond the host's."""
    if instance.gpu_nic_stack == "rdma":
        wired = sum(1 for n in nics if get(n, "nicType") == "MRDMA")
    else:
        wired = max(0, len(nics) - instance.host_nics)
    return Fabric(wired=wired, layout="gpu-nics", detail=f"{len(nics)} NICs ({instance.host_nics} for the host)")


def _collocation(ix: Index, r: Any, p: Mapping) -> Placement:
    """The first resource policy in this stack with a group placement, else the first one named."""
    policies = ix.refs(r, "resourcePolicies", {RESOURCE_POLICY})
    for pol in policies:
        collocation = get(ix.props(pol), "groupPlacementPolicy", "collocation")
        if isinstance(collocation, str):
            return Placement(group=pol.name, strategy=collocation)
    named = list(strings(get(p, "resourcePolicies")))
    if named and not policies:
        return Placement(group=named[0], verified=False)
    return Placement()


def gcp_placement(ix: Index, r: Any, p: Mapping) -> Placement:
    placement = _collocation(ix, r, p)
    affinity = get(p, "reservationAffinity", "type") or get(p, "scheduling", "reservationAffinity", "type")
    if affinity == "SPECIFIC_RESERVATION":
        placement.reservation = "specific reservation"
    return placement
