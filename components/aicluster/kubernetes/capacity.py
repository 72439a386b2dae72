"""Capacity for Kubernetes gangs, as data (no Pulumi resource is made here): what starts the nodes a
queued job needs, and whether Kueue can admit a job that no capacity can start.

- EKS: Karpenter (the version the catalog pins, charts.karpenter). One NodePool and one EC2NodeClass
  per pool that can grow past the nodes its managed node group keeps (max_nodes above min_nodes,
  or a capacity block, whose node group starts empty). The node group stays the always-on floor;
  the NodePool launches the rest, up to `limits.nodes`, when Kueue admits a job whose pods do not
  fit. Karpenter takes no launch template (it writes its own), so the EC2NodeClass restates what
  the pool's launch template says: the same subnet, security groups, instance profile, placement
  group, EFA interfaces (interface + efa-only, as the design lays them out), IMDSv2 with hop limit
  1, encrypted gp3 root volume, instance store as RAID0, the AL2023 NVIDIA AMI release the node
  groups pin, and the same nodeadm user data (huge pages, kubelet settings). Capacity types:
  on-demand, spot, and `reserved` (a reservation or capacity block, selected by its id).
- Karpenter does not know that EFA nodes pre-allocate 2 MiB huge pages, so an EFA worker's
  hugepages-2Mi request would fit no instance type: a NodeOverlay adds them to the pool's type.
- GKE: flex-start pools use queued provisioning. Kueue's ProvisioningRequest admission check,
  attached to the ClusterQueue for the flex-start flavors, asks GKE for every node of the gang at
  once (class queued-provisioning.gke.io) and admits the job only when all of them exist.
- New nodes and the health gate: the example jobs require the health agent's `passed` label, so a
  node an autoscaler launches for them is born with that label and with UNCHECKED_TAINT, which no
  job tolerates and which the agent's first check removes (aicluster.kubernetes.health).
- Kueue waits for the pods of an admitted job to be ready (waitForPodsReady); a gang that cannot
  start in time (a node that never comes, a half-provisioned EKS gang) is evicted whole and requeued
  with backoff, so it neither holds quota nor blocks the queue.
- capacity_warnings: the plan's lines for every queue that can admit what capacity cannot start.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from aicluster.kubernetes.nvlink import nvlink_lines
from aicluster.catalog import dump_yaml
from aicluster.kubernetes.health import HEALTH_LABEL, HEALTH_PASSED, STARTUP_TAINT_KEY
from aicluster.design.kubernetes import GPU_RESOURCE, HUGEPAGES_RESOURCE, KubernetesDesign, KubernetesPool, Taint, versions
from aicluster.catalog.tpu_slices import TPU_RESOURCE

if TYPE_CHECKING:
    from aicluster.design.model import ClusterDesign
    from aicluster.design.parts import PoolDesign

# --- Kueue: wait for pods ready, requeue with backoff ------------------------------------------------
# An admitted job's pods must all be running and ready within POD_READY_TIMEOUT, or Kueue evicts
# the whole workload and requeues it. Long enough for a p5/p6 node to be launched by Karpenter,
# join, load the EFA and GPU plugins and pull the training image (tens of GB); short enough that a
# gang that cannot start releases its quota in well under an hour. RECOVERY_TIMEOUT: a running
# gang whose pod failed gets this long for the replacement (a repaired or new node) before it is
# evicted and requeued whole.
POD_READY_TIMEOUT = "30m"
RECOVERY_TIMEOUT = "20m"
# Requeue backoff (Kueue RequeuingStrategy): 60 s doubling up to 30 min; no limit on requeues (a
# spot or flex-start gang may find capacity later), so a job is never deactivated by waiting.
REQUEUE_BACKOFF_BASE_S = 60
REQUEUE_BACKOFF_MAX_S = 1800
# The Kueue chart's own controller_manager_config.yaml (charts/kueue/values.yaml, managerConfig),
# which a values override replaces whole: kept as the chart has it, plus waitForPodsReady.
_KUEUE_MANAGER_DEFAULTS: dict[str, Any] = {
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {"groupKindConcurrency": {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10,
                                            "LocalQueue.kueue.x-k8s.io": 5, "ClusterQueue.kueue.x-k8s.io": 5,
                                            "ResourceFlavor.kueue.x-k8s.io": 1}},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice",
                                    "ray.io/raycluster", "jobset.x-k8s.io/jobset"]},
}
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"


def wait_for_pods_ready() -> dict[str, Any]:
    """Kueue's waitForPodsReady (config v1beta2: present means on). blockAdmission stays off: a gang
    waiting for Karpenter or a flex-start ProvisioningRequest must not stop every other queue."""
    return {"timeout": POD_READY_TIMEOUT, "recoveryTimeout": RECOVERY_TIMEOUT, "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": REQUEUE_BACKOFF_BASE_S,
                                  "backoffMaxSeconds": REQUEUE_BACKOFF_MAX_S}}


def kueue_manager_config() -> dict[str, Any]:
    return {"apiVersion": KUEUE_CONFIG_API, "kind": "Configuration", **_KUEUE_MANAGER_DEFAULTS,
            "waitForPodsReady": wait_for_pods_ready()}


def kueue_manager_values() -> dict[str, Any]:
    """The Kueue chart's `managerConfig` values: the whole manager configuration, as YAML text."""
    return {"controllerManagerConfigYaml": dump_yaml(kueue_manager_config(), sort_keys=False)}


