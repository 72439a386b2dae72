"""Subnets in a second zone, for the services AWS will not create in one zone only: the EKS control
plane's interfaces and an RDS DB subnet group both need subnets in two Availability Zones, while
aicluster's nodes live in one zone (one placement group). Pure.

The network design leaves the VPC's last quarter free; it is cut in four, and each service takes
its own two of them (EKS the first two, the accounting database the last two), one per zone, so
the two never overlap even if both were ever present.
"""
from __future__ import annotations

import ipaddress

from aicluster.catalog.kubernetes import second_zone


def two_zone_subnets(vpc_cidr: str, zone: str, other_zone: str | None, *, first: int) -> tuple[tuple[str, str], ...]:
    """((cidr, zone), (cidr, other zone)): parts `first` and `first + 1` of the VPC's last quarter
    cut in four; `other_zone` defaults to the zone's neighbour (a <-> b)."""
    last_quarter = list(ipaddress.ip_network(vpc_cidr).subnets(prefixlen_diff=2))[3]
    parts = list(last_quarter.subnets(prefixlen_diff=2))[first:first + 2]
    zones = (zone, other_zone or second_zone(zone))
    return tuple((str(net), z) for net, z in zip(parts, zones))
