"""The Kubernetes part of `aicluster plan`: what the EKS cluster gets, with every pinned version."""
from __future__ import annotations

from typing import Any

from aicluster.design.model import ClusterDesign
from aicluster.design.kubernetes import versions
from aicluster.aws.eks import AFTER_NODES, BEFORE_NODES
from aicluster.kubernetes.data import data_summary
from aicluster.kubernetes.capacity import capacity_lines, capacity_warnings
from aicluster.kubernetes.in_cluster import in_cluster_lines, queue_summary
from aicluster.aws.eks_addons import chart_values, claim_name, job_name, volume_name


def api_access(design: ClusterDesign) -> str:
    """How the `pulumi up` that installs the add-ons, and kubectl, reach the EKS API."""
    kd = design.kubernetes
    kubeconfig = f"aws eks update-kubeconfig --name {design.name} --region {design.region}"
    if kd.api_access == "endpoint":
        return (f"the public endpoint, open to {', '.join(kd.api_access_cidrs)} only: run `pulumi up` and "
                f"kubectl from there ({kubeconfig}); inside the VPC the same name resolves to the private endpoint")
    if kd.api_access == "vpc":
        return ("the private endpoint only: run `pulumi up` and kubectl inside the VPC, or over VPN / Direct "
                f"Connect / peering with the VPC's DNS ({kubeconfig})")
    return ("the private endpoint only, and this `pulumi up` creates no in-cluster object (phase 1: cluster, node "
            "groups, filesystems). Phase 2, from inside the VPC: set kubernetes.api_access: vpc and run `pulumi up` "
            "again; it adds the Helm charts, volumes, queues and example jobs below")


def kubernetes_summary(design: ClusterDesign) -> dict[str, Any]:
    kd, v = design.kubernetes, versions()
    return {
        "version": kd.version,
        "endpoint": {"private": True, "public_cidrs": list(kd.api_access_cidrs), "api_access": kd.api_access,
                     "reached_by": api_access(design), "in_cluster_objects": kd.in_cluster},
        "admins": list(kd.admins),
        "system_nodes": {"instance_type": kd.system_instance_type, "count": kd.system_nodes,
                         "ami_type": v.ami_types["system"]["ami_type"]},
        "node_groups": [{
            "pool": p.name, "instance_type": p.instance_type, "min": p.min_nodes, "max": p.max_nodes,
            "desired_at_creation": p.desired_nodes,
            "capacity_type": p.capacity_type, "ami_type": v.ami_types[p.ami_role]["ami_type"],
            "efa_devices": p.efa, "gpus": p.gpus, "hugepages_2mi": p.hugepages_per_node,
            "placement_group": design.pool(p.name).placement.strategy is not None,
            "taints": [f"{t.key}={t.value}:{t.effect}" for t in p.taints], "labels": dict(p.labels),
        } for p in kd.pools],
        "eks_addons": {name: v.addons[name] for name in (*BEFORE_NODES, *AFTER_NODES)},
        "charts": {name: v.charts[name].version for name in chart_values(design)},
        "volumes": [{"volume": volume_name(design, fs), "claim": f"{kd.namespace}/{claim_name(fs)}",
                     "capacity": f"{fs.capacity_gib}Gi", "driver": "fsx.csi.aws.com", "mount": fs.mount}
                    for fs in design.storage],
        **data_summary(design),
        "queues": {"local_queue": f"{kd.namespace}/{kd.local_queue}", "cluster_queue": kd.cluster_queue,
                   "quotas": {p.flavor: p.quota for p in kd.pools}, **queue_summary(design)},
        "jobs": [f"k8s/examples/{job_name(p)}.yaml" for p in kd.pools],
        "capacity_warnings": capacity_warnings(design),
    }


def kubernetes_lines(design: ClusterDesign) -> list[str]:
    s = kubernetes_summary(design)
    access = "private API endpoint" + (f" + public for {', '.join(s['endpoint']['public_cidrs'])}"
                                       if s["endpoint"]["public_cidrs"] else " only")
    sysn = s["system_nodes"]
    lines = [f"  control plane: {access}; access entries: the deploying identity"
             + (f" + {len(s['admins'])} admin(s)" if s["admins"] else "") + "; VPC CNI through Pod Identity",
             f"  Kubernetes API: {s['endpoint']['reached_by']}",
             f"  system nodes: {sysn['count']} x {sysn['instance_type']} ({sysn['ami_type']})"]
    for g in s["node_groups"]:
        placement = "cluster placement group" if g["placement_group"] else "no placement group"
        lines.append(f"  node group {g['pool']}: {g['min']}..{g['max']} x {g['instance_type']} ({g['ami_type']}, "
                     f"{g['capacity_type']}), {g['gpus']} GPUs + {g['efa_devices']} EFA devices per node, "
                     f"{placement}, taint {', '.join(g['taints'])}, {g['hugepages_2mi']} hugepages-2Mi per node")
        if g["capacity_type"] == "CAPACITY_BLOCK" and design.kubernetes.in_cluster:
            lines.append(f"    created with desired size 0 (the block may not be active yet); Karpenter's NodePool "
                         f"{g['pool']} launches into the block while it is active, for the jobs Kueue admits; "
                         f"EC2 reclaims the instances before the block ends (Karpenter drains them first)")
        elif g["capacity_type"] == "CAPACITY_BLOCK":
            lines.append(f"    created with desired size 0 (the block may not be active yet): when it starts, scale up "
                         f"with a scheduled action on the node group's Auto Scaling group at the block's start time, "
                         f"or aws eks update-nodegroup-config --cluster-name {design.name} --nodegroup-name "
                         f"{design.name}-{g['pool']} --scaling-config minSize={g['min']},maxSize={g['max']},"
                         f"desiredSize={g['max']}; EKS scales it to 0 forty minutes before the block ends")
    lines.append("  EKS add-ons: " + ", ".join(f"{n} {ver}" for n, ver in s["eks_addons"].items()))
    lines += capacity_lines(design)
    lines += [f"  warning: {w}" for w in s["capacity_warnings"]]
    if not s["endpoint"]["in_cluster_objects"]:
        lines.append("  in-cluster objects (phase 2, from inside the VPC with kubernetes.api_access: vpc):")
    lines += in_cluster_lines(s)
    return lines
