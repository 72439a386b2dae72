"""aicluster:aws:KubernetesAddons - what runs inside the EKS cluster, through pulumi_kubernetes and
the cluster's own provider. Chart versions come from components/aicluster/catalog/kubernetes.yaml.

- GPU devices: the NVIDIA device plugin, or the GPU operator with its driver and toolkit off (the
  EKS AL2023 NVIDIA AMI ships both). Exactly one of them: `kubernetes.gpu_devices` chooses.
- EFA: the aws-efa-k8s-device-plugin on EFA nodes, tolerating the GPU taint, with the chart's node
  affinity list (supportedInstanceLabels) set to every EFA type of the catalog: the chart's own list
  lags new instance types (v0.5.7's stopped at p5en, so its DaemonSet never ran on p6-b200).
- Storage: the FSx for Lustre CSI driver and, per filesystem, a static PersistentVolume (Retain:
  deleting it never deletes data) bound to a claim in the training namespace.
- Gang admission: Kueue, with a ResourceFlavor per pool, a ClusterQueue whose quotas are the
  pools' totals and a LocalQueue in the training namespace (templates/k8s/kueue.yaml.j2), and
  JobSet, the example jobs' API (both pinned, installed as on GKE: k8s_resources.gang_charts).
- The example training job per pool (templates/k8s/train-job.yaml.j2: a JobSet that restarts as a
  gang and resumes from its checkpoint, k8s_jobs.py), published in a ConfigMap and written by
  `aicluster plan --out DIR`.
- NVLink domains (GB200/GB300 NVL72 pools): the NVIDIA DRA driver with ComputeDomains, GPU
  Feature Discovery's clique label, a Kueue Topology (aicluster.kubernetes.nvlink).
- GPU node health: the agent DaemonSet per GPU pool that runs the Slurm nodes' health check and
  labels, taints and conditions the node (aicluster.kubernetes.health; EFA devices counted).
- Metrics (aicluster.kubernetes.metrics): dcgm-exporter, node-exporter and kube-state-metrics, and
  Prometheus in agent mode remote-writing them and Kueue's to the AMP workspace with SigV4.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_kubernetes as k8s

from aicluster.catalog import load_catalog
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import StorageDesign
from aicluster.kubernetes.jobs import gpu_job_scripts
from aicluster.kubernetes.in_cluster import (RENDEZVOUS_PORT, SCRIPT_DIR, claim_name, examples_configmap, gang_charts,  # noqa: F401
                             helm_release,
                             job_name, kueue_queues, render_kueue, render_train_job, static_volume,
                             training_namespace, volume_name)
from aicluster.kubernetes.data import pod_identities_and_datasets
from aicluster.design.kubernetes import EFA_PRESENT_LABEL, GPU_PRESENT_LABEL, GPU_TAINT, ROLE_LABEL, SYSTEM_NODES, KubernetesPool, versions
from aicluster.kubernetes.health import NodeHealthSettings, expectations, gpu_pools, node_health
from aicluster.kubernetes.metrics import MetricsSettings, metrics
from aicluster.kubernetes.nvlink import EKS_DRIVER_ROOT, dra_driver_values
from aicluster.mounts import Mount

FSX_CSI_DRIVER = "fsx.csi.aws.com"
# Lustre options that matter inside a pod's mount (the host-side systemd options do not apply).
FSX_MOUNT_OPTIONS = ("relatime", "flock")
# The well-known label the EFA chart's node affinity matches instance types on.
INSTANCE_TYPE_NODE_LABEL = "node.kubernetes.io/instance-type"


def efa_instance_types() -> list[str]:
    """Every EFA-capable AWS type aicluster knows (catalog/aws.yaml), for the EFA device plugin's
    node affinity: a pool of any of them gets its EFA devices advertised."""
    return sorted(t.name for t in load_catalog().instance_types["aws"].values() if t.efa_capable)


def efa_device_plugin_values() -> dict:
    """aws-efa-k8s-device-plugin values: on EFA nodes (the label the node groups set), tolerating
    the GPU taint, and the chart's required node affinity (supportedInstanceLabels, rendered as
    `<key> In <values>` in templates/daemonset.yaml) fed from the catalog, not the chart's list."""
    return {"nodeSelector": {EFA_PRESENT_LABEL: "true"},
            "tolerations": [GPU_TAINT.toleration()],
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_NODE_LABEL], "values": efa_instance_types()}}


