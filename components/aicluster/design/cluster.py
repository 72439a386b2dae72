"""spec + catalog -> ClusterDesign. Pure: no Pulumi, no cloud calls, fully unit-testable.

Everything that needs no cloud output is decided here: fabric interface layouts, node names,
placement, subnets, images, storage tiers and sizes. Pulumi components only translate it.
"""
from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from aicluster.catalog import FsxDeploymentType, InstanceType, load_catalog
from aicluster.catalog.kubernetes import versions as kubernetes_versions
from aicluster.catalog.tpu_slices import host_instance, tpu_slice
from aicluster.design.accounting import design_accounting
from aicluster.design.budget import design_budget
from aicluster.design.login import design_login
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import (GcpNetwork, GcpNic, GcpSubnet, NetworkDesign, NetworkInterface, Placement, PoolDesign,
                                    NodeImageDesign, SlurmDesign, SlurmNodeSet, StorageDesign,
                                    node_hostlist)
from aicluster.errors import Problem, SpecError, join_path
from aicluster.spec.cluster import ClusterSpec, PoolSpec, StorageSpec
from aicluster.spec.slurm_settings import rendered_settings

if TYPE_CHECKING:   # imported where a Kubernetes cluster is designed: a Slurm plan never loads them
    from aicluster.design.kubernetes import KubernetesDesign

DEFAULT_VPC_CIDR = "10.0.0.0/16"
# Head node types when the spec names none: 8 vCPU / 32 GiB on both clouds.
DEFAULT_HEAD_TYPE = {"aws": "m7i.2xlarge", "gcp": "n2-standard-8"}
# GCP: the GPU NIC networks take consecutive /18 subnets (16k nodes each) from a range of their own,
# away from the system VPC's range, so no node ever has two NICs on overlapping subnets; the last /16
# of that range is the private service access range Managed Lustre and Filestore take their
# addresses from. 172.16.0.0/12 unless the system range overlaps it.
GCP_FABRIC_CIDRS = ("172.16.0.0/12", "10.128.0.0/9")
GCP_FABRIC_SUBNET_PREFIX = 18
GCP_SERVICE_PREFIX = 16          # Cluster Toolkit's private-service-access default prefix length
# The system VPC's MTU when no machine type asks for less: the largest a VPC takes, what the
# gVNIC networks of A3 Ultra / A4 use (Cluster Toolkit's examples/machine-learning blueprints) and what Lustre clients benefit from.
GCP_DEFAULT_MTU = 8896
# FSx PERSISTENT_2 per-TiB throughput when the spec names none: the middle tier, enough for the
# SuperPOD "good" per-GPU read floor at modest capacities (see balance.py).
DEFAULT_THROUGHPUT_MBPS_PER_TIB = {"PERSISTENT_2": 250, "PERSISTENT_1": 200}
# Reservations and capacity blocks fix placement themselves; adding a placement group to them
# makes launches fail (ParallelCluster warns about the same).
_RESERVED_CAPACITY = ("reservation", "capacity-block")


def design_pool(instance_type: str, *, name: str = "gpu", cloud: str = "aws", max_nodes: int = 2,
                min_nodes: int = 0, capacity: str = "on-demand", reservation_id: str | None = None,
                root_volume_gib: int | None = None) -> PoolDesign:
    """One pool's design from its instance type alone (every EFA device or GPU NIC from the
    catalog, placement, image), for a Pulumi program that uses GpuPool without an aicluster spec.
    Bad values raise the same SpecError a spec would, with the argument as its path."""
    pool: dict[str, Any] = {"name": name, "instance_type": instance_type, "min_nodes": min_nodes,
                            "max_nodes": max_nodes, "capacity": {"type": capacity}}
    if reservation_id:
        pool["capacity"]["reservation_id"] = reservation_id
    if root_volume_gib is not None:
        pool["root_volume_gib"] = root_volume_gib
    try:
        pool_spec = PoolSpec.model_validate(pool)
    except ValidationError as exc:
        raise SpecError([Problem(join_path(*e["loc"]), e.get("input"), e["msg"]) for e in exc.errors()],
                        subject="pool") from None
    instance = load_catalog().resolve(cloud, pool_spec.instance_type)
    if instance is None:
        raise SpecError.one("instance_type", instance_type, f"an instance type of {cloud} in the catalog",
                            load_catalog().names(cloud), subject="pool")
    return _design_pool(_PoolContext(cloud=cloud, scheduler="slurm"), 0, pool_spec)


