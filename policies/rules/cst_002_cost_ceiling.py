"""AIC-CST-002: the cluster's accelerator nodes cost at most a ceiling per hour, at max nodes.

Optional: without `maxUsdPerHour` in the config the rule is not applicable. Prices are the
catalog's list prices (us-east-1 on-demand, dated); `aicluster.design.balance.assess` sums them. A type
without a catalog price cannot be shown to fit the ceiling and is reported.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import assess

from ._base import POOL_NODES, cluster, config, not_applicable, schema
from ._props import number

ID = "AIC-CST-002"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool")


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
    b = assess([p.shape() for p in pools], [])
    anchor = pools[0].anchor.urn
    if b.usd_per_hour is None:
        unpriced = sorted({p.instance.name for p in pools if p.instance.price is None})
        report_violation(f"no catalog price for {', '.join(unpriced)}: cannot show the cluster stays under "
                         f"${ceiling:,.2f}/h", anchor)
        return
    if b.usd_per_hour > ceiling:
        parts = ", ".join(f"{pb.nodes} x {pb.instance_type} ${pb.usd_per_hour:,.2f}/h" for pb in b.pools)
        report_violation(f"${b.usd_per_hour:,.2f}/h at max nodes ({parts}; list price "
                         f"{pools[0].instance.price.region} {pools[0].instance.price.date}) > ${ceiling:,.2f}/h ceiling",
                         anchor)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="cost-ceiling",
    description="When a ceiling is configured, the accelerator nodes at max nodes cost at most that many $ per hour "
                "(catalog list prices).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Lower max nodes, choose a cheaper type, or raise maxUsdPerHour in the policy config.",
    config_schema=schema(maxUsdPerHour={"type": "number", "minimum": 0,
                                        "description": "Ceiling in US$ per hour at max nodes (unset: rule off)."},
                         poolNodes=POOL_NODES),
    tags=["cost", "aws", "gcp"],
    validate=validate,
)
