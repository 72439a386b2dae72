"""spec + catalog -> the GKE part of a `cloud: gcp`, `scheduler: kubernetes` design. Pure (no Pulumi).

Everything about the GKE cluster that needs no cloud output is decided here, and the Kueue and job
parts reuse kubernetes_design (KubernetesPool, quotas, worker shapes):

- the control plane: regional, the release channel and minimum version pinned in
  catalog/kubernetes.yaml, private nodes, a private IP endpoint unless `api_access_cidrs` asks for a
  public one, and (api_access endpoint) the DNS-based endpoint `pulumi up` reaches the API through,
  authorized by IAM; pod and service ranges that overlap neither the system VPC, the GPU NIC networks nor
  the private service access range, and that depend on no pool (so scaling never replaces the
  cluster);
- per GPU pool one node pool in the cluster's zone, with an additional node network for every GPU
  NIC network of the design (gcp_nics), and for each a GKENetworkParamSet + Network pair: deviceMode
  RDMA for MRDMA NICs, NetDevice for gVNIC; the worker pods attach the GPU NIC networks on the
  interfaces Google's own manifests use (eth<NIC index>);
- per TPU pool one node pool per slice (placement COMPACT with the slice's topology);
- per node pool the boot disk its machine takes (TPU: the generation's, from catalog/tpu.yaml) and
  Secure Boot, except on non-GPU node pools that mount Managed Lustre (GKE's Lustre limitation).
"""
from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from aicluster.design.kubernetes import (ACCELERATOR_LABEL, ARM_TAINT, DEFAULT_SYSTEM_TYPE, GPU_TAINT, INSTANCE_TYPE_LABEL, POOL_LABEL,
                                SHM_SHARE, TPU_TAINT, WORKER_CPU_MARGIN, WORKER_MEMORY_SHARE, KubernetesDesign,
                                KubernetesPool, kubernetes_teams, versions)
from aicluster.catalog.kubernetes import MAX_NODES, MAX_PODS_PER_NODE, POD_RANGE_PREFIX, SYSTEM_POOL  # noqa: F401
from aicluster.design.pod_identity import design_datasets, design_identities
from aicluster.catalog.node_local import local_nvme
from aicluster.design.gke_parts import GkeDesign, GkeNetwork, GkeNodePool

if TYPE_CHECKING:
    from aicluster.design.parts import NetworkDesign, PoolDesign
    from aicluster.spec.cluster import ClusterSpec

# GKE's limit on device network (GKENetworkParamSet / Network) names (GKE docs, Set up multi-network support for Pods).
NETWORK_NAME_LIMIT = 41
# Node pool names: 1-40 characters (GKE API).
NODE_POOL_NAME_LIMIT = 40
# SYSTEM_POOL, MAX_PODS_PER_NODE, POD_RANGE_PREFIX and MAX_NODES live in catalog/kubernetes.py: the
# spec checks against them too.
SERVICE_RANGE_PREFIX = 20
# 10^9 / 2^30: GB (Google's machine type tables) to GiB (Kubernetes quantities).
GB_PER_GIB_RATIO = 1e9 / 2**30
# Where the pod and service ranges are taken from, in order: the private 10/8, then RFC 6598.
_RANGE_SPACES = ("10.0.0.0/8", "100.64.0.0/10")


def device_network_name(key: str, subnet: int, roce: bool) -> str:
    """gvnic-1, tcpxo-3, rdma-0 .. rdma-7 (one per RDMA subnet), as Google's manifests name them."""
    name = f"{key}-{subnet}" if roce else key
    return name[:NETWORK_NAME_LIMIT].rstrip("-")


def _networks(pool: "PoolDesign", net: "NetworkDesign") -> tuple[GkeNetwork, ...]:
    out = []
    for nic in pool.nics:
        if nic.network == "system":
            continue     # the node's primary network (the cluster's own VPC)
        roce = net.fabric_network(nic.network).roce
        out.append(GkeNetwork(name=device_network_name(nic.network, nic.subnet, roce), network=nic.network,
                              subnet=nic.subnet, device_mode="RDMA" if nic.nic_type == "MRDMA" else "NetDevice",
                              interface=f"eth{nic.index}", gpu=nic.role == "gpu"))
    return tuple(out)


