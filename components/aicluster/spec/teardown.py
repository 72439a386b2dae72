"""What `aicluster destroy` does with each stored thing: the spec's `on_delete` policies.

retain (the default everywhere): protected and retained; `aicluster destroy` leaves it, and what
    it needs (its subnet, security group, key), in the cloud and says how to delete it by hand.
snapshot: a final backup first (the cloud's own on delete where it has one: FSx for Lustre, RDS,
    Cloud SQL; `aicluster destroy` takes it otherwise: EFS through AWS Backup, a Filestore
    backup), then deleted.
delete: deleted with the stack.

Only kinds the cloud can back up take `snapshot`: FSx scratch filesystems, S3-linked FSx, Managed
Lustre, the metrics workspace and the head node have no backup of their kind
(docs/teardown.md). Pure: no Pulumi.
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

from aicluster.errors import Problem

OnDelete = Literal["retain", "snapshot", "delete"]
ON_DELETE = ("retain", "snapshot", "delete")
NO_SNAPSHOT = ("retain", "delete")

DESCRIPTION = ("What `aicluster destroy` does with it (docs/teardown.md): retain (default) keeps it and what it "
               "needs in the cloud; snapshot takes a final backup, then deletes it; delete deletes it. Pulumi's "
               "`protect` stays on with every policy: a plain `pulumi destroy` is still refused.")


def storage_backup(cloud: str, fs: Any) -> str | None:
    """Why a storage entry has no final backup of its kind, or None when it has one."""
    if fs.type == "lustre" and cloud == "gcp":
        return "Managed Lustre has no backup (export its files to Cloud Storage first)"
    if fs.type == "lustre" and not fs.deployment_type.startswith("PERSISTENT"):
        return f"FSx takes no backup of a {fs.deployment_type} (scratch) filesystem"
    if fs.type == "lustre" and fs.import_path is not None:
        return "FSx takes no final backup of a filesystem linked to S3 (its files are in the bucket)"
    return None


def on_delete_problems(cloud: str, scheduler: str, storage: Sequence[Any], slurm: Any, monitoring: Any) -> list[Problem]:
    """`snapshot` only where the cloud backs the kind up; a policy only where it applies."""
    problems = []
    for i, fs in enumerate(storage):
        at = f"storage[{i}].on_delete"
        if not fs.protect and "on_delete" in fs.model_fields_set and fs.on_delete != "delete":
            problems.append(Problem(at, fs.on_delete, "delete, or leave it out, with protect: false (an unprotected "
                                    "filesystem is deleted with the stack); or protect: true", "delete"))
        elif fs.on_delete == "snapshot" and (why := storage_backup(cloud, fs)):
            problems.append(Problem(at, fs.on_delete, f"retain or delete ({why})"))
    db_at = "slurm.accounting_on_delete"
    if "accounting_on_delete" in slurm.model_fields_set and (scheduler != "slurm" or slurm.accounting != "managed"):
        problems.append(Problem(db_at, slurm.accounting_on_delete, "leave it out unless slurm.accounting is managed "
                                "(accounting on the head lives and dies with the head: slurm.head_node.on_delete)"))
    if slurm.head_node.on_delete == "snapshot":
        problems.append(Problem("slurm.head_node.on_delete", "snapshot", "retain or delete (aicluster takes no image "
                                "of the head node; managed accounting keeps the history in a database that has backups)"))
    if monitoring.on_delete == "snapshot":
        what = ("Amazon Managed Service for Prometheus has no backup of a workspace" if cloud == "aws" else
                "gcp's metrics live in the project's Managed Service for Prometheus, not in the stack")
        problems.append(Problem("monitoring.on_delete", "snapshot", f"retain or delete ({what})"))
    return problems
