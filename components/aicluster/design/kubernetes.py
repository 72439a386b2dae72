"""spec + catalog -> KubernetesDesign: everything about the EKS control plane that needs no cloud
output. Pure (no Pulumi): node labels and taints, hugepages, Kueue flavors and quotas, the worker
shape of the example training job, the control-plane subnets, and the pinned versions.

The versions live in components/aicluster/catalog/kubernetes.yaml (one place, every entry sourced),
loaded by catalog/kubernetes.py (below the spec, which checks against them) and re-exported here.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from aicluster.catalog.tpu_slices import TPU_RESOURCE
from aicluster.design.zone_subnets import two_zone_subnets
from aicluster.catalog.kubernetes import (_VERSIONS_FILE, Chart, GkeVersions, NcclInstaller, Versions,  # noqa: F401
                                 second_zone, version_tuple, versions, versions_from)

from aicluster.design.pod_identity import Dataset, PodIdentity, design_datasets, design_identities

if TYPE_CHECKING:   # design.py imports this module; only type names flow the other way
    from aicluster.design.parts import PoolDesign
    from aicluster.design.gke_parts import GkeDesign
    from aicluster.spec.cluster import ClusterSpec

# Labels and taints every GPU node carries. `nvidia.com/gpu.present` and
# `vpc.amazonaws.com/efa.present` are the labels the NVIDIA charts and the EFA device plugin's
# documented values select on; the aicluster.io ones name the pool for Kueue and jobs.
POOL_LABEL = "aicluster.io/pool"
INSTANCE_TYPE_LABEL = "aicluster.io/instance-type"
ACCELERATOR_LABEL = "aicluster.io/accelerator"
ROLE_LABEL = "aicluster.io/role"
SYSTEM_NODES = {ROLE_LABEL: "system"}     # the node selector of the add-on controllers
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"
# GKE taints its GPU and TPU nodes itself (GKE GPU and TPU docs); workloads tolerate them.
TPU_TAINT_KEY = "google.com/tpu"

# "Amazon EC2 instances with the EFA driver installed pre-allocate 5128 2MiB Huge Pages"; an EFA
# worker requests 5120Mi of them (EKS user guide, node-efa). The nodes set the same count
# themselves, so it does not depend on which EFA packages an AMI release carries.
HUGEPAGES_PER_NODE = 5128
HUGEPAGES_PER_WORKER_MIB = 5120
# What a worker leaves to the kubelet, the system daemons and the DaemonSets (CNI, kube-proxy,
# device plugins, FSx node plugin, Pod Identity agent): EKS reserves well under 1 vCPU and a few
# GiB on these sizes; the margins keep a whole-node worker schedulable on every catalog type.
WORKER_CPU_MARGIN = 4
WORKER_MEMORY_SHARE = 0.9
# /dev/shm for DataLoader workers and NCCL's shared-memory transport: a memory-backed emptyDir,
# counted against the worker's memory limit.
SHM_SHARE = 1 / 8


# How the `pulumi up` that creates the in-cluster objects (Helm releases, volumes, queues) reaches
# the Kubernetes API (spec `kubernetes.api_access`):
# - endpoint: over an endpoint the deployer can reach from where it runs. GKE: the DNS-based
#   control-plane endpoint, authenticated by IAM (no IP allowlist); EKS has no IAM-gated endpoint,
#   so its public endpoint is opened to `api_access_cidrs` only (required).
# - vpc: the endpoint stays private; `pulumi up` runs inside the VPC or a network routed to it
#   (VPN, Direct Connect / Interconnect, peering) and creates everything in one run.
# - private: the endpoint stays private and this `pulumi up` creates no in-cluster object (phase 1);
#   phase 2 switches to `vpc` and runs `pulumi up` from inside the VPC. The cloud resources of
#   `private` and `vpc` are the same, so phase 2 only adds the in-cluster objects.
API_ACCESS = ("endpoint", "vpc", "private")

EXAMPLES_CONFIGMAP = "aicluster-examples"   # the ConfigMap that publishes the example jobs

# Priorities: Kueue WorkloadPriorityClasses, set on a job with the label
# `kueue.x-k8s.io/priority-class`. Kueue orders its queues and preempts by the workload's priority,
# and a Kueue preemption evicts a whole workload (every pod of the gang, requeued together). A
# Kubernetes PriorityClass would also give the pods that priority in kube-scheduler, which
# preempts pod by pod and could kill one rank of a running gang; a WorkloadPriorityClass does not
# touch the pods' priority (Kueue docs, concepts/workload_priority_class). A job without the label
# gets priority 0 (no globalDefault PriorityClass exists), so `training` is 0: the default.
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@dataclass(frozen=True)
class WorkloadPriority:
    name: str
    value: int
    description: str


WORKLOAD_PRIORITIES = (
    WorkloadPriority("preemptible", -1000, "Opportunistic work (sweeps, evaluation, debugging): any job of a "
                     "higher class may preempt it, also one borrowing quota from another team's queue."),
    WorkloadPriority("training", 0, "The default (also for jobs without a priority label): preempted only by "
                     "critical jobs of the same queue, or when another team reclaims its quota."),
    WorkloadPriority("critical", 1000, "Production and deadline runs: preempts preemptible and training jobs "
                     "of its own queue to start."),
)
DEFAULT_PRIORITY = "training"
# A queue that borrows idle quota from the cohort may preempt only jobs at or below this priority
# in the queues it borrows from (ClusterQueue preemption.borrowWithinCohort.maxPriorityThreshold).
BORROW_PREEMPTS_UP_TO = WORKLOAD_PRIORITIES[0].value


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str                       # Kubernetes spelling: NoSchedule

    @property
    def eks_effect(self) -> str:      # the EKS API's spelling: NO_SCHEDULE
        return {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE",
                "PreferNoSchedule": "PREFER_NO_SCHEDULE"}[self.effect]

    def toleration(self) -> dict:
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


GPU_TAINT = Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, "NoSchedule")
TPU_TAINT = Taint(TPU_TAINT_KEY, "present", "NoSchedule")
# GKE taints every Arm node kubernetes.io/arch=arm64:NoSchedule itself (GKE docs, Arm workloads);
# the workloads and the Kueue flavor of an arm64 pool (catalog arch: A4X's Grace) tolerate it, as
# Cluster Toolkit examples/gke-a4x does (nccl-jobset-example.yaml, kueue-configuration.yaml.tftpl).
# A toleration, not a taint aicluster sets: GKE sets it.
ARM_TAINT = Taint("kubernetes.io/arch", "arm64", "NoSchedule")

# Pools whose NVLink domain spans nodes (GB200/GB300 NVL72; catalog nodes_per_nvlink_domain > 1).
# Kueue Topology Aware Scheduling places a job inside one domain, and the NVIDIA DRA driver's
# ComputeDomain runs IMEX for the job's pods (aicluster.kubernetes.nvlink).
NVLINK_TOPOLOGY = "nvlink-domains"          # the Kueue Topology's name
HOSTNAME_LABEL = "kubernetes.io/hostname"
# GPU Feature Discovery's IMEX labeler: <ClusterUUID>.<CliqueID>, the same on every node of one
# NVLink partition (NVIDIA/k8s-device-plugin internal/lm/imex.go; EKS user guide,
# ml-eks-nvidia-ultraserver: "Nodes within the same nvidia.com/gpu.clique have multi-node
# NVLink-reachability").
GPU_CLIQUE_LABEL = "nvidia.com/gpu.clique"
# The Topology's levels, widest first (Kueue requires kubernetes.io/hostname last). GKE: the labels
# GKE puts on A4X nodes, as Cluster Toolkit's examples/gke-a4x/kueue-configuration.yaml.tftpl lists
# them; the sub-block is one NVLink domain (a 1x72 placement). EKS: the clique, then the host. The
# EC2 network-node labels (topology.k8s.aws/network-node-layer-N, EKS user guide ml-workload-topology)
# describe the EFA network, and nothing documents that an UltraServer sits under one of them; Kueue
# names a domain by its path from the widest level, so a level above the clique that split one
# UltraServer would make a whole-domain job unplaceable. Each EKS pool is one capacity block, one
# UltraServer: its ResourceFlavor (the pool label) already keeps a job to it.
TOPOLOGY_LEVELS = {
    "gke": ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gke-nodepool", "cloud.google.com/gce-topology-host", HOSTNAME_LABEL),
    "eks": (GPU_CLIQUE_LABEL, HOSTNAME_LABEL),
}
# The level a job's pods must share: one NVLink domain (the JobSet's
# kueue.x-k8s.io/podset-required-topology; Cluster Toolkit's nccl-jobset-example.yaml on GKE).
NVLINK_DOMAIN_LEVEL = {"gke": "cloud.google.com/gce-topology-subblock", "eks": GPU_CLIQUE_LABEL}
# resource.k8s.io (DRA: ResourceClaimTemplate, DeviceClass) by cluster version: v1 is served from
# Kubernetes 1.34 (DRA GA), v1beta2 from 1.33, v1beta1 from 1.32 (Kubernetes 1.34 and 1.33 release
# notes, "Dynamic Resource Allocation"). The DRA driver chart renders its DeviceClasses at it.
RESOURCE_API_VERSIONS = (((1, 34), "resource.k8s.io/v1"), ((1, 33), "resource.k8s.io/v1beta2"),
                         ((1, 32), "resource.k8s.io/v1beta1"))


def resource_api_version(kubernetes_version: str) -> str:
    """The resource.k8s.io version a cluster of this version serves (the newest)."""
    have = version_tuple(kubernetes_version)
    for since, api in RESOURCE_API_VERSIONS:
        if have >= since:
            return api
    raise ValueError(f"Kubernetes {kubernetes_version} serves no resource.k8s.io DRA API aicluster uses (1.32+)")
# The system node group's type when the spec names none (4 vCPU / 16 GiB on both clouds).
DEFAULT_SYSTEM_TYPE = {"aws": "m7i.xlarge", "gcp": "n2-standard-4"}


@dataclass(frozen=True)
class KubernetesPool:
    """One pool as Kubernetes sees it: an EKS managed node group, a Kueue flavor, a worker shape."""

    name: str
    instance_type: str
    min_nodes: int
    max_nodes: int
    capacity_type: str                # ON_DEMAND | SPOT | CAPACITY_BLOCK (EKS node group)
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    gpus: int                         # per node
    efa: int                          # EFA devices per node (0 without EFA)
    vcpu: int
    memory_gib: int
    hugepages_per_node: int           # 2 MiB pages the node pre-allocates
    local_nvme: bool                  # instance store to RAID0 for containerd and kubelet
    worker_cpu: int
    worker_memory_gib: int
    shm_gib: int
    tpus: int = 0                     # TPU chips per node (GKE TPU node pools)
    bought_nodes: int | None = None   # instances a reservation or capacity block holds (capacity.nodes)
    # Rolling updates (pools[].max_unavailable, PoolDesign.max_unavailable): the EKS node group's
    # update_config max_unavailable; the GKE node pool's surge (max_surge).
    max_unavailable: int = 1
    # Nodes per NVLink domain (catalog nodes_per_nvlink_domain): 18 for GB200 NVL72, 1 for HGX.
    nvlink_domain_nodes: int = 1
    # Taints the cloud sets on these nodes itself, which jobs and the flavor must tolerate too.
    cloud_taints: tuple[Taint, ...] = ()
    # EKS: the catalog/kubernetes.yaml ami_types entry its node group boots (gpu, or gpu-arm64 for
    # the Grace types, whose catalog image role says so).
    ami_role: str = "gpu"

    @property
    def flavor(self) -> str:
        return self.name

    @property
    def multi_node_nvlink(self) -> bool:
        """Whether the pool's NVLink domain spans nodes: its jobs need a ComputeDomain (IMEX)."""
        return self.nvlink_domain_nodes > 1

    @property
    def tolerations(self) -> tuple[Taint, ...]:
        """What a job on this pool and its Kueue flavor tolerate: aicluster's taints and the cloud's."""
        return (*self.taints, *self.cloud_taints)

    @property
    def desired_nodes(self) -> int:
        """The node group's size at creation. A capacity block's group starts empty: the block may
        not be active yet (EKS user guide, capacity-blocks-mng: desired size 0, then scale up when
        the block starts, by a scheduled action or update-nodegroup-config)."""
        return 0 if self.capacity_type == "CAPACITY_BLOCK" else self.min_nodes

    @property
    def min_size(self) -> int:
        """The node group's minimum: 0 for a capacity block (it is empty before the block starts,
        and EKS scales it to 0 before the block ends); the spec refuses min_nodes there."""
        return 0 if self.capacity_type == "CAPACITY_BLOCK" else self.min_nodes

    @property
    def quota_nodes(self) -> int:
        """The nodes Kueue may count on: max_nodes, or fewer when the pool buys from a reservation or
        capacity block that holds fewer (a quota above it would admit jobs no instance can start)."""
        return min(self.max_nodes, self.bought_nodes) if self.bought_nodes else self.max_nodes

    @property
    def quota(self) -> dict[str, str]:
        """The ClusterQueue's nominal quota for this flavor: the pool's totals at quota_nodes
        (memory only where the catalog knows it; TPU chips for TPU pools)."""
        return self.quota_at(self.quota_nodes)

    def quota_at(self, n: int) -> dict[str, str]:
        """The quota of `n` of this pool's nodes (a team's guaranteed share; `quota` is all of them)."""
        quota = {"cpu": str(self.vcpu * n)}
        if self.memory_gib:
            quota["memory"] = f"{self.memory_gib * n}Gi"
        quota |= {
            GPU_RESOURCE: str(self.gpus * n),
            EFA_RESOURCE: str(self.efa * n),
            HUGEPAGES_RESOURCE: f"{self.hugepages_per_node * 2 * n}Mi",
        }
        if self.tpus:
            quota[TPU_RESOURCE] = str(self.tpus * n)
        return quota

    @property
    def worker_resources(self) -> dict[str, str]:
        """What one worker pod (one per node) requests, limits equal (Guaranteed QoS; hugepages
        need requests == limits). A TPU worker asks for its host's chips only, as GKE's TPU
        guides do: the chips decide the placement, the host's CPU and memory are the worker's."""
        if self.tpus:
            return {TPU_RESOURCE: str(self.tpus)}
        resources = {"cpu": str(self.worker_cpu)}
        if self.worker_memory_gib > 0:
            resources["memory"] = f"{self.worker_memory_gib}Gi"
        resources[GPU_RESOURCE] = str(self.gpus)
        if self.efa:
            resources[EFA_RESOURCE] = str(self.efa)
            resources[HUGEPAGES_RESOURCE] = f"{HUGEPAGES_PER_WORKER_MIB}Mi"
        return resources


