"""GCP pools from instance templates with an accelerated machine type, sized by the instance group
managers that use them (targetSize), in the zones of those groups and of the template's
`aicluster-zone` label."""
from __future__ import annotations

from typing import Any, Mapping

from .._props import POOL, get, integer, items
from .cluster import Pool
from .common import Size, catalog_type, first_size, from_config, from_tag, gcp_zone, hints, not_a_pool
from .gcp_parts import gcp_fabric, gcp_placement
from .index import Index
from .kinds import CONFIG_SOURCE, GCE_REGION_TEMPLATE, GCE_TEMPLATE, MAX_NODES_TAG, MIG, REGION_MIG, ZONE_TAG

TEMPLATES = (GCE_TEMPLATE, GCE_REGION_TEMPLATE)


def _managers(ix: Index) -> dict[int, list[Any]]:
    """id(template) -> the instance group managers that use it."""
    users: dict[int, list[Any]] = {}
    for mig in ix.of(MIG, REGION_MIG):
        for tmpl in ix.refs(mig, "versions", set(TEMPLATES)):
            users.setdefault(id(tmpl), []).append(mig)
    return users


def _from_managers(ix: Index, migs: list[Any]) -> Size | None:
    sizes = [integer(get(ix.props(m), "targetSize")) for m in migs]
    if not migs or any(s is None for s in sizes):
        return None
    return sum(sizes), "instance group targetSize"


def _manager_zones(ix: Index, mig: Any) -> set[str]:
    zones = gcp_zone(get(ix.props(mig), "zone"))
    for z in items(ix.props(mig), "distributionPolicyZones"):
        zones |= gcp_zone(z)
    return zones


def _pool(ix: Index, config: Mapping[str, Any], tmpl: Any, migs: list[Any]) -> Pool | None:
    p, tags = ix.props(tmpl), ix.tags(tmpl)
    instance = catalog_type(get(p, "machineType"))
    if instance is None or not_a_pool(tags):
        return None
    key = tags.get(POOL) or tmpl.name
    nodes, source = first_size(CONFIG_SOURCE, from_config(config, key, tmpl.name),
                               from_tag(tags, MAX_NODES_TAG, "label"), lambda: _from_managers(ix, migs))
    zones = gcp_zone(tags.get(ZONE_TAG)).union(*(_manager_zones(ix, m) for m in migs))
    return Pool(key=key, cloud="gcp", anchor=tmpl, instance=instance, instance_types=(instance.name,),
                nodes=nodes, nodes_source=source, fabric=gcp_fabric(items(p, "networkInterfaces"), instance),
                placement=gcp_placement(ix, tmpl, p), zones=zones, hints=hints(tags), members=[tmpl, *migs])


def find(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    users = _managers(ix)
    pools = [_pool(ix, config, tmpl, users.get(id(tmpl), [])) for tmpl in ix.of(*TEMPLATES)]
    return [p for p in pools if p is not None]
