"""Lookups every finder shares: catalog types, workload hints, pool sizes, zones, grouping."""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from aicluster.catalog import InstanceType, load_catalog

from .._props import POOL, ROLE, get, integer, is_unknown, matches, number
from .cluster import Fabric, Placement, Pool
from .index import Index
from .kinds import CONFIG_SOURCE, HINT_TAGS, NOT_A_POOL

_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")           # GCP zone (us-central1-a)

Size = tuple[int | None, str]


def catalog_type(name: Any) -> InstanceType | None:
    return load_catalog().find(name) if isinstance(name, str) and not is_unknown(name) else None


def not_a_pool(tags: Mapping[str, str]) -> bool:
    """Head, control-plane and login nodes are never a pool, whatever their type."""
    return tags.get(ROLE) in NOT_A_POOL


def hints(tags: Mapping[str, str]) -> dict[str, float]:
    out = {}
    for field_name, tag in HINT_TAGS.items():
        value = number(tags.get(tag))
        if value is not None:
            out[field_name] = value
    return out


def config_nodes(config: Mapping[str, Any], *names: str) -> int | None:
    """The policy config `poolNodes` entry (glob) that matches one of `names`."""
    table = config.get("poolNodes")
    if not isinstance(table, Mapping):
        return None
    for pattern, value in table.items():
        if matches(str(pattern), *names):
            n = integer(value)
            if n is not None:
                return n
    return None


def first_size(default_source: str, *finders: Callable[[], Size | None]) -> Size:
    """The first finder that gives a node count, in order; else (None, default_source)."""
    for find in finders:
        found = find()
        if found is not None and found[0] is not None:
            return found
    return None, default_source


def from_config(config: Mapping[str, Any], *names: str) -> Callable[[], Size]:
    return lambda: (config_nodes(config, *names), CONFIG_SOURCE)


def from_tag(tags: Mapping[str, str], tag: str, word: str) -> Callable[[], Size]:
    return lambda: (integer(tags.get(tag)), f"{word} {tag}")


def subnet_zones(ix: Index, subnets: Iterable[Any]) -> set[str]:
    zones = set()
    for s in subnets:
        z = get(ix.props(s), "availabilityZone")
        if isinstance(z, str) and z:
            zones.add(z)
    return zones


def gcp_zone(value: Any) -> set[str]:
    return {value.split("/")[-1]} if isinstance(value, str) and _ZONE.match(value.split("/")[-1]) else set()


def unique(values: Iterable[Any]) -> list[Any]:
    """In order, without repeats (by equality: resources need not be hashable)."""
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def grouped(resources: Iterable[Any], key_of: Callable[[Any], str | None]) -> dict[str, list[Any]]:
    """Resources by key, in first-seen order; a key of None leaves the resource out."""
    groups: dict[str, list[Any]] = {}
    for r in resources:
        key = key_of(r)
        if key is not None:
            groups.setdefault(key, []).append(r)
    return groups


def instance_key(ix: Index, r: Any, type_prop: str, where: Callable[[Mapping], str]) -> str | None:
    """The pool of a plain accelerated instance: its `aicluster-pool` tag, else type@where; None
    for an instance that is not a pool's (a head, or a type the catalog does not accelerate)."""
    p, tags = ix.props(r), ix.tags(r)
    if not_a_pool(tags) or not catalog_type(get(p, type_prop)):
        return None
    return tags.get(POOL) or f"{get(p, type_prop)}@{where(p)}"


def weakest(fabrics: Sequence[Fabric]) -> Fabric:
    """The pool's fabric is its least wired member's."""
    return min(fabrics, key=lambda f: f.wired)


def instance_pool(config: Mapping[str, Any], cloud: str, key: str, members: list[Any], types: list[Any], *,
                  fabric: Fabric, placement: Placement, zones: set[str], pool_hints: dict[str, float]) -> Pool:
    """A pool of plain instances: one instance is one node, unless the policy config says otherwise."""
    nodes = config_nodes(config, key, *[m.name for m in members])
    return Pool(key=key, cloud=cloud, anchor=members[0], instance=catalog_type(types[0]),
                instance_types=tuple(dict.fromkeys(types)),
                nodes=nodes if nodes is not None else len(members),
                nodes_source=CONFIG_SOURCE if nodes is not None else f"{len(members)} instance(s)",
                fabric=fabric, placement=placement, zones=zones, hints=pool_hints, members=members)
