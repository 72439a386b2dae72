"""AWS: the EFA fabric of a launch template or an instance (devices on distinct EFA cards)."""
from __future__ import annotations

from typing import Any

from aicluster.catalog import InstanceType

from .._props import get, integer, is_unknown, items, strings
from .cluster import Fabric
from .common import unique
from .index import Index
from .kinds import ENI, SG

EFA_TYPES = ("efa", "efa-only")


def _layout(efa: list) -> str:
    types = {get(n, "interfaceType") for n in efa}
    if not efa:
        return "none"
    if types == {"efa-only"}:
        return "efa-only"
    return "efa" if types == {"efa"} else "mixed"


def _template_groups(ix: Index, lt: Any, efa: list) -> list[Any] | None:
    """The security groups of the EFA interfaces (else of the template); None when they are named
    (or unknown) but not in this stack."""
    values = [get(n, "securityGroups") for n in efa] or [get(ix.props(lt), "vpcSecurityGroupIds")]
    prop = "networkInterfaces" if efa else "vpcSecurityGroupIds"
    groups = unique(g for value in values for g in ix.refs(lt, prop, {SG}, value=value))
    named = any(True for v in values for _ in strings(v)) or any(is_unknown(v) for v in values)
    return groups if groups or not named else None


def launch_template_fabric(ix: Index, lt: Any, instance: InstanceType) -> Fabric:
    efa = [n for n in items(ix.props(lt), "networkInterfaces") if get(n, "interfaceType") in EFA_TYPES]
    cards = sorted({integer(get(n, "networkCardIndex")) or 0 for n in efa} & set(instance.efa_cards or ()))
    return Fabric(wired=len(cards), layout=_layout(efa), cards=tuple(cards),
                  security_groups=_template_groups(ix, lt, efa),
                  detail=f"{len(efa)} EFA interface(s) on cards {cards}" if efa else "no EFA interface")


def instance_fabric(ix: Index, inst: Any, instance: InstanceType) -> Fabric:
    """An instance's EFA devices are the network interfaces attached to it."""
    cards, groups, efa_count = set(), [], 0
    for attachment in items(ix.props(inst), "networkInterfaces"):
        for eni in ix.refs(inst, "networkInterfaces", {ENI}, value=get(attachment, "networkInterfaceId")):
            if get(ix.props(eni), "interfaceType") in EFA_TYPES:
                efa_count += 1
                cards.add(integer(get(attachment, "networkCardIndex")) or 0)
                groups += [g for g in ix.refs(eni, "securityGroups", {SG}) if g not in groups]
    cards &= set(instance.efa_cards or ())
    return Fabric(wired=len(cards), layout="efa" if efa_count else "none", cards=tuple(sorted(cards)),
                  security_groups=groups, detail=f"{efa_count} EFA network interface(s)")
