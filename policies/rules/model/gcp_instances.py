"""GCP pools of accelerated `gcp:compute/instance`s: grouped by their `aicluster-pool` label, else by
machine type and resource policies; one instance is one node."""
from __future__ import annotations

from typing import Any, Mapping

from .._props import get, items, strings
from .cluster import Placement, Pool
from .common import catalog_type, gcp_zone, grouped, hints, instance_key, instance_pool, weakest
from .gcp_parts import gcp_fabric, gcp_placement
from .index import Index
from .kinds import GCE


def _key(ix: Index, r: Any) -> str | None:
    return instance_key(ix, r, "machineType", lambda p: ",".join(strings(get(p, "resourcePolicies"))) or "no-placement")


def _placement(ix: Index, members: list[Any]) -> Placement:
    """The first member's placement when all are compact, else the first member's that is not."""
    placements = [gcp_placement(ix, m, ix.props(m)) for m in members]
    if all(pl.compact for pl in placements):
        return placements[0]
    return next(pl for pl in placements if not pl.compact)


def _pool(ix: Index, config: Mapping[str, Any], key: str, members: list[Any]) -> Pool:
    types = [get(ix.props(m), "machineType") for m in members]
    instance = catalog_type(types[0])
    return instance_pool(config, "gcp", key, members, types,
                         fabric=weakest([gcp_fabric(items(ix.props(m), "networkInterfaces"), instance) for m in members]),
                         placement=_placement(ix, members),
                         zones=set().union(*(gcp_zone(get(ix.props(m), "zone")) for m in members)),
                         pool_hints=hints(ix.tags(members[0])))


def find(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    groups = grouped(ix.of(GCE), lambda r: _key(ix, r))
    return [_pool(ix, config, key, members) for key, members in groups.items()]
