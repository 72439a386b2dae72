"""The GKE part of a design as data: the node pools (one per GPU pool, one per TPU slice), their
additional networks, and the cluster's settings. design/gke.py builds them; KubernetesDesign holds
them (`gke`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aicluster.catalog.tpu_slices import TpuSlice


@dataclass(frozen=True)
class GkeNetwork:
    """One additional node network of a GPU node pool and its GKENetworkParamSet + Network pair."""

    name: str                                  # the Kubernetes objects' name (<= 41 characters)
    network: str                               # design fabric network key (gvnic-1, rdma, tcpxo-3, ...)
    subnet: int                                # index into that network's subnets
    device_mode: Literal["NetDevice", "RDMA"]
    interface: str                             # the pod interface it appears as (eth<NIC index>)
    gpu: bool                                  # a GPU NIC: worker pods attach it

@dataclass(frozen=True)
class GkeNodePool:
    """One aicluster pool as GKE node pools: one for a GPU pool, one per slice for a TPU pool."""

    pool: str
    names: tuple[str, ...]                     # GKE node pool names
    machine_type: str
    accelerator: str | None                    # GPU: cloud.google.com/gke-accelerator value
    gpus: int
    tpu: TpuSlice | None
    nic_stack: str                             # tcpx | tcpxo | rdma | none
    networks: tuple[GkeNetwork, ...]           # additional node networks, in NIC order
    compact: bool                              # placement_policy COMPACT
    min_nodes: int
    max_nodes: int
    capacity: str                              # on-demand | spot | reservation | flex-start
    reservation: str | None
    disk_type: str
    disk_size_gib: int
    secure_boot: bool = True                   # off on non-GPU node pools that mount Managed Lustre
    local_ssds: int = 0                        # bundled Local SSDs as RAID0 ephemeral storage (0: none)
    image_streaming: bool = True               # GKE image streaming (gcfs_config)
    gpu_topology: str | None = None            # NVLink domain (A4X): a 1x72 workload policy the pool names
    arch: str = "x86_64"                       # the machines' CPU architecture (catalog arch): arm64 on A4X

    @property
    def slices(self) -> int:
        return len(self.names) if self.tpu else 0

    def slice_sizes(self) -> list[tuple[str, int, int]]:
        """TPU: (node pool, min nodes, max nodes) per slice; the first min_nodes / hosts slices are
        always on, the others scale from 0 to the whole slice (GKE scales a multi-host slice
        atomically)."""
        hosts = self.tpu.hosts
        always_on = self.min_nodes // hosts
        return [(name, hosts if k < always_on else 0, hosts) for k, name in enumerate(self.names)]

@dataclass(frozen=True)
class GkeDesign:
    cluster_name: str
    location: str                              # the region: a regional (replicated) control plane
    zone: str                                  # where every node pool's nodes are
    release_channel: str
    version: str
    gpu_driver_version: str
    image_type: str
    pods_cidr: str
    services_cidr: str
    max_pods_per_node: int
    api_access_cidrs: tuple[str, ...]
    system_machine_type: str
    system_nodes: int
    node_pools: tuple[GkeNodePool, ...]
    api_access: str = "endpoint"               # kubernetes_design.API_ACCESS

    @property
    def private_endpoint(self) -> bool:
        """No public IP endpoint unless the spec names CIDRs for one."""
        return not self.api_access_cidrs

    @property
    def dns_endpoint(self) -> bool:
        """The DNS-based endpoint takes traffic from outside Google (authorized by IAM): what the
        Kubernetes provider of `pulumi up` talks to. Off when the API is to stay inside the VPC."""
        return self.api_access == "endpoint"

    @property
    def networks(self) -> tuple[GkeNetwork, ...]:
        """Every additional network of every node pool, once (pools of a family share them)."""
        seen: dict[str, GkeNetwork] = {}
        for pool in self.node_pools:
            for net in pool.networks:
                seen.setdefault(net.name, net)
        return tuple(seen.values())

    @property
    def nic_stacks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.nic_stack for p in self.node_pools if p.nic_stack != "none"))

    def node_pool(self, pool: str) -> GkeNodePool:
        for p in self.node_pools:
            if p.pool == pool:
                return p
        raise KeyError(pool)