@dataclass(frozen=True)
class _PoolContext:
    """The two facts of a spec that a pool's design depends on."""
    cloud: str
    scheduler: str


def design_cluster(spec: ClusterSpec) -> ClusterDesign:
    problems: list[Problem] = []
    pools = tuple(_design_pool(spec, i, pool) for i, pool in enumerate(spec.pools))
    storage = tuple(s for s in (_design_storage(spec, i, fs, problems) for i, fs in enumerate(spec.storage)) if s)
    if problems:
        raise SpecError(problems)
    network = _design_network(spec, pools)
    return ClusterDesign(
        name=spec.name,
        cloud=spec.cloud,
        region=spec.region,
        zone=spec.zone,
        scheduler=spec.scheduler,
        network=network,
        pools=pools,
        storage=storage,
        workload=spec.workload,
        tags=dict(spec.tags),
        slurm=_design_slurm(spec, pools, network.vpc_cidr) if spec.scheduler == "slurm" else None,
        kubernetes=_design_kubernetes(spec, pools, network) if spec.scheduler == "kubernetes" else None,
        alert_emails=tuple(spec.monitoring.alert_emails),
        metrics_on_delete=spec.monitoring.on_delete,
        budget=design_budget(spec.name, spec.cloud, spec.cost),
    )


def _design_kubernetes(spec: ClusterSpec, pools: tuple[PoolDesign, ...], network: NetworkDesign) -> KubernetesDesign:
    """The one dispatch on the Kubernetes platform: GKE on gcp, EKS on aws."""
    if spec.cloud == "gcp":
        from aicluster.design.gke import design_gke_kubernetes
        return design_gke_kubernetes(spec, pools, network, GCP_FABRIC_CIDRS)
    from aicluster.design.kubernetes import design_kubernetes
    return design_kubernetes(spec, pools, network.vpc_cidr)


# --- fabric ---------------------------------------------------------------------------------


def efa_interfaces(instance: InstanceType) -> tuple[NetworkInterface, ...]:
    """Current AWS layout: an ENA primary, plus one efa-only device on every EFA-capable card.

    efa-acc-inst-types ("Maximize network bandwidth"): the primary (card 0, device 0) must be an
    ENA interface; card 0's EFA device goes at device index 1; every other card gets its EFA device
    at device index 0. Sized from the catalog's EFA cards, never a hard-coded count.
    """
    nics = [NetworkInterface(0, 0, "interface")]
    for card in instance.efa_cards:
        nics.append(NetworkInterface(card, 1 if card == 0 else 0, "efa-only"))
    return tuple(nics)


def _design_tpu_pool(spec: ClusterSpec, pool: PoolSpec) -> PoolDesign:
    """A Cloud TPU pool: `max_nodes` hosts in slices of the topology. On GKE a multi-host slice is
    one node pool placed together (placement_policy COMPACT with the topology); on Slurm each slice
    is a TPU VM that Pulumi creates, so every host is always on."""
    tpu = tpu_slice(load_catalog().tpus[pool.tpu.type.lower()], pool.tpu.topology)
    if tpu.multi_host:
        placement = Placement("compact", f"a multi-host TPU slice: {tpu.hosts} hosts on one ICI topology "
                                         f"({tpu.topology})")
    else:
        placement = Placement(None, "single-host TPU slice: nothing to place together")
    min_nodes = pool.max_nodes if spec.scheduler == "slurm" else pool.min_nodes
    return PoolDesign(
        name=pool.name, instance=host_instance(tpu), min_nodes=min_nodes, max_nodes=pool.max_nodes,
        capacity=pool.capacity, efa=False, interfaces=(), placement=placement,
        image=tpu.generation.runtime_version or "", root_device="", root_volume_gib=pool.root_volume_gib,
        tpu=tpu, max_unavailable=pool.unavailable_budget())