# --- EKS: Karpenter -----------------------------------------------------------------------------------
NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODEOVERLAY_API = "karpenter.sh/v1alpha1"
KARPENTER_SERVICE_ACCOUNT = "karpenter"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_NODE_LABEL = "node.kubernetes.io/instance-type"
# Karpenter's capacity types (NodePool requirement karpenter.sh/capacity-type); reservations and
# capacity blocks are both `reserved`, selected by id in the EC2NodeClass.
KARPENTER_CAPACITY = {"on-demand": "on-demand", "spot": "spot", "reservation": "reserved",
                      "capacity-block": "reserved"}
# An empty node waits this long for the next job (a requeued gang, the next run of a sweep) before
# Karpenter terminates it; nodes with pods are never consolidated (WhenEmpty).
EMPTY_NODE_GRACE = "10m"


# A node launched for a waiting job is born with this taint and the health label the jobs require
# (so an autoscaler can promise the label); the health agent's first check removes the taint.
UNCHECKED_TAINT = Taint(STARTUP_TAINT_KEY, "true", "NoSchedule")


def autoscaled_health_marks(pool: KubernetesPool) -> tuple[dict[str, str], tuple[Taint, ...]]:
    """A GKE GPU node pool that scales (min below max, flex-start): the label and taint its nodes
    are created with, so GKE's cluster autoscaler (and a queued-provisioning request) can place
    the example jobs, which require the health label, on a template node; the taint's prefix keeps
    it out of the autoscaler's template (cluster-autoscaler StartupTaintPrefix) and every pod off
    the node until its first passing check. Fixed pools and TPU pools: nothing."""
    if pool.tpus or pool.min_nodes >= pool.max_nodes:
        return {}, ()
    return {HEALTH_LABEL: HEALTH_PASSED}, (UNCHECKED_TAINT,)


def karpenter_nodes(pool: KubernetesPool) -> int:
    """The nodes a pool's NodePool may launch: the quota's nodes above what the node group keeps
    (a capacity block's group keeps none). None for a pool whose NVLink domain spans nodes: its
    jobs' pods claim a ComputeDomain channel (DRA), which the pinned Karpenter does not provision
    for ("DRA is not supported in Karpenter", EKS user guide, ml-eks-nvidia-ultraserver, which
    recommends managed node groups; Karpenter supports DRA from 1.15): its node group is scaled to
    the capacity block when the block starts, as for any capacity block (capacity-blocks-mng)."""
    if pool.multi_node_nvlink:
        return 0
    return max(0, pool.quota_nodes - pool.min_size)


def karpenter_pools(kd: KubernetesDesign | None) -> tuple[KubernetesPool, ...]:
    """The EKS pools Karpenter scales: every pool with nodes above its node group's floor."""
    if kd is None or kd.platform != "eks":
        return ()
    return tuple(p for p in kd.pools if karpenter_nodes(p))


