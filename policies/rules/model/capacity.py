"""How a pool's nodes are bought and where: its capacity type (the spec's pools[].capacity.type
words) and the stack's region, read off raw resources, so the cost rules price it as billed.

AWS: a launch template's or instance's `instanceMarketOptions.marketType` (spot, capacity-block),
its `capacityReservationSpecification` target (an On-Demand Capacity Reservation), an EKS node
group's `capacityType` (SPOT, CAPACITY_BLOCK), an autoscaling group with no on-demand share above
its base (all Spot). GCP: an instance or template's `scheduling.provisioningModel` (SPOT,
FLEX_START) or `preemptible`, a GKE node pool's `nodeConfig.spot` / `preemptible` /
`flexStart` or queued provisioning, a TPU VM's `schedulingConfig` (spot, preemptible, reserved),
and a specific reservation affinity (the placement finders record it).
"""
from __future__ import annotations

import re
from typing import Mapping

from .._props import get
from .cluster import Pool
from .index import Index

_AZ = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")          # us-east-1a -> us-east-1
_ARN_REGION = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:([a-z]{2}(?:-[a-z]+)+-\d+):")
_GCP_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")            # us-east4-a -> us-east4
_GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")                 # us-east4


def _aws(p: Mapping) -> str | None:
    market = get(p, "instanceMarketOptions", "marketType")
    if market in ("spot", "capacity-block"):
        return market
    kind = get(p, "capacityType")                     # EKS node group
    if kind in ("SPOT", "CAPACITY_BLOCK"):
        return {"SPOT": "spot", "CAPACITY_BLOCK": "capacity-block"}[kind]
    dist = get(p, "mixedInstancesPolicy", "instancesDistribution", default={})
    if get(dist, "onDemandPercentageAboveBaseCapacity") == 0 and not get(dist, "onDemandBaseCapacity"):
        return "spot"
    target = get(p, "capacityReservationSpecification", "capacityReservationTarget", default={})
    if any(get(target, k) for k in ("capacityReservationId", "capacityReservationIds",
                                     "capacityReservationResourceGroupArn", "capacityReservationResourceGroupArns")):
        return "reservation"
    return None


def _gcp(p: Mapping) -> str | None:
    for sched in (get(p, "scheduling", default={}), get(p, "nodeConfig", default={}),
                  get(p, "schedulingConfig", default={})):
        model = get(sched, "provisioningModel")
        if model == "FLEX_START" or get(sched, "flexStart") is True:
            return "flex-start"
        if model == "SPOT" or get(sched, "spot") is True or get(sched, "preemptible") is True:
            return "spot"
        if get(sched, "reserved") is True:
            return "reservation"
    if get(p, "queuedProvisioning", "enabled") is True:     # GKE flex-start node pools
        return "flex-start"
    return None


def pool_capacity(ix: Index, pool: Pool) -> str:
    """on-demand | spot | reservation | capacity-block | flex-start, as the pool's resources say."""
    read = _aws if pool.cloud == "aws" else _gcp
    for r in (pool.anchor, *pool.members):
        found = read(ix.props(r))
        if found:
            return found
    held = pool.placement.reservation or ""
    if held.startswith("capacity block"):
        return "capacity-block"
    return "reservation" if held else "on-demand"


def stack_region(ix: Index, cloud: str) -> str | None:
    """The stack's region, or None when no resource says. Resources carry no provider region: read
    it off subnets' zones and ARNs (aws), or off the zones, regions and locations of the resources
    themselves (gcp)."""
    for r in ix.resources:
        p = ix.props(r)
        if cloud == "aws":
            for value in (get(p, "availabilityZone"), get(p, "logDestination"), get(p, "arn")):
                if isinstance(value, str) and (m := _AZ.match(value) or _ARN_REGION.match(value)):
                    return m.group(1)
        else:
            for value in (get(p, "region"), get(p, "zone"), get(p, "location")):
                if isinstance(value, str):
                    value = value.split("/")[-1]
                    if m := _GCP_ZONE.match(value):
                        return m.group(1)
                    if _GCP_REGION.match(value):
                        return value
    return None


def stack_cloud(pools: list[Pool]) -> str | None:
    clouds = {p.cloud for p in pools}
    return clouds.pop() if len(clouds) == 1 else None


__all__ = ["pool_capacity", "stack_cloud", "stack_region"]