@dataclass(frozen=True)
class KueueQueue:
    """The queues of one namespace (the training namespace's, or a team's): its LocalQueue and the
    ClusterQueue behind it, in the cluster's cohort, with the nodes of each pool that the
    ClusterQueue's nominal quota guarantees."""

    namespace: str
    cluster_queue: str
    nodes: Mapping[str, int]           # pool name -> guaranteed nodes
    local_queue: str = "default"

    def quota(self, pool: KubernetesPool) -> dict[str, str]:
        return pool.quota_at(self.nodes.get(pool.name, 0))


@dataclass(frozen=True)
class KubernetesDesign:
    version: str
    cluster_name: str
    namespace: str
    gpu_devices: str                  # nvidia-device-plugin | gpu-operator (never both)
    api_access_cidrs: tuple[str, ...]
    admins: tuple[str, ...]
    system_instance_type: str
    system_nodes: int
    control_plane_subnets: tuple[tuple[str, str], ...]   # (cidr, zone), new VPC only
    control_plane_subnet_ids: tuple[str, ...]            # existing network only
    pools: tuple[KubernetesPool, ...]
    platform: str = "eks"                                # eks | gke
    gke: GkeDesign | None = None                         # GKE only (platform "gke")
    api_access: str = "endpoint"                         # endpoint | vpc | private (API_ACCESS)
    teams: tuple[tuple[str, Mapping[str, int]], ...] = ()  # (namespace, pool -> guaranteed nodes), spec order
    identities: tuple[PodIdentity, ...] = ()              # kubernetes.service_accounts (pod_identity_design)
    datasets: tuple[Dataset, ...] = ()                    # kubernetes.datasets: object-store volumes

    @property
    def in_cluster(self) -> bool:
        """Whether this `pulumi up` creates the in-cluster objects (not in phase 1 of `private`)."""
        return self.api_access != "private"

    @property
    def public_endpoint(self) -> bool:
        """An IP endpoint reachable from outside the VPC, for `api_access_cidrs` only."""
        return bool(self.api_access_cidrs)

    @property
    def cluster_queue(self) -> str:
        return self.cluster_name

    @property
    def local_queue(self) -> str:
        return "default"

    @property
    def cohort(self) -> str:
        """Every ClusterQueue's cohort: queues lend their idle quota to each other and reclaim it."""
        return self.cluster_name

    @property
    def queues(self) -> tuple[KueueQueue, ...]:
        """The training namespace's queue (the ClusterQueue named after the cluster), then one per
        team. Each team's ClusterQueue guarantees the team's nodes; the training queue keeps the rest
        of every pool, so the cohort's quota is the pools' totals, whatever the teams."""
        teams = tuple(KueueQueue(namespace, f"{self.cluster_name}-{namespace}", dict(nodes))
                      for namespace, nodes in self.teams)
        rest = {p.name: p.quota_nodes - sum(q.nodes.get(p.name, 0) for q in teams) for p in self.pools}
        return (KueueQueue(self.namespace, self.cluster_queue, rest, self.local_queue), *teams)

    @property
    def resources(self) -> tuple[str, ...]:
        """The ClusterQueue's covered resources, in order."""
        return tuple(r for group in self.resource_groups for r in group.resources)

    @property
    def resource_groups(self) -> tuple["ResourceGroup", ...]:
        """The ClusterQueue's resource groups. EKS: one (cpu, memory, GPUs, EFA, huge pages) for
        every pool. GKE: GPU pools cover cpu, memory (where every GPU pool's memory is known) and
        GPUs; TPU pools cover TPU chips in a group of their own (a TPU worker asks for chips only)."""
        if self.platform == "eks":
            return (ResourceGroup(("cpu", "memory", GPU_RESOURCE, EFA_RESOURCE, HUGEPAGES_RESOURCE), self.pools),)
        gpu = tuple(p for p in self.pools if not p.tpus)
        tpu = tuple(p for p in self.pools if p.tpus)
        groups = []
        if gpu:
            memory = ("memory",) if all(p.memory_gib for p in gpu) else ()
            groups.append(ResourceGroup(("cpu", *memory, GPU_RESOURCE), gpu))
        if tpu:
            groups.append(ResourceGroup((TPU_RESOURCE,), tpu))
        return tuple(groups)

    @property
    def nvlink_pools(self) -> tuple[KubernetesPool, ...]:
        """The pools whose NVLink domain spans nodes (the DRA driver's and the Topology's)."""
        return tuple(p for p in self.pools if p.multi_node_nvlink)

    @property
    def topology_levels(self) -> tuple[str, ...]:
        return TOPOLOGY_LEVELS[self.platform]

    @property
    def nvlink_domain_level(self) -> str:
        return NVLINK_DOMAIN_LEVEL[self.platform]

    @property
    def resource_api_version(self) -> str:
        return resource_api_version(self.version)

    def pool(self, name: str) -> KubernetesPool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)


