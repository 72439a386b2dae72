"""aicluster:gcp:ManagedLustre and aicluster:gcp:Filestore - the shared filesystems on GCP.

Both produce the same Mount contract as FSx for Lustre (components/aicluster/mounts.py), so the node templates
know nothing of the cloud. Both are protected and retained unless the spec opts out, and their
inputs come from the storage spec and the network only, never from pools or node counts: scaling or
changing pools can never replace a filesystem (ParallelCluster #4651 is the counter-example).

Managed Lustre (`gcp.lustre.Instance`): tiers and minimum capacities are validated in design.py
from the catalog; the instance takes its address from the VPC's private service access range. An
instance serves either Compute Engine clients or GKE clients (gke_support), not both (Google Cloud Managed Lustre docs, GKE support).
Filestore (NFS) serves homes, reached over the same private service access.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.parts import StorageDesign
from aicluster.mounts import LUSTRE_MOUNT_OPTIONS, Mount
from aicluster.gcp.common import labels, short_name

# hard: an NFS server restart pauses I/O instead of failing it (Cluster Toolkit's homefs default).
NFS_MOUNT_OPTIONS = "defaults,hard,_netdev,x-systemd.automount,x-systemd.requires=network-online.target"


def lustre_fs_name(name: str) -> str:
    """The Lustre filesystem name: at most eight letters and digits (gcp.lustre.Instance.filesystem)."""
    return (re.sub(r"[^a-z0-9]", "", name) or "lustre")[:8]


def filestore_share_name(name: str) -> str:
    """A Filestore share: a letter first, letters, digits and `_`, at most 16 characters."""
    return re.sub(r"[^a-z0-9_]", "_", name)[:16]


def parse_mount_point(mount_point: str) -> tuple[str, str]:
    """`10.90.0.5@tcp:/lustrefs` -> (`10.90.0.5`, `lustrefs`): the MGS NID's address and the fsname."""
    nid, _, fsname = mount_point.partition(":/")
    return nid.split("@", 1)[0], fsname


@dataclass(frozen=True)
class ManagedLustreArgs:
    """A Managed Lustre instance and its Mount.

    context: the cluster's name (the instance id <name>-<fs>), zone (where the instance lives) and
        labels: `ClusterDesign.context`, or a `ClusterContext` of your own.
    storage: the filesystem's design (one of `ClusterDesign.storage`, kind "managed-lustre"): its
        name, mount point, capacity, per-TiB throughput tier and `protect`.
    network_id: the VPC the instance serves, projects/<p>/global/networks/<name> (Network.network_id).
    gke_support: serve GKE clients (and only them; an instance serves one kind). Default False.
    service_access: the private service access connection to wait for (Network.service_access);
        None when the VPC already has one.
    """
    context: ClusterContext
    storage: StorageDesign
    network_id: pulumi.Input[str]
    gke_support: bool = False
    service_access: pulumi.Resource | None = None


class ManagedLustre(pulumi.ComponentResource):
    instance_id: pulumi.Output[str]
    mount: pulumi.Output[Mount]

    def __init__(self, name: str, args: ManagedLustreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:ManagedLustre", name, None, opts)
        cluster, fs = args.context, args.storage
        fsname = lustre_fs_name(fs.name)
        # Set on the resource itself (mocks and policies do not see inherited options).
        stateful = pulumi.ResourceOptions(parent=self, protect=fs.protect,
                                          retain_on_delete=fs.protect and fs.on_delete == "retain",
                                          depends_on=[args.service_access] if args.service_access else None)
        instance = gcp.lustre.Instance(
            f"{name}-fs",
            instance_id=short_name(f"{cluster.name}-{fs.name}", 63),
            location=cluster.zone,
            filesystem=fsname,
            capacity_gib=str(fs.capacity_gib),
            per_unit_storage_throughput=str(fs.throughput_mbps_per_tib),
            network=args.network_id,
            gke_support_enabled=args.gke_support,
            description=f"aicluster {cluster.name}: {fs.name} at {fs.mount}",
            labels=labels(cluster, "storage"),
            opts=stateful,
        )
        self.instance_id = instance.id
        self.mount = instance.mount_point.apply(lambda point: _lustre_mount(point, fsname, fs))
        self.register_outputs({"instance": instance.id, "mount_point": instance.mount_point})


def _lustre_mount(point: str, fsname: str, fs: StorageDesign) -> Mount:
    server, remote = parse_mount_point(point)
    return Mount(server=server, remote_path=remote or fsname, local_mount=fs.mount, fs_type="lustre",
                 mount_options=LUSTRE_MOUNT_OPTIONS, client="lustre-gcp")


@dataclass(frozen=True)
class FilestoreArgs:
    """A Filestore (NFS) instance with one share, and its Mount.

    context: the cluster's name (the instance name <name>-<fs>), zone (where the instance lives)
        and labels: `ClusterDesign.context`, or a `ClusterContext` of your own.
    storage: the filesystem's design (one of `ClusterDesign.storage`, kind "filestore"): its name
        (the share's), mount point, capacity, `filestore_tier` and `protect`.
    network_name: the VPC's name (Network.network_name), reached over private service access.
    service_access: the private service access connection to wait for (Network.service_access);
        None when the VPC already has one.
    """
    context: ClusterContext
    storage: StorageDesign
    network_name: pulumi.Input[str]
    service_access: pulumi.Resource | None = None


class Filestore(pulumi.ComponentResource):
    instance_id: pulumi.Output[str]
    mount: pulumi.Output[Mount]

    def __init__(self, name: str, args: FilestoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:Filestore", name, None, opts)
        cluster, fs = args.context, args.storage
        share = filestore_share_name(fs.name)
        # on_delete (docs/teardown.md): `snapshot` is a Filestore backup `aicluster destroy` takes first.
        kept = fs.protect and fs.on_delete == "retain"
        stateful = pulumi.ResourceOptions(parent=self, protect=fs.protect, retain_on_delete=kept,
                                          depends_on=[args.service_access] if args.service_access else None)
        instance = gcp.filestore.Instance(
            f"{name}-fs",
            name=short_name(f"{cluster.name}-{fs.name}", 63),
            location=cluster.zone,
            tier=fs.filestore_tier,
            file_shares=gcp.filestore.InstanceFileSharesArgs(name=share, capacity_gb=fs.capacity_gib),
            networks=[gcp.filestore.InstanceNetworkArgs(network=args.network_name, modes=["MODE_IPV4"],
                                                        connect_mode="PRIVATE_SERVICE_ACCESS")],
            # Filestore's own deletion protection while kept (an instance PATCH: in place).
            deletion_protection_enabled=kept,
            deletion_protection_reason="aicluster: protected storage (storage[].protect)" if kept else None,
            description=f"aicluster {cluster.name}: {fs.name} at {fs.mount}",
            labels=labels(cluster, "storage"),
            opts=stateful,
        )
        self.instance_id = instance.id
        self.mount = instance.networks.apply(
            lambda nets: Mount(server=nets[0].ip_addresses[0], remote_path=f"/{share}", local_mount=fs.mount,
                               fs_type="nfs", mount_options=NFS_MOUNT_OPTIONS, client="nfs"))
        self.register_outputs({"instance": instance.id})
