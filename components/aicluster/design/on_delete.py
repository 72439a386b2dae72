"""The inputs an `on_delete` policy sets on a stateful resource besides `retain_on_delete`
(spec/teardown.py, docs/teardown.md): the cloud's own deletion protection, which must be off for
`aicluster destroy` to delete, and the provider's final-backup fields. Type token -> input paths
(camelCase, as Pulumi's state holds them; `a.b` is a nested key).

Every one of them updates in place or is read only when the resource is deleted, so changing
`on_delete` never replaces a resource (tests/safety/test_on_delete_edits.py holds that):
- FSx for Lustre skipFinalBackup, finalBackupTags: DeleteFileSystem's LustreConfiguration, sent at
  deletion only (FSx API Reference, DeleteFileSystemLustreConfiguration; terraform-provider-aws
  r/fsx_lustre_file_system: neither is ForceNew).
- RDS deletionProtection (ModifyDBInstance DeletionProtection), skipFinalSnapshot and
  finalSnapshotIdentifier (DeleteDBInstance's, read at deletion; terraform-provider-aws
  r/db_instance).
- EC2 disableApiTermination: ModifyInstanceAttribute on a running instance.
- Filestore deletionProtectionEnabled and its reason: instances.patch (updateMask).
- Cloud SQL: deletionProtection is the provider's own guard; settings.deletionProtectionEnabled
  and settings.finalBackupConfig are instances.patch settings; finalBackupDescription is read at
  deletion.
- Compute Engine deletionProtection (instances.setDeletionProtection) and the boot disk's
  autoDelete (instances.setDiskAutoDelete).
- Secret Manager deletionProtection: the provider's own guard.
Pure: no Pulumi.
"""
from __future__ import annotations

from typing import Any, Mapping

ON_DELETE_FIELDS: Mapping[str, tuple[str, ...]] = {
    "aws:fsx/lustreFileSystem": ("skipFinalBackup", "finalBackupTags"),
    "aws:rds/instance": ("deletionProtection", "skipFinalSnapshot", "finalSnapshotIdentifier"),
    "aws:ec2/instance": ("disableApiTermination",),
    "gcp:filestore/instance": ("deletionProtectionEnabled", "deletionProtectionReason"),
    "gcp:sql/databaseInstance": ("deletionProtection", "finalBackupDescription",
                                 "settings.deletionProtectionEnabled", "settings.finalBackupConfig"),
    "gcp:compute/instance": ("deletionProtection", "bootDisk.autoDelete"),
    "gcp:secretmanager/secret": ("deletionProtection",),
}


def field_value(inputs: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path of a resource's inputs, None where a key is missing."""
    node: Any = inputs
    for key in path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node
