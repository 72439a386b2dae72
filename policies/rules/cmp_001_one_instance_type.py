"""AIC-CMP-001: one instance type per pool or node group.

A pool is the unit Slurm partitions, NCCL rings and the balance model count in: a mixed-instances
autoscaling group, an EKS node group with several instanceTypes or same-pool instances of different
types give nodes with different GPU counts, fabrics and memory (and p4d does not exchange EFA
traffic with other types, docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html).
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, not_applicable, schema

ID = "AIC-CMP-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool")


def validate(args, report_violation) -> None:
    c = cluster(args)
    if not c.pools:
        not_applicable(args, "no accelerator pool")
        return
    for pool in c.pools:
        types = sorted(set(pool.instance_types))
        if len(types) > 1:
            members = ", ".join(f"{m.resource_type.split(':')[1]} {m.name}" for m in pool.members)
            report_violation(f"pool {pool.key}: {len(types)} instance types ({', '.join(types)}) in one pool "
                             f"({members})", pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="one-instance-type-per-pool",
    description="Every pool, autoscaling group or node group runs a single instance type.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Split the pool: one launch template / node group / autoscaling group per instance type, each its own "
        "Slurm partition or Kubernetes node pool."),
    config_schema=schema(poolNodes=POOL_NODES),
    tags=["compute", "aws", "gcp"],
    validate=validate,
)