def ami_alias() -> str:
    """The EC2NodeClass AMI alias of the AMI release the node groups pin (release_version
    <kubernetes>-<YYYYMMDD> -> al2023@vYYYYMMDD): Karpenter picks the NVIDIA variant for GPU types
    (its AL2023 family resolves the standard, nvidia and neuron SSM parameters of that release)."""
    release = versions().ami_types["gpu"]["release_version"]
    return f"al2023@v{str(release).rsplit('-', 1)[1]}"


def karpenter_interfaces(pool: "PoolDesign") -> list[dict[str, Any]] | None:
    """The EC2NodeClass networkInterfaces: the design's own layout when it uses only the kinds the
    CRD takes (a primary `interface` and `efa-only` cards: p5, p5e, p5en, p6). A layout with `efa`
    interfaces (types without efa-only support) is left to Karpenter, which then attaches one `efa`
    interface per network card for the worker's vpc.amazonaws.com/efa request
    (pkg/providers/launchtemplate generateNetworkInterfaces, EFACount)."""
    if not pool.efa_devices or any(nic.interface_type == "efa" for nic in pool.interfaces):
        return None
    return [{"networkCardIndex": nic.network_card_index, "deviceIndex": nic.device_index,
             "interfaceType": nic.interface_type} for nic in pool.interfaces]


@dataclass(frozen=True)
class NodeClassInputs:
    """The cloud ids an EC2NodeClass names (values or Pulumi outputs): the pool's launch template
    has the same ones."""

    subnet_id: Any
    security_group_ids: Any            # a list
    instance_profile: Any              # the nodes' instance profile name (the managed node groups' role)
    user_data: Any                     # the pool's nodeadm MIME multipart (eks_nodes.eks_node_user_data)
    placement_group: Any = None        # the pool's placement group name, when it has one


def node_class(design: "ClusterDesign", pool_name: str, ids: NodeClassInputs) -> dict[str, Any]:
    pool, kpool = design.pool(pool_name), design.kubernetes.pool(pool_name)
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias()}],
        "instanceProfile": ids.instance_profile,
        "subnetSelectorTerms": [{"id": ids.subnet_id}],
        "securityGroupSelectorTerms": ids.security_group_ids,
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                            "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        "blockDeviceMappings": [{"deviceName": pool.root_device, "rootVolume": True,
                                 "ebs": {"volumeSize": f"{pool.root_volume_gib}Gi", "volumeType": "gp3",
                                         "encrypted": True, "deleteOnTermination": True}}],
        "detailedMonitoring": True,
        "associatePublicIPAddress": False,
        "userData": ids.user_data,
        "tags": design.labels("compute", pool.name),
    }
    if kpool.local_nvme:
        spec["instanceStorePolicy"] = "RAID0"
    interfaces = karpenter_interfaces(pool)
    if interfaces:
        spec["networkInterfaces"] = interfaces
    if ids.placement_group is not None:
        spec["placementGroupSelector"] = {"name": ids.placement_group}
    if pool.capacity.type in ("reservation", "capacity-block"):
        spec["capacityReservationSelectorTerms"] = [{"id": pool.capacity.reservation_id}]
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass",
            "metadata": {"name": pool.name, "labels": {"aicluster-cluster": design.name}}, "spec": spec}


def node_pool(design: "ClusterDesign", pool_name: str) -> dict[str, Any]:
    """The pool's NodePool: its labels and taint (the Kueue flavor's nodeLabels select them), its
    one instance type in the cluster's zone, its capacity type, and never a disruption of a node
    that runs pods: WhenEmpty consolidation, no expiry, no drift replacement (a changed NodePool or
    EC2NodeClass applies to new nodes; the old ones go when they are empty)."""
    pool, kpool = design.pool(pool_name), design.kubernetes.pool(pool_name)
    requirements = [
        {"key": INSTANCE_TYPE_NODE_LABEL, "operator": "In", "values": [kpool.instance_type]},
        {"key": ZONE_LABEL, "operator": "In", "values": [design.zone]},
        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [KARPENTER_CAPACITY[pool.capacity.type]]},
        # The example jobs require the health agent's `passed` label (k8s_health): Karpenter launches
        # a node for a pod only if the NodePool can give it that label, so it does; the startup taint
        # below keeps every pod off the node until the agent's first check passes and removes it.
        {"key": HEALTH_LABEL, "operator": "In", "values": [HEALTH_PASSED]},
    ]
    return {
        "apiVersion": NODEPOOL_API, "kind": "NodePool",
        "metadata": {"name": pool.name, "labels": {"aicluster-cluster": design.name}},
        "spec": {
            "template": {
                "metadata": {"labels": dict(kpool.labels)},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_API.split("/")[0], "kind": "EC2NodeClass", "name": pool.name},
                    "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in kpool.taints],
                    # Karpenter ignores startup taints when it decides what to launch; the agent
                    # reads this one as no verdict yet (aicluster/node/health_agent.py).
                    "startupTaints": [{"key": UNCHECKED_TAINT.key, "value": UNCHECKED_TAINT.value,
                                       "effect": UNCHECKED_TAINT.effect}],
                    "requirements": requirements,
                    "expireAfter": "Never",
                },
            },
            "limits": {"nodes": karpenter_nodes(kpool)},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": EMPTY_NODE_GRACE,
                           "budgets": [{"nodes": "0", "reasons": ["Drifted"]}]},
        },
    }


