"""What counts as a *stateful* resource: one definition, by resource type, for every stack.

A stateful resource holds something a replacement would lose: data (filesystems, volumes,
databases), the controller's state (the Slurm head node, the EKS/GKE control plane) or secret
material (the munge key, database passwords, and the random bytes behind them). Pulumi replaces a
resource when an input that forces replacement changes, so for these resources:

- routine spec edits (pool sizes, instance types, tags, SSH CIDRs, idle time, accounting) must
  leave their URN, inputs and options unchanged (tests/safety/);
- they carry `protect` and `retain_on_delete` (docs/data-safety.md), so an edit that really would replace
  one is refused by `pulumi up` instead of losing data (ParallelCluster #4651, #6211);
- they must not wait for each other needlessly: the filesystem and the control plane are created
  in parallel (components/aicluster/design/critical_path.py).

The table is by type token (`aws:fsx/lustreFileSystem`, the `module/resource` part of
`aws:fsx/lustreFileSystem:LustreFileSystem`), so stacks written later (EKS, GCP, GKE) are judged
the same way. The head node is the one case decided by a label: an `aws:ec2/instance` or
`gcp:compute/instance` tagged (GCP: labelled) `aicluster-role=head`. Pure: no Pulumi import.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

# kind -> type tokens without the class name ("package:module/resource").
STATEFUL_TYPES: Mapping[str, frozenset[str]] = {
    "filesystem": frozenset({
        "aws:fsx/lustreFileSystem",
        "aws:fsx/dataRepositoryAssociation",      # the S3 link of a Lustre filesystem
        "aws:fsx/openZfsFileSystem",
        "aws:fsx/ontapStorageVirtualMachine",
        "aws:fsx/ontapFileSystem",
        "aws:efs/fileSystem",
        "gcp:lustre/instance",                    # Managed Lustre
        "gcp:filestore/instance",
        "gcp:parallelstore/instance",
    }),
    "volume": frozenset({
        "aws:ebs/volume",
        "gcp:compute/disk",
        "gcp:compute/regionDisk",
    }),
    "database": frozenset({                       # Slurm accounting, when it is a managed service
        "aws:rds/instance",
        "aws:rds/cluster",
        "gcp:sql/databaseInstance",
        "gcp:sql/database",                       # dropping it drops the accounting history
    }),
    "secret": frozenset({
        "aws:secretsmanager/secret",
        "aws:secretsmanager/secretVersion",
        "gcp:secretmanager/secret",
        "gcp:secretmanager/secretVersion",
        "gcp:secretmanager/regionalSecret",
        "gcp:secretmanager/regionalSecretVersion",
    }),
    "secret-material": frozenset({                # replaced = a new key: every node loses munge
        "random:index/randomBytes",
        "random:index/randomPassword",
        "tls:index/privateKey",
    }),
    "encryption-key": frozenset({                 # deleting one makes what it encrypted unreadable
        "aws:kms/key",
        "gcp:kms/cryptoKey",
    }),
    "metrics": frozenset({                        # the metrics history (Managed Prometheus)
        "aws:amp/workspace",
    }),
    "control-plane": frozenset({
        "aws:eks/cluster",
        "gcp:container/cluster",
    }),
}

# Instances that are stateful only in one role: the Slurm head node (slurmctld's StateSaveLocation).
HEAD_NODE_TYPES = frozenset({"aws:ec2/instance", "gcp:compute/instance"})
ROLE_LABEL = "aicluster-role"
HEAD_ROLE = "head"

# Kinds whose inputs decide where data lives: `aicluster plan` calls them "filesystem" and the
# critical-path check keeps them independent of the control plane.
STORAGE_KINDS = frozenset({"filesystem", "volume", "database"})
CONTROL_PLANE_KINDS = frozenset({"head-node", "control-plane"})

# Input keys that update in place on every stateful type here (tags and labels never force a
# replacement); a tag edit may change only these.
IN_PLACE_METADATA_KEYS = frozenset({"tags", "tagsAll", "volumeTags", "labels", "effectiveLabels",
                                    "terraformLabels", "resourceLabels"})

_BY_TOKEN = {token: kind for kind, tokens in STATEFUL_TYPES.items() for token in tokens}


def type_key(type_token: str) -> str:
    """"aws:fsx/lustreFileSystem:LustreFileSystem" -> "aws:fsx/lustreFileSystem"."""
    parts = type_token.split(":")
    return ":".join(parts[:2]) if len(parts) >= 3 else type_token


def _unwrap(value: Any) -> Any:
    # Secret markers (offline.capture.Secret) keep their value in `.value`; tags are rarely secret.
    return getattr(value, "value", value) if type(value).__name__ == "Secret" else value


def role_of(inputs: Mapping[str, Any]) -> str | None:
    """The `aicluster-role` tag (AWS `tags`) or label (GCP `labels`) of a resource, if any."""
    for key in ("tags", "labels"):
        found = _unwrap(inputs.get(key))
        if isinstance(found, Mapping):
            role = _unwrap(found.get(ROLE_LABEL))
            if isinstance(role, str):
                return role
    return None


def stateful_kind(type_token: str, inputs: Mapping[str, Any] | None = None) -> str | None:
    """The kind of stateful resource this is ("filesystem", "head-node", "secret", ...), or None."""
    key = type_key(type_token)
    if key in _BY_TOKEN:
        return _BY_TOKEN[key]
    if key in HEAD_NODE_TYPES and role_of(inputs or {}) == HEAD_ROLE:
        return "head-node"
    return None


def stateful_resources(resources: Iterable[Any]) -> list[Any]:
    """The stateful ones among captured resources (anything with `.type`, `.inputs`, `.custom`)."""
    return [r for r in resources if getattr(r, "custom", True) and stateful_kind(r.type, r.inputs)]
