"""AIC-CST-001: the cluster's resources carry the required tags (GCP: labels).

Cost allocation and every aicluster tool find a cluster's resources by tag; the defaults are the
labels aicluster sets itself (aicluster-cluster, aicluster-role). Autoscaling groups are judged
by their tag list, GKE node pools by nodeConfig.resourceLabels / labels.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import config, schema
from ._props import kind, plain, tags_of

ID = "AIC-CST-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "aws:ec2/placementGroup", "aws:ec2/securityGroup", "aws:ec2/vpc", "aws:ec2/subnet",
             "aws:fsx/lustreFileSystem", "aws:efs/fileSystem", "aws:ebs/volume", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool", "gcp:tpu/v2Vm", "gcp:lustre/instance", "gcp:filestore/instance")
DEFAULT_TAGS = ["aicluster-cluster", "aicluster-role"]


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    required = config(args).get("requiredTags", DEFAULT_TAGS)
    tags = tags_of(plain(args.props), args.resource_type)
    missing = [t for t in required if not tags.get(t)]
    if missing:
        noun = "labels" if k.startswith("gcp:") else "tags"
        report_violation(f"{k} {args.name!r} lacks the required {noun} {', '.join(missing)} "
                         f"(has: {', '.join(sorted(tags)) or 'none'})", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="required-tags",
    description="Compute, network and storage resources carry the required tags or labels.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps=(
        "Add the missing tags (GCP: labels, lowercase) to the resource; aicluster sets aicluster-cluster and "
        "aicluster-role on everything it builds, plus the spec's `tags`."),
    config_schema=schema(requiredTags={"type": "array", "items": {"type": "string"}, "default": DEFAULT_TAGS,
                                       "description": "Tag (label) keys every judged resource must carry."}),
    tags=["cost", "aws", "gcp"],
    validate=validate,
)
