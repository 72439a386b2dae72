"""aicluster:aws:HomeFilesystem - the shared /home of an AWS Slurm cluster on Amazon EFS.

Why EFS and not FSx for OpenZFS (ParallelCluster offers both for /home):
- EFS is elastic: nothing to size, so no spec edit ever resizes or replaces it, and it never
  fills up on the day a team's conda environments double. OpenZFS has a fixed capacity and
  throughput that someone must size up front and raise by hand.
- Regional EFS stores every file redundantly across several Availability Zones; a Single-AZ
  OpenZFS filesystem lives in one.
- Homes hold code, environments and small outputs, not training data: OpenZFS's lower latency
  buys little there, and the parallel filesystem (FSx for Lustre) carries the data and
  checkpoints. EFS is not counted as training-data throughput (balance.from_design): at most
  1,500 MiB/s per client (catalog storage.yaml `efs`) shared by every node.

What is built (facts and sources: catalog storage.yaml `efs`, read by aicluster.catalog.efs):
- the filesystem: encrypted at rest with KMS (the account's aws/elasticfilesystem key), General
  Purpose performance, Elastic throughput, files idle 30 days moved to Infrequent Access and back
  on first access; protected and retained like every stateful resource (stateful.py);
- AWS Backup's daily EFS backup plan (BackupPolicy ENABLED): homes are where people keep what
  exists nowhere else;
- its own security group, open only on NFS (tcp 2049) from the security groups of the cluster's
  clients (the nodes' group, which the head and login nodes join too), never from a CIDR; kept
  apart from the nodes' group so node rule edits never touch the filesystem's inputs;
- one mount target per private subnet (EFS: one per Availability Zone), none public.

Nodes mount it with the kernel's NFS 4.1 client (nfs-common) and the EFS user guide's options.
Encryption in transit (TLS) needs amazon-efs-utils, which Ubuntu does not package; the traffic
stays inside the cluster's private subnet and VPC.

Inputs come from the storage spec, the VPC and the subnets only, never from pools or node counts,
so scaling or editing pools never touches it (tests/safety).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws

from aicluster.catalog.efs import load_efs
from aicluster.design.model import ClusterContext
from aicluster.design.parts import StorageDesign
from aicluster.mounts import Mount


@dataclass(frozen=True)
class HomeFilesystemArgs:
    """An EFS filesystem for homes, its mount targets and security group, and its Mount.

    context: the cluster's name (creation token and Name tag) and tags (`ClusterDesign.context`,
        or your own).
    storage: the filesystem's design (kind "efs"): its name, mount point (/home) and `protect`.
    vpc_id: the VPC of the security group (`Network.vpc_id`).
    subnet_ids: the private subnets to put mount targets in, at most one per Availability Zone
        (`[Network.subnet_id]`).
    client_security_group_ids: the groups whose members may mount it on tcp 2049: the nodes'
        group (`Network.nodes_security_group_id`), which compute, head and login nodes join.
    """
    context: ClusterContext
    storage: StorageDesign
    vpc_id: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    client_security_group_ids: Sequence[pulumi.Input[str]]


def efs_mount(dns_name: str, storage: StorageDesign) -> Mount:
    """How every node mounts the filesystem: its DNS name, the export root, NFS 4.1 with the EFS
    user guide's options (nfsvers=4.1, 1 MiB reads and writes, hard, timeo=600, retrans=2,
    noresvport so a reconnect takes a new port, _netdev)."""
    return Mount(server=dns_name, remote_path="/", local_mount=storage.mount, fs_type="nfs4",
                 mount_options=load_efs().mount_options, client="nfs")


class HomeFilesystem(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    mount: pulumi.Output[Mount]

    def __init__(self, name: str, args: HomeFilesystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:HomeFilesystem", name, None, opts)
        cluster, fs, facts = args.context, args.storage, load_efs()
        if not args.subnet_ids or not args.client_security_group_ids:
            raise ValueError("HomeFilesystem needs at least one subnet and one client security group")
        tags = cluster.labels("storage")
        child = pulumi.ResourceOptions(parent=self)

        group = aws.ec2.SecurityGroup(
            f"{name}-sg",
            description=f"aicluster {cluster.name}: EFS {fs.name} (NFS 2049 from the nodes group only)",
            vpc_id=args.vpc_id,
            tags={**tags, "Name": f"{cluster.name}-{fs.name}-efs"},
            opts=child,
        )
        # Rules are resources of their own: adding a client group adds a rule and leaves the group
        # and the mount targets as they are. No egress rule: NFS replies leave through the
        # connection's state, and the mount targets start no connection of their own.
        for i, source in enumerate(args.client_security_group_ids):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nfs-in-{i}",
                security_group_id=group.id,
                referenced_security_group_id=source,
                ip_protocol="tcp", from_port=facts.nfs_port, to_port=facts.nfs_port,
                description=f"NFS from cluster clients ({i})",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[group]),
            )

        # Set on the resource itself (mocks and policies do not see inherited options).
        # on_delete (docs/teardown.md): retained only under `retain`; `snapshot` is an AWS Backup job
        # that `aicluster destroy` starts and waits for before it deletes the filesystem.
        stateful = pulumi.ResourceOptions(parent=self, protect=fs.protect,
                                          retain_on_delete=fs.protect and fs.on_delete == "retain")
        filesystem = aws.efs.FileSystem(
            f"{name}-fs",
            # Fixed per cluster and filesystem: a retried create returns the same filesystem.
            creation_token=f"{cluster.name}-{fs.name}"[:64],
            encrypted=True,            # KMS at rest; the aws/elasticfilesystem key unless given one
            performance_mode=facts.performance_mode,
            throughput_mode=facts.throughput_mode,
            lifecycle_policies=[
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_ia=facts.transition_to_ia),
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_primary_storage_class=facts.transition_to_primary),
            ],
            tags={**tags, "Name": f"{cluster.name}-{fs.name}"},
            opts=stateful,
        )
        # AWS Backup's default daily plan for EFS (35-day retention). A Regional filesystem created
        # through the API has it off by default (EFS user guide, awsbackup.html): turn it on. A policy,
        # not data: not protected.
        aws.efs.BackupPolicy(
            f"{name}-backup",
            file_system_id=filesystem.id,
            backup_policy=aws.efs.BackupPolicyBackupPolicyArgs(status="ENABLED"),
            opts=child,
        )
        targets = [
            aws.efs.MountTarget(
                f"{name}-mt-{i}",
                file_system_id=filesystem.id,
                subnet_id=subnet,
                security_groups=[group.id],   # updated in place (ModifyMountTargetSecurityGroups)
                opts=child,
            )
            for i, subnet in enumerate(args.subnet_ids)
        ]
        self.file_system_id = filesystem.id
        self.security_group_id = group.id
        # The name resolves only once a mount target exists: nodes get the Mount after the targets.
        self.mount = pulumi.Output.all(filesystem.dns_name, *[t.id for t in targets]).apply(
            lambda out: efs_mount(out[0], fs))
        self.register_outputs({
            "file_system_id": filesystem.id,
            "dns_name": filesystem.dns_name,
            "security_group_id": group.id,
            "mount_targets": [t.id for t in targets],
        })
