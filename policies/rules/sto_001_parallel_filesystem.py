"""AIC-STO-001: a multi-node GPU (or Trainium) cluster has a parallel filesystem.

Training data and checkpoints of a multi-node job go to shared storage that scales with the
clients: FSx for Lustre on AWS, Managed Lustre on GCP. NFS (Filestore, EFS) is for homes and
small shared data (Filestore and EFS throughput: cloud.google.com/filestore/docs/performance, docs.aws.amazon.com/efs/latest/ug/performance.html). TPU-only stacks are left out: they commonly stream from GCS.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, gpus, not_applicable, schema

ID = "AIC-STO-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "aws:fsx/lustreFileSystem", "aws:efs/fileSystem", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool", "gcp:lustre/instance", "gcp:filestore/instance")


def validate(args, report_violation) -> None:
    c = cluster(args)
    pools = [p for p in c.sized_pools if not p.tpu]
    nodes = sum(p.nodes for p in pools)
    if nodes < 2:
        not_applicable(args, "fewer than two GPU or Trainium nodes")
        return
    if c.parallel_filesystems:
        return
    unit = gpus(pools)
    others = [f"{f.key} ({f.detail})" for f in c.filesystems]
    report_violation(
        f"{nodes} nodes ({sum(p.accelerators for p in pools)} {unit}s: "
        f"{', '.join(f'{p.nodes} x {p.instance.name}' for p in pools)}) and no parallel filesystem"
        + (f"; only {', '.join(others)}" if others else ""), pools[0].anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="parallel-filesystem",
    description="A cluster of two or more GPU or Trainium nodes has a parallel filesystem (FSx for Lustre, Managed Lustre).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Add an aws.fsx.LustreFileSystem (GCP: gcp.lustre.Instance) in the pools' zone, sized with "
        "AIC-STO-002's floor (a spec `storage:` entry of type lustre does this)."),
    config_schema=schema(poolNodes=POOL_NODES),
    tags=["storage", "aws", "gcp"],
    validate=validate,
)
