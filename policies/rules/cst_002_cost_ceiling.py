"""AIC-CST-002: the cluster's accelerator nodes cost at most a ceiling per hour, at max nodes.

Optional: without `maxUsdPerHour` in the config the rule is not applicable. Each pool is priced
where and as it is bought: the stack's region (read off its zones, ARNs and locations) and the
pool's capacity type (spot, On-Demand Capacity Reservation or GCP reservation, Capacity Block,
flex-start, else on-demand; model/capacity.py reads it off the raw resources), from the catalog's
price list (catalog/prices.yaml via catalog.pricing, each figure with its source and date);
`aicluster.design.balance.assess` sums them. A pool with no catalog price in that region on that
capacity type cannot be shown to fit the ceiling and is reported; no other region's price stands in.
"""
from __future__ import annotations

import dataclasses

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import assess

from ._base import POOL_NODES, cluster, config, not_applicable, schema
from ._props import number
from .model.capacity import pool_capacity, stack_cloud, stack_region

ID = "AIC-CST-002"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    ceiling = number(cfg.get("maxUsdPerHour"))
    if ceiling is None:
        not_applicable(args, "no maxUsdPerHour in the policy config")
        return
    pools = c.sized_pools
    if not pools:
        not_applicable(args, "no accelerator pool of known size")
        return
    cloud = stack_cloud(pools)
    region = stack_region(c.index, cloud) if cloud else None
    anchor = pools[0].anchor.urn
    if region is None:
        report_violation(f"no region found in the stack (no zone, ARN or location): cannot price its pools "
                         f"against the ${ceiling:,.2f}/h ceiling", anchor)
        return
    shapes = [dataclasses.replace(p.shape(), region=region, capacity=pool_capacity(c.index, p)) for p in pools]
    b = assess(shapes, [])
    if b.usd_per_hour is None:
        unpriced = "; ".join(sorted({pb.price_basis for pb in b.pools if pb.usd_per_hour is None}))
        report_violation(f"{unpriced}: cannot show the cluster stays under ${ceiling:,.2f}/h", anchor)
        return
    if b.usd_per_hour > ceiling:
        parts = "; ".join(f"{pb.nodes} x {pb.instance_type} {shape.capacity} ${pb.usd_per_hour:,.2f}/h "
                          f"({pb.price_basis})" for pb, shape in zip(b.pools, shapes))
        report_violation(f"${b.usd_per_hour:,.2f}/h at max nodes ({parts}) > ${ceiling:,.2f}/h ceiling", anchor)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="cost-ceiling",
    description="When a ceiling is configured, the accelerator nodes at max nodes cost at most that many $ per hour "
                "(catalog list prices for the stack's region and each pool's capacity type).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Lower max nodes, choose a cheaper type or capacity type, or raise maxUsdPerHour in the "
                      "policy config.",
    config_schema=schema(maxUsdPerHour={"type": "number", "minimum": 0,
                                        "description": "Ceiling in US$ per hour at max nodes (unset: rule off)."},
                         poolNodes=POOL_NODES),
    tags=["cost", "aws", "gcp"],
    validate=validate,
)
