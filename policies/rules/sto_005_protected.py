"""AIC-STO-005: stateful storage is protected and retained.

Almost every FSx field forces replacement, and replacement loses the data (ParallelCluster #4651,
#6211, #6357). Filesystems and databases therefore carry Pulumi's `protect` (no delete or replace)
and `retainOnDelete` (even `pulumi destroy` leaves them). Scratch deployment types (SCRATCH_1,
SCRATCH_2) are exempt by default: they hold no state worth keeping. A Cloud SQL database
(gcp:sql/database) is judged like its instance: deleting or replacing it drops its tables.

What the engine shows a policy: `protect` is in the resource options CrossGuard receives;
`retainOnDelete` is not (the analyzer protocol's AnalyzerResourceOptions has no such field). Under
`pulumi preview` this rule therefore judges `protect` only; `aicluster check` also sees
`retainOnDelete` from the offline plan and judges both.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import config, not_applicable, schema
from ._props import get, kind, plain

ID = "AIC-STO-005"
SUPPORTED = ("aws:fsx/lustreFileSystem", "aws:efs/fileSystem", "aws:rds/instance", "aws:rds/cluster",
             "gcp:lustre/instance", "gcp:filestore/instance", "gcp:sql/databaseInstance", "gcp:sql/database")
_EXEMPT_DEFAULT = ["SCRATCH_1", "SCRATCH_2"]


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    if k == "aws:fsx/lustreFileSystem":
        deployment = get(plain(args.props), "deploymentType") or "SCRATCH_1"
        if deployment in config(args).get("exemptDeploymentTypes", _EXEMPT_DEFAULT):
            not_applicable(args, f"{deployment} is exempt (exemptDeploymentTypes)")
            return
    missing = []
    if not getattr(args.opts, "protect", False):
        missing.append("protect")
    retain = getattr(args.opts, "retain_on_delete", None)   # set by aicluster check; absent under the engine
    if retain is False:
        missing.append("retainOnDelete")
    if missing:
        report_violation(f"{k.split('/')[-1]} {args.name!r} is stateful storage without the resource option(s) "
                         f"{' and '.join(missing)}: a replacing change or `pulumi destroy` deletes its data", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="stateful-storage-protected",
    description="Filesystems and databases carry the protect and retainOnDelete resource options.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Create the resource with opts=pulumi.ResourceOptions(protect=True, retain_on_delete=True) set on the "
        "resource itself (aicluster does this unless the storage spec says protect: false). To replace it on "
        "purpose: back it up, `pulumi state unprotect <urn>`, then `pulumi up`."),
    config_schema=schema(exemptDeploymentTypes={
        "type": "array", "items": {"type": "string"}, "default": _EXEMPT_DEFAULT,
        "description": "FSx deployment types that hold no state worth protecting."}),
    tags=["storage", "data-safety", "aws", "gcp"],
    validate=validate,
)
