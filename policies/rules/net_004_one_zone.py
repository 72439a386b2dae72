"""AIC-NET-004: the fabric pools and the parallel filesystems are in one zone.

EFA traffic does not cross Availability Zones (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html); a filesystem in another zone
adds cross-zone latency and data-transfer charges to every read and checkpoint. Zones come from
launch template placement, subnets (availabilityZone), autoscaling groups, GCP zones and locations;
a member whose zone cannot be read is left out.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import cluster, not_applicable, schema

ID = "AIC-NET-004"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "aws:ec2/subnet", "aws:fsx/lustreFileSystem", "gcp:compute/instance", "gcp:compute/instanceGroupManager",
             "gcp:container/nodePool", "gcp:tpu/v2Vm", "gcp:lustre/instance")


def _members(c) -> list[tuple[str, set[str], object]]:
    """(label, zones, resource) of every fabric pool and parallel filesystem with a known zone."""
    members = [(p.label(), p.zones, p.anchor) for p in c.pools if (p.fabric_capable or p.tpu) and p.zones]
    return members + [(f"filesystem {f.key}", f.zones, f.resource) for f in c.parallel_filesystems if f.zones]


def validate(args, report_violation) -> None:
    members = _members(cluster(args))
    if not any(m[0].startswith("pool") for m in members):
        not_applicable(args, "no fabric pool with a known zone")
        return
    zones = sorted(set().union(*[z for _, z, _ in members]))
    if len(zones) <= 1:
        return
    where = "; ".join(f"{label} in {', '.join(sorted(z))}" for label, z, _ in members)
    first = next(r for label, z, r in members if z != {zones[0]}) if members else None
    report_violation(f"fabric and filesystem span {len(zones)} zones ({', '.join(zones)}): {where}",
                     first.urn if first is not None else None)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="fabric-storage-one-zone",
    description="Fabric pools and parallel filesystems are in one zone.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Put every EFA/RDMA pool (its subnets, placement and autoscaling zones) and the parallel filesystem's "
        "subnet in the same Availability Zone (GCP: the same zone)."),
    config_schema=schema(),
    tags=["network", "storage", "aws", "gcp"],
    validate=validate,
)
