"""AIC-STO-005: stateful storage is protected and retained.

Almost every FSx field forces replacement, and replacement loses the data (ParallelCluster #4651,
#6211, #6357). Filesystems and databases therefore carry Pulumi's `protect` (no delete or replace)
and `retainOnDelete` (even `pulumi destroy` leaves them). Scratch deployment types (SCRATCH_1,
SCRATCH_2) are exempt by default: they hold no state worth keeping. A Cloud SQL database
(gcp:sql/database) is judged like its instance: deleting or replacing it drops its tables.

With `on_delete: snapshot` (docs/teardown.md) a resource stays protected but not retained: its own
delete takes a final backup (FSx skipFinalBackup false, RDS skipFinalSnapshot false, Cloud SQL
settings.finalBackupConfig enabled), and only `aicluster destroy`, after unprotecting it, deletes it.
That passes: the data survives the delete. `on_delete: delete` (no retain, no final backup) fails
on purpose: a cluster whose data goes with it is a choice to state in a waiver.

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
    if retain is False and not _final_backup(k, plain(args.props)):
        missing.append("retainOnDelete")
    if missing == ["retainOnDelete"]:
        report_violation(f"{k.split('/')[-1]} {args.name!r} is stateful storage without the resource option(s) "
                         "retainOnDelete: protected, but deleting it (aicluster destroy under on_delete: delete, "
                         "or snapshot by a backup the pack cannot see on EFS and Filestore) takes no final backup "
                         "of its own; waive AIC-STO-005 for it if that is the intent (docs/teardown.md)", None)
    elif missing:
        report_violation(f"{k.split('/')[-1]} {args.name!r} is stateful storage without the resource option(s) "
                         f"{' and '.join(missing)}: a replacing change or `pulumi destroy` deletes its data", None)


def _final_backup(k: str, props) -> bool:
    """The resource's own delete takes a final backup (on_delete: snapshot), so deleting it keeps the data."""
    if k == "aws:fsx/lustreFileSystem":
        return get(props, "skipFinalBackup") is False
    if k in ("aws:rds/instance", "aws:rds/cluster"):
        return get(props, "skipFinalSnapshot") is False and bool(get(props, "finalSnapshotIdentifier"))
    if k == "gcp:sql/databaseInstance":
        return get(props, "settings", "finalBackupConfig", "enabled") is True
    return False


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="stateful-storage-protected",
    description="Filesystems and databases carry the protect and retainOnDelete resource options "
                "(or, protected, take a final backup when deleted).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Create the resource with opts=pulumi.ResourceOptions(protect=True, retain_on_delete=True) set on the "
        "resource itself (aicluster does this unless the spec says protect: false, or on_delete: snapshot, which keeps "
        "protect and takes a final backup). To replace it on purpose: back it up, `pulumi state unprotect <urn>`, "
        "then `pulumi up`. A cluster whose data is deleted with it (on_delete: delete) needs a waiver."),
    config_schema=schema(exemptDeploymentTypes={
        "type": "array", "items": {"type": "string"}, "default": _EXEMPT_DEFAULT,
        "description": "FSx deployment types that hold no state worth protecting."}),
    tags=["storage", "data-safety", "aws", "gcp"],
    validate=validate,
)
