"""AIC-NET-002: multi-node fabric pools sit in a cluster placement group or compact placement.

AWS: a placement group with strategy `cluster` (ParallelCluster's EfaPlacementGroupValidator); a
capacity reservation or a capacity block fixes placement itself, so a pool that targets one passes
(ParallelCluster warns against adding a group there). GCP: a resource policy with
groupPlacementPolicy.collocation = COLLOCATED, or a GKE node pool with placementPolicy.type =
COMPACT; a specific reservation brings its own placement (Cluster Toolkit's A3 Ultra / A4 blueprints). A placement group named but
not defined in the stack cannot be read and is accepted.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, not_applicable, schema

ID = "AIC-NET-002"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "aws:ec2/placementGroup", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:compute/resourcePolicy", "gcp:container/nodePool")


def validate(args, report_violation) -> None:
    c = cluster(args)
    judged = [p for p in c.pools if p.fabric_capable and p.multi_node]
    if not judged:
        not_applicable(args, "no pool of two or more EFA- or RDMA-capable nodes")
        return
    for pool in judged:
        pl = pool.placement
        if pl.compact or pl.reservation or (pl.group and not pl.verified):
            continue
        want = "a placement group with strategy cluster" if pool.cloud == "aws" else \
            "compact placement (resource policy collocation COLLOCATED, or node pool placementPolicy COMPACT)"
        fabric = "EFA" if pool.cloud == "aws" else "GPU NIC"
        if pl.group:
            report_violation(f"{pool.label()}: {fabric}-capable nodes in {pl.group!r} with strategy {pl.strategy}, not "
                             f"{want}", pool.anchor.urn)
        else:
            report_violation(f"{pool.label()}: {pool.nodes} {fabric}-capable nodes in no placement group and no "
                             f"reservation or capacity block fixes their placement; needs {want}", pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="fabric-placement",
    description="A pool of two or more EFA- or RDMA-capable nodes is in a cluster placement group (AWS) or compact "
                "placement (GCP), unless a reservation or capacity block provides the placement.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "AWS: create an aws.ec2.PlacementGroup with strategy='cluster' and name it in the launch template's "
        "placement.group_name (or the autoscaling group's placement_group); or target a capacity reservation / "
        "capacity block. GCP: attach a gcp.compute.ResourcePolicy with group_placement_policy.collocation="
        "'COLLOCATED', or set placement_policy.type='COMPACT' on the GKE node pool, or consume a specific "
        "reservation."),
    config_schema=schema(poolNodes=POOL_NODES),
    tags=["network", "placement", "aws", "gcp"],
    validate=validate,
)
