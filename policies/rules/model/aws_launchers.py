"""AWS: what launches nodes from a launch template (autoscaling groups, EKS node groups,
instances), and what each launcher says about the nodes: their types, count, zones, reservation."""
from __future__ import annotations

from typing import Any, Mapping

from .._props import get, integer, items, kind
from .aws_placement import node_group_block, reservation
from .common import subnet_zones
from .index import Index
from .kinds import ASG, INSTANCE, LT, NODE_GROUP, SUBNET

MAX_SIZE = {ASG: ("maxSize",), NODE_GROUP: ("scalingConfig", "maxSize")}
SUBNETS = {ASG: "vpcZoneIdentifiers", NODE_GROUP: "subnetIds", INSTANCE: "subnetId"}


def launchers(ix: Index) -> dict[int, list[Any]]:
    """id(launch template) -> the resources that launch from it (each from its first template)."""
    out: dict[int, list[Any]] = {id(lt): [] for lt in ix.of(LT)}
    for r in ix.of(ASG, NODE_GROUP, INSTANCE):
        refs = ix.refs(r, "launchTemplate", {LT})
        if not refs and kind(r.resource_type) == ASG:
            refs = ix.refs(r, "mixedInstancesPolicy", {LT})
        for lt in refs[:1]:
            out[id(lt)].append(r)
    return out


def group_types(p: Mapping) -> list[str]:
    """The instance types an autoscaling group or node group names (its own and its overrides)."""
    types = [t for t in items(p, "instanceTypes") if isinstance(t, str)]
    return types + [t for o in items(p, "mixedInstancesPolicy", "launchTemplate", "overrides")
                    if isinstance(t := get(o, "instanceType"), str)]


def launcher_types(ix: Index, u: Any) -> list[str]:
    up = ix.props(u)
    types = group_types(up)
    if kind(u.resource_type) == INSTANCE and isinstance(get(up, "instanceType"), str):
        types.append(get(up, "instanceType"))
    return types


def launcher_nodes(ix: Index, u: Any) -> int | None:
    """An instance is one node; a group launches at most its max size."""
    k = kind(u.resource_type)
    return 1 if k == INSTANCE else integer(get(ix.props(u), *MAX_SIZE[k]))


def launcher_zones(ix: Index, u: Any) -> set[str]:
    k, up = kind(u.resource_type), ix.props(u)
    zones = subnet_zones(ix, ix.refs(u, SUBNETS[k], {SUBNET}))
    if k == ASG:
        zones |= {z for z in items(up, "availabilityZones") if isinstance(z, str)}
    elif k == INSTANCE:
        zones |= {z for z in [get(up, "availabilityZone")] if isinstance(z, str)}
    return zones


def launcher_reservation(ix: Index, u: Any) -> str | None:
    up = ix.props(u)
    return node_group_block(up) if kind(u.resource_type) == NODE_GROUP else reservation(up)
