"""AIC-SEC-003: volumes and filesystems are encrypted at rest.

Judged where encryption is optional: EBS volumes in launch templates and EC2 Image Builder image
recipes (blockDeviceMappings[].ebs: a baked image's snapshots),
instances (root and EBS block devices), aws:ebs/volume, aws:efs/fileSystem, and RDS databases
(aws:rds/instance, aws:rds/cluster: `storageEncrypted`, unset means unencrypted, except that Aurora
Serverless v1, engineMode serverless, is always encrypted). FSx for Lustre, every GCP disk and
filesystem, and Cloud SQL (gcp:sql/databaseInstance: Google-managed keys, or CMEK) are always
encrypted at rest by the service, so they pass by construction. A launch template or instance with
no block device mapping takes the image's volumes as they are, and an RDS replica or snapshot
restore that leaves storageEncrypted unset takes its source's encryption: neither is judged.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import schema
from ._props import get, is_unknown, items, kind, plain, truthy

ID = "AIC-SEC-003"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:imagebuilder/imageRecipe", "aws:ec2/instance", "aws:ebs/volume",
             "aws:efs/fileSystem", "aws:rds/instance", "aws:rds/cluster")
# An RDS database created from another one (a read replica, a snapshot or cluster restore) inherits
# its source's encryption when storageEncrypted is left unset.
_RDS_SOURCES = ("replicateSourceDb", "snapshotIdentifier", "replicationSourceIdentifier", "restoreToPointInTime",
                "s3Import")


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    p = plain(args.props)
    plain_text: list[str] = []

    def judge(label: str, value) -> None:
        if not is_unknown(value) and truthy(value) is not True:
            plain_text.append(f"{label} ({'unset' if value is None else repr(value)})")

    if k in ("aws:ec2/launchTemplate", "aws:imagebuilder/imageRecipe"):
        for i, m in enumerate(items(p, "blockDeviceMappings")):
            if get(m, "ebs") is not None:
                judge(f"blockDeviceMappings[{i}] {get(m, 'deviceName', default='')}".rstrip(), get(m, "ebs", "encrypted"))
    elif k == "aws:ec2/instance":
        if get(p, "rootBlockDevice") is not None:
            judge("rootBlockDevice", get(p, "rootBlockDevice", "encrypted"))
        for i, d in enumerate(items(p, "ebsBlockDevices")):
            judge(f"ebsBlockDevices[{i}] {get(d, 'deviceName', default='')}".rstrip(), get(d, "encrypted"))
    elif k in ("aws:rds/instance", "aws:rds/cluster"):
        encrypted = get(p, "storageEncrypted")
        inherited = encrypted is None and any(get(p, key) is not None for key in _RDS_SOURCES)   # from its source
        if not inherited and get(p, "engineMode") != "serverless":
            judge("storageEncrypted", encrypted)
    else:
        judge("encrypted", get(p, "encrypted"))
    if plain_text:
        report_violation(f"{k} {args.name!r} has unencrypted storage: {', '.join(plain_text)}", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="storage-encrypted",
    description="EBS volumes (in launch templates, image recipes, instances or on their own), EFS filesystems and "
                "RDS databases are encrypted at rest.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Set encrypted='true' on every launch-template EBS mapping (a string in pulumi_aws v7), encrypted=True on "
        "instance block devices, aws.ebs.Volume and aws.efs.FileSystem, storage_encrypted=True on aws.rds.Instance and "
        "aws.rds.Cluster (optionally with a KMS key; an existing RDS database is encrypted by restoring an encrypted "
        "snapshot copy)."),
    config_schema=schema(),
    tags=["security", "aws"],
    validate=validate,
)