def node_pool_names(pool: "PoolDesign") -> tuple[str, ...]:
    if pool.tpu is None:
        return (pool.name,)
    return tuple(pool.name if pool.slices == 1 else f"{pool.name}-{k}" for k in range(pool.slices))


def boot_disk_type(pool: "PoolDesign") -> str:
    """The boot disk a node pool's machines take: a TPU generation's from catalog/tpu.yaml (v4, v5e,
    v5p: pd-balanced; v6e: hyperdisk-balanced), a GPU type's from catalog/gcp.yaml."""
    if pool.tpu is not None:
        disk = pool.tpu.generation.boot_disk_type
        if not disk:
            raise ValueError(f"catalog/tpu.yaml: TPU {pool.tpu.name} has no boot_disk_type")
        return disk
    return pool.boot_disk_type or pool.instance.boot_disk_type or "pd-ssd"


def secure_boot(pool: "PoolDesign", managed_lustre: bool, kinds: tuple[str, ...]) -> bool:
    """Secure Boot, except where GKE cannot mount Managed Lustre with it: node pools whose machines
    are not of an allowed accelerator kind (GPU machine types only)."""
    return not managed_lustre or pool.instance.accelerator.kind in kinds


def _node_pool(pool: "PoolDesign", net: "NetworkDesign", accelerators, managed_lustre: bool = False,
               lustre_secure_boot: tuple[str, ...] = ("gpu",)) -> GkeNodePool:
    itype = pool.instance
    return GkeNodePool(
        pool=pool.name, names=node_pool_names(pool), machine_type=itype.name,
        accelerator=None if pool.tpu else accelerators.get(itype.name),
        gpus=0 if pool.tpu else itype.accelerator_count, tpu=pool.tpu,
        nic_stack=itype.gpu_nic_stack if pool.gpu_nics else "none",
        networks=() if pool.tpu else _networks(pool, net),
        compact=pool.placement.strategy is not None,
        gpu_topology=pool.placement.gpu_topology,
        min_nodes=pool.min_nodes, max_nodes=pool.max_nodes, capacity=pool.capacity.type,
        reservation=pool.capacity.reservation_id if pool.capacity.type == "reservation" else None,
        disk_type=boot_disk_type(pool), disk_size_gib=pool.root_volume_gib,
        secure_boot=secure_boot(pool, managed_lustre, lustre_secure_boot),
        local_ssds=0 if pool.tpu else ephemeral_local_ssds(itype.name), arch=itype.arch)


def ephemeral_local_ssds(machine_type: str) -> int:
    """The Local SSDs a GPU machine type bundles (catalog/node_local.yaml), all given to ephemeral
    storage: GKE assembles them as one RAID0 array for the kubelet's emptyDirs, container images
    and writable layers (GKE docs, About local SSDs: ephemeral_storage_local_ssd_config); Cluster
    Toolkit's gke-node-pool sets the same counts (disk_definitions.tf: a3-highgpu-8g and
    a3-megagpu-8g 16, a3-ultragpu-8g and a4-highgpu-8g 32). A bundled count cannot be changed, so
    the catalog's device count is the only valid value."""
    nvme = local_nvme(machine_type)
    return nvme.devices if nvme else 0


def free_range(prefix: int, taken: list, after=None) -> str:
    """The first aligned block of `prefix` in the range spaces (after `after`, when given) that
    overlaps nothing taken."""
    for space in _RANGE_SPACES:
        for block in ipaddress.ip_network(space).subnets(new_prefix=prefix):
            if after is not None and block.network_address <= after.broadcast_address:
                continue
            if not any(block.overlaps(t) for t in taken):
                return str(block)
    raise ValueError(f"no free /{prefix} for GKE")   # unreachable: the spaces are far larger than a VPC


