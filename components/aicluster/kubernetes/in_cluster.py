"""What EKS and GKE clusters create inside Kubernetes the same way, through pulumi_kubernetes and the
cluster's own provider: Helm releases at the versions pinned in catalog/kubernetes.yaml, the
training namespace, a static PersistentVolume + claim per filesystem (reclaim policy Retain:
deleting either never touches the data), the Kueue queues (templates/k8s/kueue.yaml.j2) and the
ConfigMap that publishes the example jobs. The cloud add-on modules (aws/eks_addons.py,
gcp/gke_addons.py) only say which charts, CSI drivers and examples their cluster gets.
"""
from __future__ import annotations

import importlib.metadata
from typing import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from aicluster.design.model import ClusterDesign
from aicluster.design.parts import StorageDesign
from aicluster.kubernetes.data import data_lines
from aicluster.design.kubernetes import (BORROW_PREEMPTS_UP_TO, DEFAULT_PRIORITY, EXAMPLES_CONFIGMAP, NVLINK_TOPOLOGY, POOL_LABEL,
                                PRIORITY_LABEL, SYSTEM_NODES, WORKLOAD_PRIORITIES, Chart, KubernetesPool,
                                versions)
from aicluster.kubernetes.health import HEALTH_LABEL, HEALTH_PASSED
from aicluster.kubernetes.jobs import jobset_values
from aicluster.kubernetes.nvlink import job_nvlink
from aicluster.kubernetes.capacity import admission_checks, kueue_manager_values, provisioning_objects
from aicluster.render.templates import render

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


def gang_charts() -> dict[str, dict]:
    """The charts every cluster installs for gang jobs, with their values, one copy for EKS and GKE:
    Kueue (admission) and JobSet (the example jobs' API), their controllers on the system nodes."""
    return {"kueue": {"controllerManager": {"nodeSelector": SYSTEM_NODES},
                      # waitForPodsReady with requeue (k8s_capacity.py): a gang that cannot start is evicted whole.
                      "managerConfig": kueue_manager_values()},
            "jobset": {"controller": {"nodeSelector": SYSTEM_NODES}}}


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


# What the example jobs render as their priority: the default class, named (kubernetes_design.py).
JOB_PRIORITY = {"priority_label": PRIORITY_LABEL, "priority": DEFAULT_PRIORITY}


class KubernetesObject(pulumi.CustomResource):
    """A custom resource applied as written, top-level fields and all. The Python SDK's
    apiextensions.CustomResource carries `spec` only (pulumi/pulumi-kubernetes#2363, open), and a
    WorkloadPriorityClass has `value` and `description` beside its metadata; this registers the
    same type (kubernetes:<apiVersion>:<kind>) with the whole object, which the provider applies."""

    def __init__(self, resource_name: str, obj: Mapping, opts: pulumi.ResourceOptions,
                 earlier_api_versions: Sequence[str] = ()) -> None:
        # An object applied before at another API version keeps its Pulumi identity (an alias of
        # the old type): Pulumi updates it in place instead of creating it anew, which the API
        # server refuses (it exists), and deleting the old one.
        aliases = [pulumi.Alias(type_=f"kubernetes:{api}:{obj['kind']}") for api in earlier_api_versions]
        super().__init__(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", resource_name, dict(obj),
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_K8S_SDK_VERSION,
                                                                                   aliases=aliases)))


# The Kueue API versions earlier aicluster releases applied the queues at (Kueue 0.14.3 served
# v1beta1 only). Deleting a ClusterQueue to recreate it would evict its admitted workloads.
KUEUE_EARLIER_API_VERSIONS = ("kueue.x-k8s.io/v1beta1",)

# The provider plugin version the SDK's own resources ask for (they set it the same way).
_K8S_SDK_VERSION = importlib.metadata.version("pulumi_kubernetes")


def render_kueue(design: ClusterDesign) -> str:
    kd = design.kubernetes
    return render("k8s/kueue.yaml.j2", cluster=design.name, pools=kd.pools, queues=kd.queues, cohort=kd.cohort,
                  api_version=versions().charts["kueue"].api_version, pool_label=POOL_LABEL,
                  resource_groups=kd.resource_groups, priorities=WORKLOAD_PRIORITIES,
                  borrow_preempts_up_to=BORROW_PREEMPTS_UP_TO, admission_checks=admission_checks(kd),
                  nvlink_pools=kd.nvlink_pools, topology=NVLINK_TOPOLOGY, topology_levels=kd.topology_levels,
                  domain_level=kd.nvlink_domain_level if kd.nvlink_pools else None) \
        + "".join(f"---\n{yaml.safe_dump(obj, sort_keys=False)}"
                  for obj in provisioning_objects(kd, versions().charts["kueue"].api_version))


def team_namespaces(name: str, design: ClusterDesign, opts: pulumi.ResourceOptions) -> dict[str, k8s.core.v1.Namespace]:
    """The namespace of each team of `kubernetes.teams` (the training namespace is made apart)."""
    return {queue.namespace: k8s.core.v1.Namespace(
        f"{name}-team-{queue.namespace}",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=queue.namespace,
                                            labels={"aicluster-cluster": design.name, "aicluster-team": queue.namespace}),
        opts=opts) for queue in design.kubernetes.queues[1:]}


