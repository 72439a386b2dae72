"""The design's building blocks: a pool and its fabric interfaces, placement and GCP NICs; a
filesystem; the network; the Slurm node sets. Frozen dataclasses, no logic beyond what they derive
from their own fields: every other design module builds on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aicluster.catalog import InstanceType
from aicluster.catalog.tpu_slices import TpuSlice
from aicluster.design.accounting import AccountingDesign
from aicluster.design.login import LoginDesign
from aicluster.spec.cluster import CapacitySpec


@dataclass(frozen=True)
class NetworkInterface:
    """One entry of a launch template's network_interfaces."""

    network_card_index: int
    device_index: int
    interface_type: Literal["interface", "efa", "efa-only"]

    @property
    def is_efa(self) -> bool:
        return self.interface_type in ("efa", "efa-only")

@dataclass(frozen=True)
class Placement:
    """How a pool's nodes are placed."""
    strategy: Literal["cluster", "compact"] | None   # AWS placement group / GCP compact resource policy
    reason: str
    # GCP multi-node NVLink domain (A4X): "1x72", the GPU topology its placement policy asks for,
    # which puts the pool's VMs in one NVLink domain (a reservation sub-block)
    gpu_topology: str | None = None

@dataclass(frozen=True)
class GcpSubnet:
    """One GCP subnet of the design."""
    name: str
    cidr: str

@dataclass(frozen=True)
class GcpNetwork:
    """One VPC the GPU NICs attach to (GCP), with its subnets."""

    key: str                        # gvnic-1 | tcpx-1..4 | tcpxo-1..8 | rdma
    name: str                       # the network's cloud name
    mtu: int
    roce: bool                      # created with the zone's RoCE network profile (<zone>-vpc-roce)
    subnets: tuple[GcpSubnet, ...]

    @property
    def firewall(self) -> bool:
        """RoCE networks take no firewall rules (Cluster Toolkit's gpu-rdma-vpc refuses them)."""
        return not self.roce

@dataclass(frozen=True)
class GcpNic:
    """One entry of a GCP instance template's network_interfaces, in order."""

    index: int
    network: str                    # "system" or the key of a GcpNetwork
    subnet: int                     # index into that network's subnets
    nic_type: Literal["GVNIC", "MRDMA"]
    role: Literal["host", "gpu"]

@dataclass(frozen=True)
class PoolDesign:
    """One node pool of the design."""
    name: str
    instance: InstanceType
    min_nodes: int
    max_nodes: int
    capacity: CapacitySpec
    efa: bool
    interfaces: tuple[NetworkInterface, ...]
    placement: Placement
    image: str
    root_device: str
    root_volume_gib: int
    nics: tuple[GcpNic, ...] = ()           # GCP: every NIC of the instance template, in order
    boot_disk_type: str | None = None       # GCP boot disk type
    tpu: TpuSlice | None = None             # a Cloud TPU pool: its slice; instance is one host
    # Rolling updates: how many nodes may be out of service at once (PoolSpec.unavailable_budget):
    # the Slurm reconcile loop's roll, the EKS node group's update_config, the GKE surge upgrade.
    max_unavailable: int = 1
    # Slurm: pools[].partition when given (pools of one partition: one job spans them; the policy
    # pack reads it off the template's aicluster-partition tag)
    partition: str | None = None

    @property
    def partition_name(self) -> str:
        """The Slurm partition the pool's nodes join: its `partition`, else its own name."""
        return self.partition or self.name

    @property
    def slices(self) -> int:
        """TPU pools: identical slices of `tpu.hosts` nodes each (max_nodes is whole slices)."""
        return self.max_nodes // self.tpu.hosts if self.tpu else 0

    @property
    def efa_devices(self) -> int:
        return sum(1 for nic in self.interfaces if nic.is_efa)

    @property
    def gpu_nics(self) -> int:
        """GCP: NICs that carry GPU-to-GPU traffic (TCPX/TCPXO gVNICs or MRDMA)."""
        return sum(1 for nic in self.nics if nic.role == "gpu")

    @property
    def accelerators(self) -> int:
        return self.instance.accelerator_count * self.max_nodes

    @property
    def nvlink_domain_nodes(self) -> int:
        """The nodes of each node's NVLink domain (node.env AICLUSTER_NVLINK_DOMAIN_NODES, what the
        health check expects IMEX to connect): the whole pool where the type's domain spans nodes,
        since such a pool is exactly one domain (spec nvlink_domain_problems: 18, or a 9-node
        UltraServer), else 1."""
        return self.max_nodes if self.instance.nodes_per_nvlink_domain > 1 else 1

    def node_name(self, index: int) -> str:
        """Node `index` (1-based): gpu-1, gpu-2, ... The first min_nodes are the static ones."""
        return f"{self.name}-{index}"

    @property
    def hostlist(self) -> str:
        return node_hostlist(self.name, 1, self.max_nodes)

    @property
    def static_hostlist(self) -> str | None:
        return node_hostlist(self.name, 1, self.min_nodes) if self.min_nodes else None

    @property
    def dynamic_hostlist(self) -> str | None:
        return node_hostlist(self.name, self.min_nodes + 1, self.max_nodes) if self.max_nodes > self.min_nodes else None

    def node_names(self) -> list[str]:
        return [self.node_name(i) for i in range(1, self.max_nodes + 1)]