def _design_pool(spec: ClusterSpec, index: int, pool: PoolSpec) -> PoolDesign:
    if pool.tpu is not None:
        return _design_tpu_pool(spec, pool)
    catalog = load_catalog()
    instance = catalog.resolve(spec.cloud, pool.instance_type)
    assert instance is not None  # parse_spec guarantees it
    efa = instance.efa_capable if pool.efa is None else pool.efa
    efa = efa and spec.cloud == "aws"
    interfaces = efa_interfaces(instance) if efa else (NetworkInterface(0, 0, "interface"),)
    if spec.cloud == "gcp" and instance.nodes_per_nvlink_domain > 1:
        # Even from a reservation: the policy's GPU topology is what puts the VMs in one NVLink
        # domain (Cluster Toolkit: slurm-gcp's resume.py gives A4X nodesets a COLLOCATED policy
        # with gpuTopology 1x72; examples/gke-a4x a HIGH_THROUGHPUT workload policy, 1x72).
        placement = Placement("compact", f"one NVLink domain: a 1x{instance.nvlink_domain_gpus} placement policy "
                                         "puts the pool's VMs in one reservation sub-block",
                              gpu_topology=f"1x{instance.nvlink_domain_gpus}")
    elif pool.capacity.type in _RESERVED_CAPACITY:
        placement = Placement(None, f"the {pool.capacity.type} {pool.capacity.reservation_id} fixes placement")
    elif pool.max_nodes < 2:
        placement = Placement(None, "single node: nothing to place together")
    elif spec.cloud == "gcp":
        placement = Placement("compact", "multi-node pool: a compact placement policy keeps the GPU NICs close")
    else:
        placement = Placement("cluster", "multi-node pool: one placement group keeps the fabric in one spine")
    if spec.cloud == "gcp":
        gcp_image = catalog.gcp_images.get(instance.image or "")
        return PoolDesign(
            name=pool.name, instance=instance, min_nodes=pool.min_nodes, max_nodes=pool.max_nodes,
            capacity=pool.capacity, efa=False, interfaces=(), placement=placement,
            image=pool.image or (gcp_image.image if gcp_image else ""), root_device="",
            root_volume_gib=pool.root_volume_gib, nics=gcp_nics(instance),
            boot_disk_type=instance.boot_disk_type or "pd-ssd", max_unavailable=pool.unavailable_budget(),
            partition=pool.partition)
    # The type's own image role where it names one (aws.yaml: the arm64 Grace-Blackwell nodes boot
    # gpu-arm64), else by accelerator kind.
    role = instance.image or ("trainium" if instance.accelerator.kind == "trainium" else "gpu")
    # AWS images only; GCP images per machine family arrive with the GCP components.
    image_facts = catalog.images.get(role, {}) if spec.cloud == "aws" else {}
    if spec.cloud == "aws" and spec.scheduler == "kubernetes":
        # EKS node groups take the EKS-optimized accelerated AL2023 AMI by ami_type: no image id.
        image_facts = {"root_device": kubernetes_versions().ami_types["gpu"]["root_device"]}
    image = pool.image or image_facts.get("ssm_parameter", "")
    if image.startswith("/"):
        image = f"resolve:ssm:{image}"
    return PoolDesign(
        name=pool.name,
        instance=instance,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        capacity=pool.capacity,
        efa=efa,
        interfaces=interfaces,
        placement=placement,
        image=image,
        root_device=image_facts.get("root_device", "/dev/sda1"),
        root_volume_gib=pool.root_volume_gib,
        max_unavailable=pool.unavailable_budget(),
        partition=pool.partition,
    )


def gcp_nics(instance: InstanceType) -> tuple[GcpNic, ...]:
    """The GCP NIC layout of a machine type, from the catalog (Google's own Cluster Toolkit blueprints, examples/machine-learning):

    - NIC 0: gVNIC on the system VPC (host traffic, Slurm, storage);
    - further host NICs (A3 Ultra, A4: 2 in all): gVNIC, one more network each;
    - GPU NICs: TCPX / TCPXO types get one gVNIC per GPU NIC, each on a VPC of its own (A3 High 4,
      A3 Mega 8); RDMA types get one MRDMA NIC per GPU NIC, all on one RDMA VPC with the zone's
      RoCE network profile, one subnet per NIC (A3 Ultra, A4: 8).
    """
    nics = [GcpNic(0, "system", 0, "GVNIC", "host")]
    for h in range(1, instance.host_nics):
        nics.append(GcpNic(len(nics), f"gvnic-{h}", 0, "GVNIC", "host"))
    for i in range(instance.gpu_nics):
        if instance.gpu_nic_stack == "rdma":
            nics.append(GcpNic(len(nics), "rdma", i, "MRDMA", "gpu"))
        else:
            nics.append(GcpNic(len(nics), f"{instance.gpu_nic_stack}-{i + 1}", 0, "GVNIC", "gpu"))
    return tuple(nics)


# Slurm's RealMemory must not exceed what the kernel reports, which is below the nominal size;
# ParallelCluster schedules on 95 % of the instance memory for the same reason.
SLURM_MEMORY_SHARE = 0.95


