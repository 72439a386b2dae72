"""AWS pools from launch templates: a template whose instance type (or whose launchers' types) is
an accelerated type in the catalog. Its nodes come from, in order: the policy config `poolNodes`,
the template's `aicluster-max-nodes` tag, and the autoscaling groups (maxSize), EKS node groups
(scalingConfig.maxSize) and instances that launch from it."""
from __future__ import annotations

from typing import Any, Mapping

from .._props import POOL, get, is_unknown, items, kind
from .aws_fabric import launch_template_fabric
from .aws_launchers import launcher_nodes, launcher_reservation, launcher_types, launcher_zones
from .aws_placement import placement_group, reservation
from .cluster import Placement, Pool
from .common import Size, catalog_type, first_size, from_config, from_tag, hints, not_a_pool, subnet_zones
from .index import Index
from .kinds import CONFIG_SOURCE, LT, MAX_NODES_TAG, SUBNET


def _types(ix: Index, lt: Any, users: list[Any]) -> list[str]:
    own = get(ix.props(lt), "instanceType")
    types = [own] if isinstance(own, str) and not is_unknown(own) else []
    for u in users:
        types += launcher_types(ix, u)
    return types


def _from_launchers(ix: Index, users: list[Any]) -> Size | None:
    if not users:
        return None
    counts = [launcher_nodes(ix, u) for u in users]
    if any(c is None for c in counts):
        return None
    return sum(counts), " + ".join(sorted({kind(u.resource_type).split("/")[-1] for u in users}))


def _zones(ix: Index, lt: Any, users: list[Any]) -> set[str]:
    p = ix.props(lt)
    zones = {z for z in [get(p, "placement", "availabilityZone")] if isinstance(z, str) and z}
    zones |= subnet_zones(ix, ix.refs(lt, "networkInterfaces", {SUBNET},
                                      value=[get(n, "subnetId") for n in items(p, "networkInterfaces")]))
    for u in users:
        zones |= launcher_zones(ix, u)
    return zones


def _placement(ix: Index, lt: Any, users: list[Any]) -> Placement:
    """The template's placement group, else its first launcher's; the template's reservation, else
    its first launcher's."""
    found = placement_group(ix, lt, "placement", value=get(ix.props(lt), "placement", "groupName"))
    held = reservation(ix.props(lt))
    for u in users:
        found = found or placement_group(ix, u, "placementGroup")
        held = held or launcher_reservation(ix, u)
    found = found or Placement()
    found.reservation = held
    return found


def _pool(ix: Index, config: Mapping[str, Any], lt: Any, users: list[Any]) -> Pool | None:
    tags = ix.tags(lt)
    if not_a_pool(tags):
        return None
    types = _types(ix, lt, users)
    catalog_types = [c for t in types if (c := catalog_type(t))]
    if not catalog_types:
        return None
    key = tags.get(POOL) or lt.name
    nodes, source = first_size(CONFIG_SOURCE, from_config(config, key, lt.name), from_tag(tags, MAX_NODES_TAG, "tag"),
                               lambda: _from_launchers(ix, users))
    return Pool(key=key, cloud="aws", anchor=lt, instance=catalog_types[0],
                instance_types=tuple(dict.fromkeys(types)), nodes=nodes, nodes_source=source,
                fabric=launch_template_fabric(ix, lt, catalog_types[0]), placement=_placement(ix, lt, users),
                zones=_zones(ix, lt, users), hints=hints(tags), members=[lt, *users])


def find(ix: Index, config: Mapping[str, Any], launchers: Mapping[int, list[Any]]) -> list[Pool]:
    pools = [_pool(ix, config, lt, launchers[id(lt)]) for lt in ix.of(LT)]
    return [p for p in pools if p is not None]