def node_overlay(design: "ClusterDesign", pool_name: str) -> dict[str, Any] | None:
    """The huge pages an EFA node pre-allocates (its user data sets them), for Karpenter's
    scheduling simulation; None for a pool without EFA."""
    kpool = design.kubernetes.pool(pool_name)
    if not kpool.hugepages_per_node:
        return None
    return {"apiVersion": NODEOVERLAY_API, "kind": "NodeOverlay",
            "metadata": {"name": f"{kpool.name}-hugepages", "labels": {"aicluster-cluster": design.name}},
            "spec": {"requirements": [{"key": INSTANCE_TYPE_NODE_LABEL, "operator": "In",
                                       "values": [kpool.instance_type]}],
                     "capacity": {HUGEPAGES_RESOURCE: f"{kpool.hugepages_per_node * 2}Mi"}}}


def karpenter_values(design: "ClusterDesign", *, interruption_queue: Any, cluster_endpoint: Any,
                     node_selector: Mapping[str, str]) -> dict[str, Any]:
    """Karpenter chart values: the controller on the system nodes (it must not run on nodes it
    manages), the cluster, the interruption queue, the region (the nodes' hop limit 1 keeps pods
    from IMDS) and the NodeOverlay feature gate (alpha, off by default) for the huge pages."""
    return {
        "nodeSelector": {"kubernetes.io/os": "linux", **node_selector},
        "serviceAccount": {"name": KARPENTER_SERVICE_ACCOUNT},
        "controller": {"env": [{"name": "AWS_REGION", "value": design.region}]},
        "settings": {"clusterName": design.name, "clusterEndpoint": cluster_endpoint,
                     "interruptionQueue": interruption_queue,
                     "featureGates": {"nodeOverlay": True}},
    }


# --- GKE: queued provisioning for flex-start ------------------------------------------------------------
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
PROVISIONING_CHECK = "queued-provisioning"
# A ProvisioningRequest GKE could not fill is retried (Kueue releases the quota meanwhile).
PROVISIONING_RETRIES = 3


def queued_provisioning_pools(kd: KubernetesDesign | None) -> tuple[KubernetesPool, ...]:
    """The GKE pools whose gangs are provisioned all-or-nothing: the flex-start ones."""
    if kd is None or kd.platform != "gke":
        return ()
    return tuple(p for p in kd.pools if p.capacity_type == "FLEX_START")


def provisioning_objects(kd: KubernetesDesign, api_version: str) -> list[dict[str, Any]]:
    """The ProvisioningRequestConfig and the AdmissionCheck that uses it (none without flex-start)."""
    pools = queued_provisioning_pools(kd)
    if not pools:
        return []
    managed = [TPU_RESOURCE] if all(p.tpus for p in pools) else [GPU_RESOURCE]
    labels = {"aicluster-cluster": kd.cluster_name}
    return [
        {"apiVersion": api_version, "kind": "ProvisioningRequestConfig",
         "metadata": {"name": PROVISIONING_CHECK, "labels": labels},
         "spec": {"provisioningClassName": QUEUED_PROVISIONING_CLASS, "managedResources": managed,
                  "retryStrategy": {"backoffLimitCount": PROVISIONING_RETRIES,
                                    "backoffBaseSeconds": REQUEUE_BACKOFF_BASE_S,
                                    "backoffMaxSeconds": REQUEUE_BACKOFF_MAX_S}}},
        {"apiVersion": api_version, "kind": "AdmissionCheck",
         "metadata": {"name": PROVISIONING_CHECK, "labels": labels},
         "spec": {"controllerName": PROVISIONING_CONTROLLER,
                  "parameters": {"apiGroup": api_version.split("/")[0], "kind": "ProvisioningRequestConfig",
                                 "name": PROVISIONING_CHECK}}},
    ]