def _design_slurm(spec: ClusterSpec, pools: tuple[PoolDesign, ...], vpc_cidr: str | None) -> SlurmDesign:
    nodesets = []
    for pool in pools:
        if pool.tpu is not None:
            nodesets.append(_tpu_nodeset(pool))
            continue
        pool_spec = next(p for p in spec.pools if p.name == pool.name)
        acc = pool.instance.accelerator
        is_gpu = acc.kind == "gpu"
        features = [pool.instance.name, pool.name, acc.kind, acc.gres_type]
        if pool.efa:
            features.append("efa")
        if pool.gpu_nics:
            features.append(pool.instance.gpu_nic_stack)    # tcpx | tcpxo | rdma
        nodesets.append(SlurmNodeSet(
            pool=pool.name,
            hostlist=pool.hostlist,
            static_hostlist=pool.static_hostlist,
            dynamic_hostlist=pool.dynamic_hostlist,
            cpus=pool.instance.vcpu or 1,
            cores=pool.instance.cores,
            threads_per_core=pool.instance.threads_per_core,
            real_memory_mib=int((pool.instance.memory_gib or 1) * 1024 * SLURM_MEMORY_SHARE),
            gres=f"gpu:{acc.gres_type}:{pool.instance.accelerator_count}" if is_gpu else None,
            gpu_count=pool.instance.accelerator_count if is_gpu else 0,
            gpu_type=acc.gres_type if is_gpu else None,
            features=tuple(dict.fromkeys(features)),   # unique, in order
            exclusive=pool.max_nodes >= 2,
            switch=pool.name,
            sockets=pool.instance.sockets,
            gpus_per_socket=pool.instance.gpus_per_socket if is_gpu else None,
            partition_settings=rendered_settings(pool_spec.slurm_settings),
            partition=pool.partition or "",
        ))
    head = spec.slurm.head_node
    return SlurmDesign(
        nodesets=tuple(nodesets),
        suspend_time_s=int(round(spec.slurm.suspend_idle_min * 60)),
        resume_timeout_s=spec.slurm.resume_timeout_min * 60,
        accounting=spec.slurm.accounting is not False,
        accounting_settings=design_accounting(spec, vpc_cidr),
        head_instance_type=head.instance_type or DEFAULT_HEAD_TYPE[spec.cloud],
        head_root_volume_gib=head.root_volume_gib,
        head_public_ip=head.public_ip,
        head_on_delete=head.on_delete,
        login=design_login(spec.cloud, spec.slurm.login),
        settings=rendered_settings(spec.slurm.settings),
        node_image=_node_image(spec, pools),
    )


def _node_image(spec: ClusterSpec, pools: tuple[PoolDesign, ...]) -> NodeImageDesign | None:
    """The baked image and the pools that boot it: GPU pools on the catalog's GPU image (the bake
    starts from that image, so its driver and fabric stack stay). A pool with an image of its own,
    a TPU slice or a Trainium pool keeps installing at boot."""
    wanted = spec.slurm.node_image
    if not wanted.build and wanted.id is None:
        return None
    catalog = load_catalog()
    if spec.cloud == "aws":
        base = f"resolve:ssm:{catalog.images['gpu']['ssm_parameter']}"
    else:
        base = catalog.gcp_images["accelerator"].image
    own_image = {p.name for p in spec.pools if p.image is not None}
    gpu_pools = [p for p in pools if p.tpu is None and p.instance.accelerator.kind == "gpu"]
    baked = tuple(p.name for p in gpu_pools if p.name not in own_image and p.image == base)
    at_boot = tuple((p.name, _boots_unbaked(p, p.name in own_image)) for p in gpu_pools if p.name not in baked)
    return NodeImageDesign(build=wanted.build, image_id=wanted.id, base_image=base, pools=baked, at_boot=at_boot)


def _boots_unbaked(pool: PoolDesign, own_image: bool) -> str:
    """Why a GPU pool is not booted from the baked image (the plan says it)."""
    if pool.instance.arch != "x86_64":
        return (f"{pool.instance.arch} ({pool.instance.name}): the bake starts only from the catalog's x86_64 GPU "
                "image, so its programs would not run here")
    return "its own image (pools[].image)" if own_image else "not on the catalog's GPU image"