def kueue_queues(name: str, design: ClusterDesign, opts: pulumi.ResourceOptions) -> dict[str, k8s.core.v1.Namespace]:
    """The WorkloadPriorityClasses, ResourceFlavors, ClusterQueues and LocalQueues, as Kueue
    CustomResources, and the teams' namespaces (each team's LocalQueue waits for its namespace),
    which it returns by name for the other objects that live there."""
    namespaces = team_namespaces(name, design, pulumi.ResourceOptions(parent=opts.parent, provider=opts.provider))
    for doc in yaml.safe_load_all(render_kueue(design)):
        if doc:
            meta = doc["metadata"]
            own, resource = opts, f"{name}-{doc['kind'].lower()}-{meta['name']}"
            if meta.get("namespace") in namespaces:
                # Every team's LocalQueue is `default`: its namespace tells them apart (the training
                # queue's resource keeps its name, so adding a team changes nothing of it).
                own = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespaces[meta["namespace"]]]))
                resource += f"-{meta['namespace']}"
            KubernetesObject(resource, doc, own, KUEUE_EARLIER_API_VERSIONS)
    return namespaces


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
    """The example multi-node GPU job of a pool (templates/k8s/train-job.yaml.j2): a JobSet of
    max_nodes workers, one per node, queued in Kueue, that restarts as a gang on healthy nodes and
    resumes from its newest checkpoint (k8s_jobs.py), and its PodDisruptionBudget. `gke` adds what
    GKE GPU nodes need (multi-network annotations, the NIC stack's sidecar, host paths, the NCCL set-up)."""
    kd = design.kubernetes
    pool = kd.pool(pool_name)
    job = job_name(pool)
    return render("k8s/train-job.yaml.j2", pool=pool, job=job, namespace=kd.namespace, gke=gke,
                  nvlink=job_nvlink(kd, pool, job, pool.max_nodes),
                  local_queue=kd.local_queue, cluster_queue=kd.cluster_queue, pool_label=POOL_LABEL,
                  image=image, port=RENDEZVOUS_PORT, script_dir=SCRIPT_DIR,
                  examples=EXAMPLES_CONFIGMAP, claims=job_claims(design), env=env,
                  health_label=HEALTH_LABEL, health_passed=HEALTH_PASSED, **JOB_PRIORITY,
                  **jobset_values(design, job))


def queue_summary(design: ClusterDesign) -> dict:
    """The plan summary's Kueue part that EKS and GKE share: cohort, priority classes, team queues."""
    kd = design.kubernetes
    return {"cohort": kd.cohort, "priority_classes": {p.name: p.value for p in WORKLOAD_PRIORITIES},
            "teams": {q.namespace: {"local_queue": f"{q.namespace}/{q.local_queue}", "cluster_queue": q.cluster_queue,
                                    "nodes": dict(q.nodes)} for q in kd.queues[1:]}}


def queue_lines(queues: Mapping) -> list[str]:
    """The plan's lines for the cohort, the priority classes and the teams' queues (when known)."""
    if "cohort" not in queues:
        return []
    lines = [f"    cohort {queues['cohort']}" + (" (the flavors' quotas above are every queue's together)"
                                                    if queues["teams"] else "")
             + "; WorkloadPriorityClasses " + ", ".join(f"{n} ({v})" for n, v in queues["priority_classes"].items())]
    for team, q in queues["teams"].items():
        nodes = ", ".join(f"{pool} {n}" for pool, n in q["nodes"].items() if n) or "no guaranteed nodes"
        lines.append(f"    team {team}: LocalQueue {q['local_queue']} -> ClusterQueue {q['cluster_queue']} ({nodes})")
    return lines


def in_cluster_lines(summary: Mapping) -> list[str]:
    """The plan's lines for what EKS and GKE both run inside the cluster (the `kubernetes_summary`
    of either): Helm charts, filesystem volumes, Kueue queues and the example jobs."""
    lines = ["  Helm charts: " + ", ".join(f"{n} {ver}" for n, ver in summary["charts"].items())]
    for vol in summary["volumes"]:
        lines.append(f"  storage: PersistentVolume {vol['volume']} ({vol['capacity']}, {vol['driver']}, Retain) "
                     f"bound to claim {vol['claim']}, mounted at {vol['mount']} in the jobs")
    lines += data_lines(summary)
    q = summary["queues"]
    lines.append(f"  queue: LocalQueue {q['local_queue']} -> ClusterQueue {q['cluster_queue']}")
    for flavor, quota in q["quotas"].items():
        lines.append(f"    flavor {flavor}: " + ", ".join(f"{r} {n}" for r, n in quota.items()))
    lines += queue_lines(q)
    lines.append("  example jobs: " + ", ".join(summary["jobs"]))
    return lines