def cluster_ranges(net: "NetworkDesign", fabric_cidrs: tuple[str, ...]) -> tuple[str, str]:
    """(pods, services): clear of the system VPC, the GPU NIC networks and private service access
    (`fabric_cidrs`: the ranges the GPU NIC networks are taken from, design.GCP_FABRIC_CIDRS)."""
    taken = [ipaddress.ip_network(c) for c in (net.vpc_cidr, net.service_cidr) if c]
    taken += [ipaddress.ip_network(s.cidr) for f in net.fabric_networks for s in f.subnets]
    if net.service_cidr:    # the whole fabric range: the /16 of private service access sits at its end
        taken += [ipaddress.ip_network(c) for c in fabric_cidrs
                  if ipaddress.ip_network(net.service_cidr).subnet_of(ipaddress.ip_network(c))]
    pods = free_range(POD_RANGE_PREFIX, taken)
    services = free_range(SERVICE_RANGE_PREFIX, taken, after=ipaddress.ip_network(pods))
    return pods, services


def _kubernetes_pool(pool: "PoolDesign", gke: GkeNodePool) -> KubernetesPool:
    itype = pool.instance
    tpu = pool.tpu
    labels = {POOL_LABEL: pool.name, INSTANCE_TYPE_LABEL: itype.name,
              ACCELERATOR_LABEL: f"tpu-{tpu.name}" if tpu else itype.accelerator.gres_type}
    vcpu = itype.vcpu or 0
    # gcp.yaml and tpu.yaml give GPU machine types' memory in GB as Google publishes it: in GiB for Kubernetes.
    memory = int((itype.memory_gib or 0) * GB_PER_GIB_RATIO) if not tpu else (itype.memory_gib or 0)
    worker_memory = int(memory * WORKER_MEMORY_SHARE)
    return KubernetesPool(
        name=pool.name, instance_type=itype.name, min_nodes=pool.min_nodes, max_nodes=pool.max_nodes,
        capacity_type=pool.capacity.type.upper().replace("-", "_"), labels=labels,
        taints=(TPU_TAINT,) if tpu else (GPU_TAINT,),
        gpus=gke.gpus, efa=0, vcpu=vcpu, memory_gib=memory, hugepages_per_node=0, local_nvme=False,
        worker_cpu=max(1, vcpu - WORKER_CPU_MARGIN), worker_memory_gib=worker_memory,
        shm_gib=max(1, int(worker_memory * SHM_SHARE)), tpus=tpu.chips_per_host if tpu else 0,
        bought_nodes=pool.capacity.nodes, max_unavailable=pool.max_unavailable,
        nvlink_domain_nodes=itype.nodes_per_nvlink_domain,
        cloud_taints=(ARM_TAINT,) if itype.arch == "arm64" and not tpu else ())


def design_gke_kubernetes(spec: "ClusterSpec", pools: "tuple[PoolDesign, ...]",
                          network: "NetworkDesign", fabric_cidrs: tuple[str, ...]) -> KubernetesDesign:
    v = versions()
    k8s = spec.kubernetes
    managed_lustre = any(fs.type == "lustre" for fs in spec.storage)     # lustre on gcp: Managed Lustre
    node_pools = tuple(_node_pool(p, network, v.gke.accelerators, managed_lustre, v.gke.lustre_secure_boot)
                       for p in pools)
    pods, services = cluster_ranges(network, fabric_cidrs)
    gke = GkeDesign(
        cluster_name=spec.name, location=spec.region, zone=spec.zone,
        release_channel=v.gke.release_channel, version=v.gke.version,
        gpu_driver_version=v.gke.gpu_driver_version, image_type=v.gke.image_type,
        pods_cidr=pods, services_cidr=services, max_pods_per_node=MAX_PODS_PER_NODE,
        api_access_cidrs=tuple(str(ipaddress.ip_network(c)) for c in k8s.api_access_cidrs),
        system_machine_type=k8s.system_nodes.instance_type or DEFAULT_SYSTEM_TYPE["gcp"],
        system_nodes=k8s.system_nodes.count, node_pools=node_pools, api_access=k8s.api_access)
    return KubernetesDesign(
        version=v.gke.version, cluster_name=spec.name, namespace=k8s.namespace, gpu_devices="gke",
        api_access_cidrs=gke.api_access_cidrs, admins=(), system_instance_type=gke.system_machine_type,
        system_nodes=gke.system_nodes, control_plane_subnets=(), control_plane_subnet_ids=(),
        pools=tuple(_kubernetes_pool(p, g) for p, g in zip(pools, node_pools)), platform="gke", gke=gke,
        api_access=k8s.api_access, teams=kubernetes_teams(spec), identities=design_identities(spec),
        datasets=design_datasets(spec))