def _tpu_nodeset(pool: PoolDesign) -> SlurmNodeSet:
    """A TPU pool on Slurm: one partition, one topology switch per slice (hosts of a slice share
    its ICI; slices meet over the data-center network), no GRES (the chips are the host's)."""
    tpu = pool.tpu
    switches = tuple((f"{pool.name}-slice-{k}", node_hostlist(pool.name, k * tpu.hosts + 1, (k + 1) * tpu.hosts))
                     for k in range(pool.slices))
    return SlurmNodeSet(
        pool=pool.name, hostlist=pool.hostlist, static_hostlist=pool.hostlist, dynamic_hostlist=None,
        cpus=pool.instance.vcpu or 1, cores=None, threads_per_core=None,
        real_memory_mib=int((pool.instance.memory_gib or 1) * 1024 * SLURM_MEMORY_SHARE),
        gres=None, gpu_count=0, gpu_type=None,
        features=(pool.instance.name, pool.name, "tpu", f"tpu-{tpu.name}", tpu.topology),
        exclusive=True, switch=pool.name, cloud=False, switches=switches)


# --- network --------------------------------------------------------------------------------


def _design_network(spec: ClusterSpec, pools: tuple[PoolDesign, ...] = ()) -> NetworkDesign:
    net = spec.network
    # Canonical CIDRs ("203.0.113.5" -> "203.0.113.5/32"): what security group rules accept.
    ssh = tuple(str(ipaddress.ip_network(c)) for c in net.ssh_ingress_cidrs)
    if net.existing:
        design = NetworkDesign(False, None, None, None, net.existing.vpc_id, net.existing.subnet_id, ssh)
    else:
        vpc = ipaddress.ip_network(net.vpc_cidr or DEFAULT_VPC_CIDR)
        # First half: the private cluster subnet (EFA-only interfaces take no IPs, ENIs of the older
        # layout do). Third quarter: the public subnet that only holds the NAT gateway (AWS). The
        # last quarter stays free for later subnets (control planes, endpoints).
        halves = list(vpc.subnets(prefixlen_diff=1))
        quarters = list(vpc.subnets(prefixlen_diff=2))
        public = str(quarters[2]) if spec.cloud == "aws" else None   # GCP egress is Cloud NAT: no public subnet
        design = NetworkDesign(True, str(vpc), str(halves[0]), public, None, None, ssh, flow_logs=net.flow_logs)
    if spec.cloud != "gcp":
        return design
    return _gcp_network(spec, design, pools)


def _gcp_network(spec: ClusterSpec, base: NetworkDesign, pools: tuple[PoolDesign, ...]) -> NetworkDesign:
    """The GCP additions: the system VPC's MTU, every GPU NIC network the pools need (shared by pools
    of the same NIC stack) with addresses from a fabric range, and the private service access range."""
    system = ipaddress.ip_network(base.vpc_cidr) if base.vpc_cidr else None
    fabric = next(ipaddress.ip_network(c) for c in GCP_FABRIC_CIDRS
                  if system is None or not system.overlaps(ipaddress.ip_network(c)))
    *subnet_space, service = list(fabric.subnets(new_prefix=GCP_SERVICE_PREFIX))
    blocks = (b for s in subnet_space for b in s.subnets(new_prefix=GCP_FABRIC_SUBNET_PREFIX))
    mtus = {p.instance.nic_mtu for p in pools if p.instance.nic_mtu}
    mtu = min(mtus, default=GCP_DEFAULT_MTU)
    networks: dict[str, GcpNetwork] = {}
    for pool in pools:
        for nic in pool.nics:
            if nic.network == "system" or nic.network in networks:
                continue
            name = f"{spec.name}-{nic.network}"
            roce = nic.nic_type == "MRDMA"
            # The most NICs any pool puts on this network (A4: 8 RDMA NICs, A4X: 4), so each finds its subnet.
            count = max(sum(1 for n in p.nics if n.network == nic.network) for p in pools)
            subnets = tuple(GcpSubnet(f"{name}-sub-{i}" if roce else f"{name}-sub", str(next(blocks)))
                            for i in range(count if roce else 1))
            networks[nic.network] = GcpNetwork(nic.network, name, pool.instance.nic_mtu or GCP_DEFAULT_MTU, roce,
                                               subnets)
    return dataclasses.replace(base, mtu=mtu, fabric_networks=tuple(networks.values()), service_cidr=str(service))


# --- storage --------------------------------------------------------------------------------


def _on_delete(fs: StorageSpec) -> str:
    """What `aicluster destroy` does with the filesystem: its on_delete; an unprotected one goes with the stack."""
    return fs.on_delete if fs.protect else "delete"


