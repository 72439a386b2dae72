"""aicluster:aws:LustreFilesystem - FSx for Lustre, plus its S3 data repository association.

Almost every FSx field forces replacement, and replacement loses the data (ParallelCluster #4651,
#6211, #6357). So the inputs here come from the storage spec, the subnet and the storage
security group only, never from pools or node counts; and the filesystem is protected and
retained unless the spec opts out.
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext
from aicluster.design.parts import StorageDesign
from aicluster.mounts import LUSTRE_MOUNT_OPTIONS, Mount



@dataclass(frozen=True)
class LustreFilesystemArgs:
    """One FSx for Lustre filesystem (and its S3 data repository association, when linked).

    context: the cluster's name (the filesystem's Name tag) and tags (`ClusterDesign.context`, or
        your own).
    storage: the filesystem's design: kind "fsx-lustre", deployment type, capacity, throughput,
        S3 import path, mount point, protection (one of `ClusterDesign.storage`).
    subnet_id: the one subnet the filesystem lives in (the cluster's private subnet).
    security_group_id: the filesystem's own security group (`Network.storage_security_group_id`),
        never the nodes' one: a change to node rules must not touch the filesystem.
    """
    context: ClusterContext
    storage: StorageDesign
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]


def final_backup_skipped(fs: StorageDesign) -> bool:
    """FSx's skip_final_backup: a final backup where FSx takes one (persistent, not linked to S3),
    except under on_delete `delete`."""
    persistent = (fs.deployment_type or "").startswith("PERSISTENT")
    return fs.on_delete == "delete" or not (persistent and fs.import_path is None)


class LustreFilesystem(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    mount: pulumi.Output[Mount]

    def __init__(self, name: str, args: LustreFilesystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:LustreFilesystem", name, None, opts)
        cluster, fs = args.context, args.storage
        tags = cluster.labels("storage")
        persistent = (fs.deployment_type or "").startswith("PERSISTENT")
        linked = fs.import_path is not None
        # Set on the resource itself (mocks and policies do not see inherited options). on_delete
        # (docs/teardown.md): retained only under `retain`; protected whatever it says.
        stateful = pulumi.ResourceOptions(parent=self, protect=fs.protect,
                                          retain_on_delete=fs.protect and fs.on_delete == "retain")

        filesystem = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type=fs.deployment_type,
            storage_type="SSD",
            storage_capacity=fs.capacity_gib,
            per_unit_storage_throughput=fs.throughput_mbps_per_tib if persistent else None,
            file_system_type_version="2.15",
            data_compression_type="LZ4",
            subnet_ids=args.subnet_id,           # one subnet: a string in pulumi_aws v7
            security_group_ids=[args.security_group_id],
            metadata_configuration=(aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC")
                                    if fs.deployment_type == "PERSISTENT_2" else None),
            # Older deployment types link S3 on the filesystem itself; PERSISTENT_2 uses a DRA.
            import_path=fs.import_path if linked and fs.deployment_type != "PERSISTENT_2" else None,
            log_configuration=aws.fsx.LustreFileSystemLogConfigurationArgs(level="WARN_ERROR"),
            # A last backup on deletion where FSx supports one (persistent, not linked to S3), unless
            # on_delete says delete; `snapshot` is refused by the spec where FSx has none. Both
            # fields are read at deletion only (DeleteFileSystem's LustreConfiguration): in place.
            skip_final_backup=final_backup_skipped(fs),
            final_backup_tags={**tags, "Name": f"{cluster.name}-{fs.name}-final"} if fs.on_delete == "snapshot" else None,
            tags={**tags, "Name": f"{cluster.name}-{fs.name}"},
            opts=stateful,
        )
        if linked and fs.deployment_type == "PERSISTENT_2":
            aws.fsx.DataRepositoryAssociation(
                f"{name}-s3",
                file_system_id=filesystem.id,
                data_repository_path=fs.import_path,
                file_system_path="/",
                batch_import_meta_data_on_create=True,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                        events=["NEW", "CHANGED", "DELETED"]),
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                        events=["NEW", "CHANGED", "DELETED"]),
                ),
                # Deleting the link must never delete files.
                delete_data_in_filesystem=False,
                tags=tags,
                opts=stateful,
            )
        self.file_system_id = filesystem.id
        self.mount = pulumi.Output.all(filesystem.dns_name, filesystem.mount_name).apply(
            lambda out: Mount(server=out[0], remote_path=out[1], local_mount=fs.mount, fs_type="lustre",
                              mount_options=LUSTRE_MOUNT_OPTIONS, client="lustre-aws"))
        self.register_outputs({
            "file_system_id": filesystem.id,
            "dns_name": filesystem.dns_name,
            "mount_name": filesystem.mount_name,
        })
