"""Mount: the one contract every shared filesystem offers its clients (after Cluster Toolkit's
network_storage): where the server is, what to mount, where, and how. FSx for Lustre, Managed
Lustre and Filestore all produce one, and every node template consumes only this."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mount:
    """One filesystem mount of the nodes."""
    server: str            # FSx: the file system DNS name; Managed Lustre: the MGS NID
    remote_path: str       # FSx: the mount name; NFS: the export
    local_mount: str
    fs_type: str           # lustre | nfs
    mount_options: str
    client: str            # which client installer the node template runs: lustre-aws | lustre-gcp | nfs

    @property
    def source(self) -> str:
        if self.fs_type == "lustre":
            return f"{self.server}@tcp:/{self.remote_path}"
        return f"{self.server}:{self.remote_path}"

    def fstab_line(self) -> str:
        return f"{self.source} {self.local_mount} {self.fs_type} {self.mount_options} 0 0"


# How every node mounts a Lustre filesystem, FSx or Managed Lustre: at first access (automount)
# once the network is up, so a node still boots when the filesystem is slow to answer.
LUSTRE_MOUNT_OPTIONS = "relatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target"
