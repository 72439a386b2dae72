"""AWS: where a pool's nodes land: placement groups, capacity reservations and capacity blocks."""
from __future__ import annotations

from typing import Any, Mapping

from .._props import get, is_unknown, items
from .cluster import Placement
from .index import Index
from .kinds import PLACEMENT_GROUP

_WHOLE = object()


def placement_group(ix: Index, r: Any, prop: str, value: Any = _WHOLE) -> Placement | None:
    """The placement group property `prop` of `r` names (or the given part of it); None if none."""
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


def reservation(p: Mapping) -> str | None:
    """The capacity reservation or capacity block a template or instance launches into."""
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


def node_group_block(p: Mapping) -> str | None:
    """An EKS node group of capacity type CAPACITY_BLOCK."""
    return "capacity block (node group)" if get(p, "capacityType") == "CAPACITY_BLOCK" else None