def nccl_env(pool: KubernetesPool, gpudirect_rdma: bool) -> list[tuple[str, str]]:
    """The worker's NCCL environment (aws-ofi-nccl doc/efa-env-var.md): short on purpose.
    The plugin (>= 1.7) picks the EFA provider itself, so FI_PROVIDER, NCCL_PROTO, NCCL_MIN_CHANNELS,
    NCCL_BUFFSIZE, FI_EFA_FORK_SAFE, FI_EFA_ENABLE_SHM_TRANSFER and RDMAV_* stay unset."""
    env = [("NCCL_DEBUG", "INFO"),                 # the log names the network NCCL chose
           ("NCCL_SOCKET_IFNAME", "^lo,docker")]   # bootstrap over the pod's interface
    if pool.efa and gpudirect_rdma:
        env.append(("FI_EFA_USE_DEVICE_RDMA", "1"))
    return env


def render_job(design: ClusterDesign, pool_name: str) -> str:
    pool = design.kubernetes.pool(pool_name)
    # Grace (arm64) pools run the arm64 build of the same training image.
    image = versions().images["pytorch-training-arm64" if pool.ami_role == "gpu-arm64" else "pytorch-training"]
    return render_train_job(design, pool_name, image=image,
                            env=nccl_env(pool, bool(design.pool(pool_name).instance.gpudirect_rdma)))


