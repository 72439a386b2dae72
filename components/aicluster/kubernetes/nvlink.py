"""Multi-node NVLink (GB200/GB300 NVL72) on Kubernetes, the same on EKS and GKE. Pure: values and
template inputs, no resource.

A pool whose NVLink domain spans nodes (catalog nodes_per_nvlink_domain > 1) needs three things
beyond an 8-GPU pool:

- IMEX for each job: the NVIDIA DRA driver (chart nvidia-dra-driver-gpu, pinned in
  catalog/kubernetes.yaml) with ComputeDomains on. A job creates a ComputeDomain
  (resource.nvidia.com/v1beta1); its controller makes the ResourceClaimTemplate the ComputeDomain
  names, and the pods that claim it get an IMEX channel, with an IMEX daemon on each of their nodes
  configured with exactly those nodes, so a job reaches its own GPUs' memory over NVLink and no
  other job's (EKS user guide, ml-eks-nvidia-ultraserver; NVIDIA GPU Operator docs, dra-cds). The
  GPUs stay with the device plugin: the chart refuses to install with its own GPU allocation on
  beside it (templates/validation.yaml), and EKS recommends the device plugin until that side
  leaves "experimental". The host's own nvidia-imex service must not run beside the driver's
  daemons (NVIDIA/cloud-native-docs issue 453): EKS nodes disable and mask it at boot
  (templates/k8s/node-cloud-config.yaml.j2); GKE's Container-Optimized OS nodes run none.
- Placement inside one domain: a Kueue Topology (design/kubernetes.py TOPOLOGY_LEVELS) that the
  pool's ResourceFlavor names, and the job's required topology at the domain's level.
- On EKS, the domain's label on every node: GPU Feature Discovery writes nvidia.com/gpu.clique
  (the device plugin chart's gfd; the GPU operator runs it by default).
"""
from __future__ import annotations

from typing import Any

from aicluster.design.kubernetes import (POOL_LABEL, ROLE_LABEL, SYSTEM_NODES, KubernetesDesign, KubernetesPool,
                                         versions)

# What the ComputeDomain and its claim are called in a job (names of the example job's objects).
CHANNEL_CLAIM = "compute-domain-channel"
# The Kueue annotation a PodSet's pods must all fit under one domain of the level it names
# (Kueue docs, Topology Aware Scheduling: kueue.x-k8s.io/podset-required-topology).
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
# Where the driver the DRA driver's plugins use lives on the host: the EKS AL2023 NVIDIA AMI installs
# it on the root filesystem (the chart's default `/`); GKE's installer puts it under
# /home/kubernetes/bin/nvidia (Cluster Toolkit modules/management/kubectl-apply, nvidia_dra_driver).
EKS_DRIVER_ROOT = "/"


def compute_domain_api() -> str:
    return versions().charts["nvidia-dra-driver-gpu"].api_version


def job_nvlink(kd: KubernetesDesign, pool: KubernetesPool, job: str, nodes: int) -> dict[str, Any] | None:
    """What templates/k8s/train-job.yaml.j2 adds for a job of `nodes` workers on a pool whose NVLink
    domain spans nodes: its ComputeDomain, the claim its pods make, and the topology level they
    must share; None for any other pool."""
    if not pool.multi_node_nvlink:
        return None
    if nodes > pool.nvlink_domain_nodes:
        raise ValueError(f"{job}: {nodes} workers do not fit one NVLink domain of {pool.nvlink_domain_nodes} nodes")
    return {"api_version": compute_domain_api(), "domain": f"{job}-domain", "template": f"{job}-channel",
            "claim": CHANNEL_CLAIM, "nodes": nodes, "annotation": REQUIRED_TOPOLOGY,
            "level": kd.nvlink_domain_level}


def dra_driver_values(kd: KubernetesDesign, driver_root: str) -> dict[str, Any]:
    """nvidia-dra-driver-gpu values (chart values.yaml): ComputeDomains only; the controller on the
    system nodes (the chart's default affinity wants a control-plane node, which neither EKS nor GKE
    shows); the kubelet plugin on the NVLink pools' nodes only, tolerating what they are tainted
    with; the resource.k8s.io version the cluster serves set, not detected (the chart's own
    values.yaml: some environments report versions the API server does not serve)."""
    pools = kd.nvlink_pools
    tolerations = []
    for pool in pools:
        for taint in pool.tolerations:
            if taint.toleration() not in tolerations:
                tolerations.append(taint.toleration())
    return {
        "nvidiaDriverRoot": driver_root,
        "resourceApiVersion": kd.resource_api_version,
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "controller": {"nodeSelector": SYSTEM_NODES, "affinity": _node_affinity(ROLE_LABEL, [SYSTEM_NODES[ROLE_LABEL]])},
        "kubeletPlugin": {"affinity": _node_affinity(POOL_LABEL, [p.name for p in pools]),
                          "tolerations": tolerations},
    }


# Critical priority classes on GKE: GKE Standard ships a ResourceQuota in kube-system scoped to the
# system-node-critical and system-cluster-critical PriorityClasses, so a pod of either class is
# admitted only in a namespace with a quota of that scope (NVIDIA/aicr PR 921, "GKE Standard ships a
# kube-system ResourceQuota scoped to system-*-critical PriorityClasses"; Kubernetes docs, Resource
# Quotas, "Limit Priority Class consumption by default"). The DRA driver's controller, kubelet
# plugin and IMEX daemons all run system-node-critical (chart values.yaml), so its namespace gets
# one, as Cluster Toolkit's examples/gke-a4x/nvidia-dra-driver.yaml does (pods: 100).
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
CRITICAL_PODS_FLOOR = 100


def critical_priority_quota(kd: KubernetesDesign, cluster: str) -> dict[str, Any]:
    """The ResourceQuota that lets the DRA driver's pods of critical priority into its namespace on
    GKE: room for the floor Cluster Toolkit sets, or three pods a node of the NVLink pools (the kubelet
    plugin, a ComputeDomain's IMEX daemon, and one more while either rolls)."""
    nodes = sum(p.max_nodes for p in kd.nvlink_pools)
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "critical-pods", "namespace": versions().charts["nvidia-dra-driver-gpu"].namespace,
                         "labels": {"aicluster-cluster": cluster}},
            "spec": {"hard": {"pods": str(max(CRITICAL_PODS_FLOOR, 3 * nodes))},
                     "scopeSelector": {"matchExpressions": [
                         {"operator": "In", "scopeName": "PriorityClass", "values": list(CRITICAL_PRIORITY_CLASSES)}]}}}


def _node_affinity(key: str, values: list[str]) -> dict[str, Any]:
    """A required node affinity: the label `key` is one of `values`. It replaces the chart's own
    nodeSelectorTerms whole (Helm merges maps, not lists)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}]}}}


def nvlink_lines(kd: KubernetesDesign) -> list[str]:
    """The plan's lines for the NVLink pools: the driver, the topology, what a job asks for."""
    if not kd.nvlink_pools:
        return []
    chart = versions().charts["nvidia-dra-driver-gpu"]
    return [f"  NVLink domains: {chart.chart} {chart.version} (ComputeDomains, {kd.resource_api_version}); Kueue "
            f"Topology {' > '.join(kd.topology_levels)}; jobs require one {kd.nvlink_domain_level} and claim "
            f"an IMEX channel of their own ComputeDomain ("
            + ", ".join(f"{p.name}: {p.nvlink_domain_nodes} nodes a domain" for p in kd.nvlink_pools) + ")"]