@dataclass(frozen=True)
class StorageDesign:
    """One filesystem of the design."""
    name: str
    kind: Literal["fsx-lustre", "managed-lustre", "filestore", "efs"]
    mount: str
    capacity_gib: int                 # 0 for EFS (elastic: no size to set)
    throughput_mbps_per_tib: int      # 0 for Filestore (not a parallel filesystem)
    deployment_type: str | None       # FSx only
    import_path: str | None
    protect: bool
    filestore_tier: str | None = None
    # storage[].on_delete (spec/teardown.py): retain | snapshot | delete; an unprotected
    # (protect: false) filesystem is deleted with the stack: "delete"
    on_delete: str = "retain"

    @property
    def throughput_mbps(self) -> float:
        """Aggregate baseline throughput: capacity in TiB x per-TiB throughput [FSx user guide]."""
        return self.capacity_gib / 1024 * self.throughput_mbps_per_tib

@dataclass(frozen=True)
class NetworkDesign:
    """The network of the design."""
    create_vpc: bool
    vpc_cidr: str | None
    private_subnet_cidr: str | None
    public_subnet_cidr: str | None
    existing_vpc_id: str | None
    existing_subnet_id: str | None
    ssh_ingress_cidrs: tuple[str, ...]
    flow_logs: bool = True                              # of a network aicluster creates (spec network.flow_logs)
    # GCP only
    mtu: int | None = None                              # the system VPC's MTU
    fabric_networks: tuple[GcpNetwork, ...] = ()        # the GPU NIC networks every pool needs
    service_cidr: str | None = None                     # private service access (Lustre, Filestore)

    def fabric_network(self, key: str) -> GcpNetwork:
        for net in self.fabric_networks:
            if net.key == key:
                return net
        raise KeyError(f"no fabric network {key!r}")