@dataclass(frozen=True)
class ResourceGroup:
    """One resourceGroups entry of the ClusterQueue: resources covered and the flavors (pools)."""

    resources: tuple[str, ...]
    pools: tuple[KubernetesPool, ...]


def design_kubernetes(spec: "ClusterSpec", pools: "tuple[PoolDesign, ...]", vpc_cidr: str | None) -> KubernetesDesign:
    """EKS (gke_design.design_gke_kubernetes designs GKE; design.py picks one)."""
    k8s = spec.kubernetes
    subnets: tuple[tuple[str, str], ...] = ()
    if vpc_cidr:
        # The control plane's cross-account interfaces, one per zone (zone_subnets.py).
        subnets = two_zone_subnets(vpc_cidr, spec.zone, k8s.control_plane_zone, first=0)
    return KubernetesDesign(
        version=versions().kubernetes,
        cluster_name=spec.name,
        namespace=k8s.namespace,
        gpu_devices=k8s.gpu_devices,
        api_access_cidrs=tuple(str(ipaddress.ip_network(c)) for c in k8s.api_access_cidrs),
        admins=tuple(k8s.admins),
        system_instance_type=k8s.system_nodes.instance_type or DEFAULT_SYSTEM_TYPE["aws"],
        system_nodes=k8s.system_nodes.count,
        control_plane_subnets=subnets,
        control_plane_subnet_ids=tuple(k8s.control_plane_subnet_ids),
        pools=tuple(_pool(p) for p in pools),
        api_access=k8s.api_access,
        teams=kubernetes_teams(spec),
        identities=design_identities(spec),
        datasets=design_datasets(spec),
    )