def admission_checks(kd: KubernetesDesign) -> list[dict[str, Any]]:
    """The ClusterQueue's admissionChecksStrategy.admissionChecks: the provisioning check on the
    flex-start flavors only (other flavors' capacity exists or scales on its own)."""
    pools = queued_provisioning_pools(kd)
    return [{"name": PROVISIONING_CHECK, "onFlavors": [p.flavor for p in pools]}] if pools else []


# --- what the plan says -----------------------------------------------------------------------------------
def capacity_lines(design: "ClusterDesign") -> list[str]:
    """How each pool's nodes come (plan lines), EKS or GKE."""
    kd = design.kubernetes
    lines = []
    for pool in kd.pools:
        if kd.platform == "eks":
            nodes = karpenter_nodes(pool)
            how = (f"Karpenter NodePool {pool.name} launches up to {nodes} more "
                   f"({KARPENTER_CAPACITY[design.pool(pool.name).capacity.type]}) when Kueue admits a job "
                   f"that does not fit" if nodes else
                   f"scale it to {pool.quota_nodes} when the capacity block starts (no NodePool: Karpenter "
                   f"does not provision DRA claims)" if pool.multi_node_nvlink else "fixed size (no NodePool)")
            lines.append(f"  capacity {pool.name}: node group keeps {pool.min_size}; {how}")
        elif pool.capacity_type == "FLEX_START":
            lines.append(f"  capacity {pool.name}: flex-start with queued provisioning: Kueue's {PROVISIONING_CHECK} "
                         f"admission check gets every node of a gang at once, or none")
        else:
            lines.append(f"  capacity {pool.name}: GKE cluster autoscaler, {pool.min_nodes}..{pool.max_nodes} "
                         "nodes, node by node")
    lines.append(f"  Kueue waitForPodsReady: a gang not running within {POD_READY_TIMEOUT} is evicted whole and "
                 f"requeued (backoff {REQUEUE_BACKOFF_BASE_S}s..{REQUEUE_BACKOFF_MAX_S}s)")
    return lines + nvlink_lines(kd)


def capacity_warnings(design: "ClusterDesign") -> list[str]:
    """Every way a queue of this plan can admit a job that capacity cannot start, in words."""
    kd = design.kubernetes
    warnings = []
    for pool in kd.pools:
        cap = design.pool(pool.name).capacity
        if cap.type in ("reservation", "capacity-block"):
            if cap.nodes is None:
                warnings.append(f"pool {pool.name}: Kueue's quota is max_nodes ({pool.max_nodes} nodes), but the "
                                f"{cap.type} {cap.reservation_id} may hold fewer: a job larger than it is admitted "
                                f"and cannot start; set capacity.nodes to the instances it holds")
            elif cap.nodes < pool.max_nodes:
                warnings.append(f"pool {pool.name}: the {cap.type} holds {cap.nodes} instances, fewer than max_nodes "
                                f"({pool.max_nodes}): Kueue's quota is {cap.nodes} nodes")
            if cap.type == "capacity-block":
                warnings.append(f"pool {pool.name}: jobs are admitted whenever quota is free, but the capacity "
                                f"block launches instances only while it is active: outside it, an admitted job "
                                f"waits and is requeued after {POD_READY_TIMEOUT}")
        if kd.platform == "eks" and not kd.in_cluster and pool.min_size < pool.max_nodes:
            warnings.append(f"pool {pool.name}: Karpenter's chart and NodePool come in phase 2 (api_access "
                            f"private): until then nothing launches nodes above the node group's {pool.min_size}")
        if pool.capacity_type == "SPOT" and pool.quota_nodes > pool.min_size:
            warnings.append(f"pool {pool.name}: Spot capacity may be short: a gang whose nodes do not all come "
                            f"waits until waitForPodsReady ({POD_READY_TIMEOUT}) evicts and requeues it")
    return warnings