@dataclass(frozen=True)
class SlurmNodeSet:
    """One pool as Slurm sees it: a node range, a partition and a topology switch."""

    pool: str
    hostlist: str
    static_hostlist: str | None
    dynamic_hostlist: str | None
    cpus: int
    cores: int | None                # physical cores; with threads_per_core, what slurmd will report
    threads_per_core: int | None
    real_memory_mib: int
    gres: str | None                 # "gpu:h100:8"; None for pools without NVIDIA GPUs
    gpu_count: int
    gpu_type: str | None
    features: tuple[str, ...]
    exclusive: bool                  # multi-node GPU partitions: whole nodes only
    switch: str                      # topology/tree: one switch per placement group
    cloud: bool = True               # State=CLOUD (powered by Slurm); TPU slices exist as long as the stack
    switches: tuple[tuple[str, str], ...] = ()   # (switch, hostlist) per TPU slice; else one `switch`
    sockets: int | None = None       # CPU sockets (catalog); None: unknown, declared as one socket
    gpus_per_socket: int | None = None   # GPUs 0..n-1 on socket 0, ... (catalog); None: no Cores= binding
    partition_settings: tuple[tuple[str, str], ...] = ()   # pools[].slurm_settings (slurm_settings.py)
    partition: str = ""              # pools[].partition; "" = the pool's name

    @property
    def partition_name(self) -> str:
        return self.partition or self.pool


@dataclass(frozen=True)
class SlurmPartition:
    """One PartitionName line: the node sets of every pool that names it, in spec order."""
    name: str
    nodesets: tuple[SlurmNodeSet, ...]

    @property
    def hostlist(self) -> str:
        return ",".join(ns.hostlist for ns in self.nodesets)

    @property
    def exclusive(self) -> bool:
        return any(ns.exclusive for ns in self.nodesets)

    @property
    def def_mem_per_cpu(self) -> int:
        """A job that asks for no memory gets its share of the smallest node of the partition."""
        return min(ns.real_memory_mib // ns.cpus for ns in self.nodesets)

    @property
    def settings(self) -> tuple[tuple[str, str], ...]:
        return self.nodesets[0].partition_settings      # the spec holds them equal across the pools

@dataclass(frozen=True)
class NodeImageDesign:
    """The baked image of the Slurm GPU pools and login nodes (slurm.node_image; docs/images.md).
    Either this stack bakes it (`build`) or it boots one baked before (`image_id`); either way those
    nodes' boot installs nothing."""
    build: bool
    image_id: str | None                # an image baked before: AMI id, GCP image or family
    base_image: str                     # what the bake starts from: the GPU pools' own image
    pools: tuple[str, ...]              # the pools that boot it: GPU pools on the catalog's image
    # GPU pools that keep installing at boot, and why: (pool, reason). An arm64 (Grace) pool is one:
    # the bake starts only from the catalog's x86_64 GPU image, so its programs would not run there.
    at_boot: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SlurmDesign:
    """The Slurm configuration of the design."""
    nodesets: tuple[SlurmNodeSet, ...]
    suspend_time_s: int
    resume_timeout_s: int
    accounting: bool
    head_instance_type: str
    head_root_volume_gib: int
    head_public_ip: bool
    login: LoginDesign | None = None    # login nodes (login_design.py); None: a design built by hand
    settings: tuple[tuple[str, str], ...] = ()   # slurm.settings, rendered (slurm_settings.py)
    # slurm.accounting when on: the database (RDS / Cloud SQL, or None: MariaDB on the head), the
    # default account and QoS (accounting_design.py); None when accounting is off
    accounting_settings: AccountingDesign | None = None
    node_image: NodeImageDesign | None = None   # slurm.node_image; None: every node installs at boot
    head_on_delete: str = "retain"              # slurm.head_node.on_delete: retain | delete

    @property
    def partitions(self) -> tuple[SlurmPartition, ...]:
        """Pools naming the same partition share its line (the first pool's is the default)."""
        grouped: dict[str, list[SlurmNodeSet]] = {}
        for ns in self.nodesets:
            grouped.setdefault(ns.partition_name, []).append(ns)
        return tuple(SlurmPartition(name, tuple(sets)) for name, sets in grouped.items())

    @property
    def suspend_exc_nodes(self) -> tuple[str, ...]:
        """The always-on min_nodes: never powered down."""
        return tuple(n.static_hostlist for n in self.nodesets if n.static_hostlist)


def node_hostlist(prefix: str, first: int, last: int) -> str:
    return f"{prefix}-{first}" if first == last else f"{prefix}-[{first}-{last}]"
