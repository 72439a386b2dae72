"""What EKS and GKE clusters create inside Kubernetes the same way, through pulumi_kubernetes and the
cluster's own provider: Helm releases at the versions pinned in catalog/kubernetes.yaml, the
training namespace, a static PersistentVolume + claim per filesystem (reclaim policy Retain:
deleting either never touches the data), the Kueue queues (templates/k8s/kueue.yaml.j2) and the
ConfigMap that publishes the example jobs. The cloud add-on modules (aws/eks_addons.py,
gcp/gke_addons.py) only say which charts, CSI drivers and examples their cluster gets.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from .design import ClusterDesign, StorageDesign
from .kubernetes_design import EXAMPLES_CONFIGMAP, POOL_LABEL, Chart, KubernetesPool, versions
from .render import render

HELM_TIMEOUT_S = 900
SCRIPT_DIR = "/opt/aicluster"          # where the example scripts are mounted in the workers
RENDEZVOUS_PORT = 29500                # torchrun's rendezvous on worker 0


def helm_release(name: str, chart: Chart, values: dict, opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
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


def training_namespace(name: str, design: ClusterDesign, opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=design.kubernetes.namespace, labels={"aicluster-cluster": design.name}),
        opts=opts)


def claim_name(fs: StorageDesign) -> str:
    return fs.name


def volume_name(cluster: ClusterDesign, fs: StorageDesign) -> str:
    return f"{cluster.name}-{fs.name}"


def static_volume(name: str, design: ClusterDesign, fs: StorageDesign, *, driver: str, volume_handle: pulumi.Input[str],
                  volume_attributes: pulumi.Input[Mapping[str, str]], mount_options: Sequence[str],
                  depends_on: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions) -> None:
    """A static PersistentVolume for an existing filesystem (Retain, ReadWriteMany, no storage
    class) bound to a claim of the filesystem's name in the training namespace."""
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
            mount_options=list(mount_options),
            csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                driver=driver, volume_handle=volume_handle, volume_attributes=volume_attributes),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(depends_on))))
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


def render_kueue(design: ClusterDesign) -> str:
    kd = design.kubernetes
    return render("k8s/kueue.yaml.j2", cluster=design.name, namespace=kd.namespace, pools=kd.pools,
                  api_version=versions().charts["kueue"].api_version, pool_label=POOL_LABEL,
                  cluster_queue=kd.cluster_queue, local_queue=kd.local_queue, resource_groups=kd.resource_groups)


def kueue_queues(name: str, design: ClusterDesign, opts: pulumi.ResourceOptions) -> None:
    """The ResourceFlavors, ClusterQueue and LocalQueue, as Kueue CustomResources."""
    for doc in yaml.safe_load_all(render_kueue(design)):
        if doc:
            meta = doc["metadata"]
            k8s.apiextensions.CustomResource(
                f"{name}-{doc['kind'].lower()}-{meta['name']}", api_version=doc["apiVersion"], kind=doc["kind"],
                metadata=meta, spec=doc["spec"], opts=opts)


def examples_configmap(name: str, design: ClusterDesign, data: Mapping[str, str],
                       opts: pulumi.ResourceOptions) -> k8s.core.v1.ConfigMap:
    """The example jobs and their scripts, in the training namespace (`aicluster plan --out` also
    writes each entry to k8s/examples/)."""
    return k8s.core.v1.ConfigMap(
        f"{name}-examples",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=EXAMPLES_CONFIGMAP, namespace=design.kubernetes.namespace,
                                            labels={"aicluster-cluster": design.name}),
        data=dict(data),
        opts=opts)


def job_name(pool: KubernetesPool) -> str:
    return f"train-{pool.name}"


def job_claims(design: ClusterDesign) -> list[dict]:
    """The filesystem claims every example job mounts at the spec's mount paths."""
    return [{"name": claim_name(fs), "volume": f"fs-{fs.name}", "mount": fs.mount} for fs in design.storage]


def render_train_job(design: ClusterDesign, pool_name: str, *, image: str, env: list[tuple[str, str]],
                     gke: dict | None = None) -> str:
    """The example multi-node GPU job of a pool (templates/k8s/train-job.yaml.j2): a headless Service
    and an Indexed Job of max_nodes workers, one per node, queued in Kueue. `gke` adds what GKE GPU
    nodes need (multi-network annotations, the NIC stack's sidecar, host paths, the NCCL set-up)."""
    kd = design.kubernetes
    pool = kd.pool(pool_name)
    return render("k8s/train-job.yaml.j2", pool=pool, job=job_name(pool), namespace=kd.namespace, gke=gke,
                  local_queue=kd.local_queue, cluster_queue=kd.cluster_queue, pool_label=POOL_LABEL,
                  image=image, port=RENDEZVOUS_PORT, script_dir=SCRIPT_DIR,
                  examples=EXAMPLES_CONFIGMAP, claims=job_claims(design), env=env)


def in_cluster_lines(summary: Mapping) -> list[str]:
    """The plan's lines for what EKS and GKE both run inside the cluster (the `kubernetes_summary`
    of either): Helm charts, filesystem volumes, Kueue queues and the example jobs."""
    lines = ["  Helm charts: " + ", ".join(f"{n} {ver}" for n, ver in summary["charts"].items())]
    for vol in summary["volumes"]:
        lines.append(f"  storage: PersistentVolume {vol['volume']} ({vol['capacity']}, {vol['driver']}, Retain) "
                     f"bound to claim {vol['claim']}, mounted at {vol['mount']} in the jobs")
    q = summary["queues"]
    lines.append(f"  queue: LocalQueue {q['local_queue']} -> ClusterQueue {q['cluster_queue']}")
    for flavor, quota in q["quotas"].items():
        lines.append(f"    flavor {flavor}: " + ", ".join(f"{r} {n}" for r, n in quota.items()))
    lines.append("  example jobs: " + ", ".join(summary["jobs"]))
    return lines
