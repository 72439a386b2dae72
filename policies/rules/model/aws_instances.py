"""AWS pools of accelerated `aws:ec2/instance`s that launch from no template: grouped by their
`aicluster-pool` tag, else by type and placement group; one instance is one node."""
from __future__ import annotations

from typing import Any, Collection, Mapping

from .._props import get
from .aws_fabric import instance_fabric
from .aws_launchers import launcher_zones
from .aws_placement import placement_group, reservation
from .cluster import Placement, Pool
from .common import catalog_type, grouped, hints, instance_key, instance_pool, weakest
from .index import Index
from .kinds import INSTANCE


def _key(ix: Index, r: Any) -> str | None:
    return instance_key(ix, r, "instanceType", lambda p: get(p, "placementGroup") or "no-placement-group")


def _placement(ix: Index, members: list[Any]) -> Placement:
    """The members' placement group and reservation, when every member has one."""
    placements = [placement_group(ix, m, "placementGroup") for m in members]
    found = placements[0] if all(placements) else Placement()
    reservations = [reservation(ix.props(m)) for m in members]
    found.reservation = reservations[0] if all(reservations) else None
    return found


def _hints(ix: Index, members: list[Any]) -> dict[str, float]:
    """Every member's hint tags; the first member that carries a hint wins."""
    out: dict[str, float] = {}
    for m in members:
        out = {**hints(ix.tags(m)), **out}
    return out


def _pool(ix: Index, config: Mapping[str, Any], key: str, members: list[Any]) -> Pool:
    types = [get(ix.props(m), "instanceType") for m in members]
    instance = catalog_type(types[0])
    return instance_pool(config, "aws", key, members, types,
                         fabric=weakest([instance_fabric(ix, m, instance) for m in members]),
                         placement=_placement(ix, members),
                         zones=set().union(*(launcher_zones(ix, m) for m in members)),
                         pool_hints=_hints(ix, members))


def find(ix: Index, config: Mapping[str, Any], claimed: Collection[int]) -> list[Pool]:
    groups = grouped((r for r in ix.of(INSTANCE) if id(r) not in claimed), lambda r: _key(ix, r))
    return [_pool(ix, config, key, members) for key, members in groups.items()]