def kubernetes_teams(spec: "ClusterSpec") -> tuple[tuple[str, Mapping[str, int]], ...]:
    """The spec's `kubernetes.teams`: each team's namespace and its guaranteed nodes per pool."""
    return tuple((team.name, dict(team.nodes)) for team in spec.kubernetes.teams)


_CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "reservation": "ON_DEMAND", "spot": "SPOT",
                   "capacity-block": "CAPACITY_BLOCK"}


def _pool(pool: "PoolDesign") -> KubernetesPool:
    itype = pool.instance
    gpus = itype.accelerator_count
    efa = pool.efa_devices
    labels = {
        POOL_LABEL: pool.name,
        INSTANCE_TYPE_LABEL: itype.name,
        ACCELERATOR_LABEL: itype.accelerator.gres_type,
        GPU_PRESENT_LABEL: "true",
    }
    if efa:
        labels[EFA_PRESENT_LABEL] = "true"
    vcpu = itype.vcpu or 1
    memory = itype.memory_gib or 1
    worker_memory = int(memory * WORKER_MEMORY_SHARE) - (HUGEPAGES_PER_NODE * 2 // 1024 + 1 if efa else 0)
    return KubernetesPool(
        name=pool.name,
        instance_type=itype.name,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        capacity_type=_CAPACITY_TYPES[pool.capacity.type],
        bought_nodes=pool.capacity.nodes,
        labels=labels,
        taints=(GPU_TAINT,),
        gpus=gpus,
        efa=efa,
        vcpu=vcpu,
        memory_gib=memory,
        hugepages_per_node=HUGEPAGES_PER_NODE if efa else 0,
        local_nvme=bool(itype.local_nvme_gb),
        worker_cpu=max(1, vcpu - WORKER_CPU_MARGIN),
        worker_memory_gib=worker_memory,
        shm_gib=max(1, int(worker_memory * SHM_SHARE)),
        max_unavailable=pool.max_unavailable,
        nvlink_domain_nodes=itype.nodes_per_nvlink_domain,
        ami_role=eks_ami_role(itype.image),
    )


def eks_ami_role(image_role: str | None) -> str:
    """The ami_types entry (kubernetes.yaml) of an instance type: its catalog image role where EKS
    has an AMI type for it (gpu-arm64: AL2023_ARM_64_NVIDIA), else the x86_64 NVIDIA AMI's."""
    return image_role if image_role and image_role in versions().ami_types else "gpu"