def gpu_device_values(design: ClusterDesign) -> tuple[str, dict]:
    """The one chart that advertises nvidia.com/gpu, with its values."""
    gpu_nodes = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]}]}}}
    if design.kubernetes.gpu_devices == "gpu-operator":
        return "gpu-operator", {
            # The EKS AL2023 NVIDIA AMI ships the driver and the container toolkit (EKS user guide,
            # ml-eks-optimized-ami): the operator must not install them again.
            "driver": {"enabled": False},
            "toolkit": {"enabled": False},
            "operator": {"nodeSelector": SYSTEM_NODES},
            "daemonsets": {"tolerations": [GPU_TAINT.toleration()]},
        }
    values = {
        "affinity": gpu_nodes,
        "tolerations": [GPU_TAINT.toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }
    if design.kubernetes.nvlink_pools:
        # GPU Feature Discovery labels each node with its NVLink clique (nvidia.com/gpu.clique), the
        # level the Kueue Topology places a job by; the chart brings Node Feature Discovery with it
        # (Chart.yaml dependency, condition gfd.enabled), whose master runs with the add-ons. GFD
        # runs with the plugin's affinity and tolerations (templates/daemonset-gfd.yml); NFD's worker
        # tolerates the GPU taint by default. (The GPU operator runs GFD by default.)
        values["gfd"] = {"enabled": True}
        values["nfd"] = {"master": {"nodeSelector": SYSTEM_NODES}}
    return "nvidia-device-plugin", values


def chart_values(design: ClusterDesign) -> dict[str, dict]:
    """Every chart this cluster installs -> its values. Never both GPU device charts."""
    gpu_chart, gpu_values = gpu_device_values(design)
    charts: dict[str, dict] = {gpu_chart: gpu_values}
    if any(p.efa for p in design.kubernetes.pools):
        charts["aws-efa-k8s-device-plugin"] = efa_device_plugin_values()
    if any(fs.kind == "fsx-lustre" for fs in design.storage):
        charts["aws-fsx-csi-driver"] = {
            # The region is given, so neither plugin needs IMDS (nodes keep hop limit 1).
            "controller": {"nodeSelector": SYSTEM_NODES, "region": design.region},
            "node": {"tolerateAllTaints": True, "region": design.region},
        }
    charts.update(gang_charts())      # Kueue and JobSet, as on GKE
    if design.kubernetes.nvlink_pools:
        # ComputeDomains (IMEX per job) for the pools whose NVLink domain spans nodes; the AL2023
        # NVIDIA AMI has the driver on the root filesystem.
        charts["nvidia-dra-driver-gpu"] = dra_driver_values(design.kubernetes, EKS_DRIVER_ROOT)
    return charts


def node_health_settings(design: ClusterDesign) -> NodeHealthSettings:
    """The GPU health agent on EKS: the AL2023 NVIDIA AMI keeps nvidia-smi and fi_info on the host's
    standard paths (the check adds /opt/amazon/efa/bin itself); the check counts EFA devices."""
    return NodeHealthSettings("eks", versions().images["node-health"],
                              {p.name: expectations(p.gpus, "efa", p.efa, design.pool(p.name).nvlink_domain_nodes)
                               for p in gpu_pools(design.kubernetes.pools)})


@dataclass(frozen=True)
class KubernetesAddonsArgs:
    """What runs inside the EKS cluster: the GPU (and EFA, FSx CSI) device charts, Kueue and its
    queues, the training namespace, one static volume per filesystem, the example jobs.

    design: the whole cluster design, and genuinely so: the charts follow `kubernetes` (GPU device
        plugin or operator, EFA pools) and `storage` (the FSx CSI driver) and `region`; the queues,
        the namespace and the example jobs render from `kubernetes`, `storage` (the jobs' volume
        claims) and `pools` (GPUDirect RDMA for the jobs' NCCL environment), through the helpers
        of aicluster.kubernetes.in_cluster, which the GKE add-ons share and which take a ClusterDesign.
    provider: the cluster's Kubernetes provider (`EksCluster.provider`).
    filesystems: (design, file system id, mount) of each filesystem (`LustreFilesystem`), for its
        static persistent volume and claim.
    depends_on: what every object must wait for (`EksCluster.ready`: the managed add-ons and the
        system node group).
    remote_write_url: the AMP workspace's remote-write URL (`ObservabilityBackend.remote_write_url`)
        the metrics collector sends to. Default None: the exporters run, with no collector.
    """
    design: ClusterDesign
    provider: k8s.Provider
    filesystems: Sequence[tuple[StorageDesign, pulumi.Input[str], pulumi.Input[Mount]]]
    depends_on: Sequence[pulumi.Resource]
    remote_write_url: pulumi.Input[str] | None = None


class KubernetesAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: KubernetesAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:KubernetesAddons", name, None, opts)
        design, kd = args.design, args.design.kubernetes
        assert kd is not None
        v = versions()
        after_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))

        releases = {chart: helm_release(name, v.charts[chart], values, after_cluster)
                    for chart, values in chart_values(design).items()}

        namespace = training_namespace(name, design, after_cluster)
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])

        driver = releases.get("aws-fsx-csi-driver")
        for fs, file_system_id, mount in args.filesystems:
            static_volume(name, design, fs, driver=FSX_CSI_DRIVER, volume_handle=file_system_id,
                          volume_attributes=pulumi.Output.from_input(mount).apply(
                              lambda m: {"dnsname": m.server, "mountname": m.remote_path}),
                          mount_options=FSX_MOUNT_OPTIONS, depends_on=[driver] if driver else [], opts=in_namespace)

        teams = kueue_queues(name, design, pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                                  depends_on=[releases["kueue"], namespace]))
        # The pods' ServiceAccounts (their Pod Identity associations: aws/pod_identity.py) and the
        # datasets' Mountpoint volumes (the add-on is in `depends_on`: EksCluster.ready).
        pod_identities_and_datasets(name, design, {kd.namespace: namespace, **teams}, {}, after_cluster)
        examples_configmap(name, design, {**{f"{job_name(p)}.yaml": render_job(design, p.name) for p in kd.pools},
                                          **gpu_job_scripts()}, in_namespace)
        node_health(f"{name}-health", design.name, kd.pools, node_health_settings(design), after_cluster)
        metrics(f"{name}-metrics", design.name, kd.pools, MetricsSettings("eks", region=design.region), after_cluster,
                remote_write_url=args.remote_write_url, kueue=[releases["kueue"]])
        self.register_outputs({"namespace": kd.namespace, "charts": {c: v.charts[c].version for c in releases}})
