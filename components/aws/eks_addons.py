"""aicluster:aws:KubernetesAddons - what runs inside the EKS cluster, through pulumi_kubernetes and
the cluster's own provider. Chart versions come from components/catalog/kubernetes.yaml.

- GPU devices: the NVIDIA device plugin, or the GPU operator with its driver and toolkit off (the
  EKS AL2023 NVIDIA AMI ships both). Exactly one of them: `kubernetes.gpu_devices` chooses.
- EFA: the aws-efa-k8s-device-plugin on EFA nodes, tolerating the GPU taint.
- Storage: the FSx for Lustre CSI driver and, per filesystem, a static PersistentVolume (Retain:
  deleting it never deletes data) bound to a claim in the training namespace.
- Gang admission: Kueue, with a ResourceFlavor per pool, a ClusterQueue whose quotas are the
  pools' totals and a LocalQueue in the training namespace (templates/k8s/kueue.yaml.j2).
- The example training job per pool (templates/k8s/train-job.yaml.j2), published in a ConfigMap
  and written by `aicluster plan --out DIR`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ..design import ClusterDesign, StorageDesign
from ..kubernetes_design import (EFA_PRESENT_LABEL, GPU_PRESENT_LABEL, GPU_TAINT, POOL_LABEL, ROLE_LABEL, Chart,
                                 KubernetesPool, versions)
from ..k8s_manifests import EXAMPLES_CONFIGMAP
from ..mounts import Mount
from ..render import render, static

SCRIPT_DIR = "/opt/aicluster"
RENDEZVOUS_PORT = 29500
FSX_CSI_DRIVER = "fsx.csi.aws.com"
# Lustre options that matter inside a pod's mount (the host-side systemd options do not apply).
FSX_MOUNT_OPTIONS = ("relatime", "flock")
HELM_TIMEOUT_S = 900
SYSTEM_NODES = {ROLE_LABEL: "system"}


def nccl_env(pool: KubernetesPool, gpudirect_rdma: bool) -> list[tuple[str, str]]:
    """The worker's NCCL environment (fabric.md, aws-ofi-nccl doc/efa-env-var.md): short on purpose.
    The plugin (>= 1.7) picks the EFA provider itself, so FI_PROVIDER, NCCL_PROTO, NCCL_MIN_CHANNELS,
    NCCL_BUFFSIZE, FI_EFA_FORK_SAFE, FI_EFA_ENABLE_SHM_TRANSFER and RDMAV_* stay unset."""
    env = [("NCCL_DEBUG", "INFO"),                 # the log names the network NCCL chose
           ("NCCL_SOCKET_IFNAME", "^lo,docker")]   # bootstrap over the pod's interface
    if pool.efa and gpudirect_rdma:
        env.append(("FI_EFA_USE_DEVICE_RDMA", "1"))
    return env


def job_name(pool: KubernetesPool) -> str:
    return f"train-{pool.name}"


def claim_name(fs: StorageDesign) -> str:
    return fs.name


def volume_name(cluster: ClusterDesign, fs: StorageDesign) -> str:
    return f"{cluster.name}-{fs.name}"


def render_job(design: ClusterDesign, pool_name: str) -> str:
    kd = design.kubernetes
    pool = kd.pool(pool_name)
    claims = [{"name": claim_name(fs), "volume": f"fs-{fs.name}", "mount": fs.mount} for fs in design.storage]
    return render("k8s/train-job.yaml.j2", pool=pool, job=job_name(pool), namespace=kd.namespace,
                  local_queue=kd.local_queue, cluster_queue=kd.cluster_queue, pool_label=POOL_LABEL,
                  image=versions().images["pytorch-training"], port=RENDEZVOUS_PORT, script_dir=SCRIPT_DIR,
                  examples=EXAMPLES_CONFIGMAP, claims=claims,
                  env=nccl_env(pool, bool(design.pool(pool_name).instance.gpudirect_rdma)))


def render_kueue(design: ClusterDesign) -> str:
    kd = design.kubernetes
    return render("k8s/kueue.yaml.j2", cluster=design.name, namespace=kd.namespace, pools=kd.pools,
                  api_version=versions().charts["kueue"].api_version, pool_label=POOL_LABEL,
                  cluster_queue=kd.cluster_queue, local_queue=kd.local_queue, resources=kd.resources)


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
    return "nvidia-device-plugin", {
        "affinity": gpu_nodes,
        "tolerations": [GPU_TAINT.toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }


def chart_values(design: ClusterDesign) -> dict[str, dict]:
    """Every chart this cluster installs -> its values. Never both GPU device charts."""
    gpu_chart, gpu_values = gpu_device_values(design)
    charts: dict[str, dict] = {gpu_chart: gpu_values}
    if any(p.efa for p in design.kubernetes.pools):
        charts["aws-efa-k8s-device-plugin"] = {"nodeSelector": {EFA_PRESENT_LABEL: "true"},
                                               "tolerations": [GPU_TAINT.toleration()]}
    if any(fs.kind == "fsx-lustre" for fs in design.storage):
        charts["aws-fsx-csi-driver"] = {
            # The region is given, so neither plugin needs IMDS (nodes keep hop limit 1).
            "controller": {"nodeSelector": SYSTEM_NODES, "region": design.region},
            "node": {"tolerateAllTaints": True, "region": design.region},
        }
    charts["kueue"] = {"controllerManager": {"nodeSelector": SYSTEM_NODES}}
    return charts


@dataclass(frozen=True)
class KubernetesAddonsArgs:
    cluster: ClusterDesign
    provider: k8s.Provider
    filesystems: Sequence[tuple[StorageDesign, pulumi.Input[str], pulumi.Input[Mount]]]   # design, id, mount
    depends_on: Sequence[pulumi.Resource]


class KubernetesAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: KubernetesAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:KubernetesAddons", name, None, opts)
        design, kd = args.cluster, args.cluster.kubernetes
        assert kd is not None
        v = versions()
        after_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))

        releases = {chart: self._release(name, v.charts[chart], values, after_cluster)
                    for chart, values in chart_values(design).items()}

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=kd.namespace, labels={"aicluster-cluster": design.name}),
            opts=after_cluster)
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])

        for fs, file_system_id, mount in args.filesystems:
            self._filesystem(name, design, fs, file_system_id, mount, releases.get("aws-fsx-csi-driver"), in_namespace)

        kueue_opts = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=[releases["kueue"], namespace])
        for doc in yaml.safe_load_all(render_kueue(design)):
            if doc:
                meta = doc["metadata"]
                k8s.apiextensions.CustomResource(
                    f"{name}-{doc['kind'].lower()}-{meta['name']}", api_version=doc["apiVersion"], kind=doc["kind"],
                    metadata=meta, spec=doc["spec"], opts=kueue_opts)

        k8s.core.v1.ConfigMap(
            f"{name}-examples",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=EXAMPLES_CONFIGMAP, namespace=kd.namespace,
                                                labels={"aicluster-cluster": design.name}),
            data={**{f"{job_name(p)}.yaml": render_job(design, p.name) for p in kd.pools},
                  "allreduce.py": static("k8s/allreduce.py")},
            opts=in_namespace)
        self.register_outputs({"namespace": kd.namespace, "charts": {c: v.charts[c].version for c in releases}})

    def _release(self, name: str, chart: Chart, values: dict, opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
        oci = chart.repo.startswith("oci://")
        return k8s.helm.v3.Release(
            f"{name}-{chart.name}",
            name=chart.name,
            chart=f"{chart.repo}/{chart.chart}" if oci else chart.chart,
            repository_opts=None if oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
            version=chart.version,
            namespace=chart.namespace,
            create_namespace=chart.namespace != "kube-system",
            values=values,
            # Wait until the workloads are ready; roll back a failed upgrade instead of leaving it half done.
            atomic=True,
            timeout=HELM_TIMEOUT_S,
            opts=opts)

    def _filesystem(self, name: str, design: ClusterDesign, fs: StorageDesign, file_system_id, mount,
                    driver: k8s.helm.v3.Release | None, opts: pulumi.ResourceOptions) -> None:
        size = f"{fs.capacity_gib}Gi"
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-{fs.name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name(design, fs),
                                                labels={"aicluster-cluster": design.name, "aicluster-storage": fs.name}),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": size},
                volume_mode="Filesystem",
                access_modes=["ReadWriteMany"],
                # Deleting the claim or the volume never touches the filesystem (static, Retain).
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=list(FSX_MOUNT_OPTIONS),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=FSX_CSI_DRIVER,
                    volume_handle=file_system_id,
                    volume_attributes=pulumi.Output.from_input(mount).apply(
                        lambda m: {"dnsname": m.server, "mountname": m.remote_path}),
                ),
            ),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[driver] if driver else [])))
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-{fs.name}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=claim_name(fs), namespace=design.kubernetes.namespace,
                                                labels={"aicluster-cluster": design.name, "aicluster-storage": fs.name}),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=volume.metadata.name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            opts=opts)
