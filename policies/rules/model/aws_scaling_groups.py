"""AWS pools from autoscaling groups and EKS node groups with accelerated types that launch from
no launch template (a template's pool claims its groups). Sized by maxSize /
scalingConfig.maxSize."""
from __future__ import annotations

from typing import Any, Collection, Mapping

from .._props import POOL, get, integer, items, kind
from .aws_launchers import MAX_SIZE, group_types, launcher_zones
from .aws_placement import node_group_block, placement_group, reservation
from .cluster import Fabric, Placement, Pool
from .common import Size, catalog_type, config_nodes, hints
from .index import Index
from .kinds import ASG, CONFIG_SOURCE, NODE_GROUP

_SIZE_LABEL = {ASG: "maxSize", NODE_GROUP: "scalingConfig.maxSize"}


def _nodes(config: Mapping[str, Any], r: Any, p: Mapping, key: str) -> Size:
    nodes = config_nodes(config, key, r.name)
    if nodes is not None:
        return nodes, CONFIG_SOURCE
    k = kind(r.resource_type)
    return integer(get(p, *MAX_SIZE[k])), _SIZE_LABEL[k]


def _placement(ix: Index, r: Any, p: Mapping) -> Placement:
    found = placement_group(ix, r, "placementGroup") or Placement()
    found.reservation = reservation(p) or node_group_block(p)
    return found


def _pool(ix: Index, config: Mapping[str, Any], r: Any) -> Pool | None:
    p, tags = ix.props(r), ix.tags(r)
    types = group_types(p)
    catalog_types = [c for t in types if (c := catalog_type(t))]
    if not catalog_types:
        return None
    key = tags.get(POOL) or r.name
    nodes, source = _nodes(config, r, p, key)
    zones = launcher_zones(ix, r) | {z for z in items(p, "availabilityZones") if isinstance(z, str)}
    return Pool(key=key, cloud="aws", anchor=r, instance=catalog_types[0],
                instance_types=tuple(dict.fromkeys(types)), nodes=nodes, nodes_source=source,
                fabric=Fabric(detail="no launch template: no EFA interface"), placement=_placement(ix, r, p),
                zones=zones, hints=hints(tags), members=[r])


def find(ix: Index, config: Mapping[str, Any], claimed: Collection[int]) -> list[Pool]:
    pools = [_pool(ix, config, r) for r in ix.of(ASG, NODE_GROUP) if id(r) not in claimed]
    return [p for p in pools if p is not None]