def _design_storage(spec: ClusterSpec, index: int, fs: StorageSpec, problems: list[Problem]) -> StorageDesign | None:
    at = f"storage[{index}]"
    if fs.type == "efs":   # the shared /home (aws/home.py); spec.py refused it off aws Slurm
        # Elastic: no capacity, and no throughput counted as training data's (not a parallel filesystem).
        return StorageDesign(fs.name, "efs", fs.mount, 0, 0, None, None, fs.protect, on_delete=_on_delete(fs))
    if spec.cloud == "aws":
        tier = load_catalog().fsx[fs.deployment_type]
        throughput = _fsx_throughput(tier, fs, at, problems)
        _check_fsx_capacity(tier, fs, at, problems)
        return StorageDesign(fs.name, "fsx-lustre", fs.mount, fs.capacity_gib, throughput, fs.deployment_type,
                             fs.import_path, fs.protect, on_delete=_on_delete(fs))
    if fs.type == "filestore":
        return _design_filestore(fs, at, problems)
    tiers = load_catalog().managed_lustre
    if "deployment_type" in fs.model_fields_set:
        problems.append(Problem(f"{at}.deployment_type", fs.deployment_type,
                                "leave it out on gcp (Managed Lustre picks its tier by throughput_mbps_per_tib)"))
    throughput = fs.throughput_mbps_per_tib or 500
    tier = tiers.get(throughput)
    if tier is None:
        problems.append(Problem(f"{at}.throughput_mbps_per_tib", throughput,
                                f"a Managed Lustre tier: {', '.join(str(t) for t in sorted(tiers))}"))
        return None
    if fs.capacity_gib < tier.min_capacity_gib:
        problems.append(Problem(f"{at}.capacity_gib", fs.capacity_gib,
                                f"at least {tier.min_capacity_gib} GiB on the {throughput} MB/s/TiB tier",
                                str(tier.min_capacity_gib)))
    return StorageDesign(fs.name, "managed-lustre", fs.mount, fs.capacity_gib, throughput, None, fs.import_path,
                         fs.protect, on_delete=_on_delete(fs))


# Filestore for homes: the zonal tier is the cheapest that scales past 10 TiB.
DEFAULT_FILESTORE_TIER = "ZONAL"


def _design_filestore(fs: StorageSpec, at: str, problems: list[Problem]) -> StorageDesign | None:
    for key in ("deployment_type", "throughput_mbps_per_tib", "import_path"):
        if key in fs.model_fields_set and getattr(fs, key) is not None:
            problems.append(Problem(f"{at}.{key}", getattr(fs, key), "leave it out for type filestore"))
    tier = load_catalog().filestore[fs.filestore_tier or DEFAULT_FILESTORE_TIER]
    if not tier.capacity_allowed(fs.capacity_gib):
        problems.append(Problem(f"{at}.capacity_gib", fs.capacity_gib,
                                f"a Filestore {tier.name} size: {tier.capacity_rule()}", str(tier.nearest(fs.capacity_gib))))
    return StorageDesign(fs.name, "filestore", fs.mount, fs.capacity_gib, 0, None, None, fs.protect, tier.name,
                         on_delete=_on_delete(fs))


def _fsx_throughput(tier: FsxDeploymentType, fs: StorageSpec, at: str, problems: list[Problem]) -> int:
    if not tier.throughput_mbps_per_tib:  # scratch: a fixed baseline, no per-unit setting
        if fs.throughput_mbps_per_tib is not None:
            problems.append(Problem(f"{at}.throughput_mbps_per_tib", fs.throughput_mbps_per_tib,
                                    f"leave it out for {tier.name} (fixed {tier.baseline_mbps_per_tib} MB/s/TiB)"))
        return int(tier.baseline_mbps_per_tib or 0)
    value = fs.throughput_mbps_per_tib or DEFAULT_THROUGHPUT_MBPS_PER_TIB[tier.name]
    allowed = tier.throughput_mbps_per_tib
    if value not in allowed:
        nearest = min(allowed, key=lambda v: abs(v - value))
        problems.append(Problem(f"{at}.throughput_mbps_per_tib", value,
                                f"one of {', '.join(map(str, allowed))} MB/s/TiB for {tier.name}", str(nearest)))
    return value


def _check_fsx_capacity(tier: FsxDeploymentType, fs: StorageSpec, at: str, problems: list[Problem]) -> None:
    if tier.capacity_allowed(fs.capacity_gib):
        return
    near = " or ".join(str(c) for c in tier.neighbours(fs.capacity_gib))
    problems.append(Problem(f"{at}.capacity_gib", fs.capacity_gib,
                            f"a {tier.name} size: {tier.capacity_rule()}", near))
