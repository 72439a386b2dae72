"""aicluster:aws:EksNodeGroup - one EKS managed node group per GPU pool.

The node group launches from the pool's own launch template (GpuPool with launcher "eks": every
EFA device, IMDSv2 with hop limit 1, no public IP, encrypted root volume, the placement group)
and takes the EKS-optimized accelerated AL2023 AMI by `ami_type`. The template carries the
instance type, so the node group's `instance_types` stays unset; capacity blocks need exactly
that (Amazon EKS User Guide, Capacity Blocks for ML with managed node groups), and one rule for
every capacity type keeps node groups from being replaced when a pool changes how it buys
capacity.

The AMI release is pinned (catalog/kubernetes.yaml ami_types.gpu.release_version). Bumping it, or
the launch template, updates the group the pool's max_unavailable nodes at a time (update_config,
1 by default, at most 100): EKS starts new nodes, cordons and drains old ones through the eviction
API, which honours the
PodDisruptionBudget of a running example job, and fails the update rather than forcing it
(force_update_version false) when a budget still blocks the drain (docs/kubernetes-day-two.md,
"Upgrades").

GPU nodes are tainted `nvidia.com/gpu=present:NoSchedule` and labelled with their pool, instance
type and accelerator; their user data (MIME multipart for nodeadm) pre-allocates the 2 MiB huge
pages EFA uses and RAIDs the instance store for container images.

A capacity block's node group is created with desired size 0 (the block may not be active yet; EKS
user guide, capacity-blocks-mng) and scaled up when the block starts; EKS itself scales it back to
0 forty minutes before the block ends. `pulumi up` never resets the desired size afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext, ClusterDesign
from aicluster.design.kubernetes import KubernetesPool, versions
from aicluster.kubernetes.health import REPAIR_MAX_UNHEALTHY_PERCENT, REPAIR_PARALLEL_NODES
from aicluster.render.templates import render

MIME_BOUNDARY = "==AICLUSTER-NODE=="
SHUTDOWN_GRACE = "90s"
SHUTDOWN_GRACE_CRITICAL = "30s"


def eks_node_user_data(design: ClusterDesign, pool_name: str) -> str:
    """The user data the EKS AL2023 accelerated AMI expects: MIME multipart with a nodeadm
    NodeConfig part and a cloud-config part (no shell script, no secret)."""
    pool, kpool = design.pool(pool_name), design.kubernetes.pool(pool_name)
    node_config = render("k8s/node-config.yaml.j2", cluster=design.name, pool=pool.name, local_nvme=kpool.local_nvme,
                         shutdown_grace=SHUTDOWN_GRACE, shutdown_grace_critical=SHUTDOWN_GRACE_CRITICAL)
    cloud_config = render("k8s/node-cloud-config.yaml.j2", cluster=design.name, pool=pool.name, gpus=kpool.gpus,
                          fabric_devices=kpool.efa, hugepages=kpool.hugepages_per_node,
                          host_imex_off=kpool.multi_node_nvlink)
    return render("k8s/node-user-data.mime.j2", boundary=MIME_BOUNDARY, node_config=node_config,
                  cloud_config=cloud_config)


# EKS UpdateConfig MaxUnavailable: minimum 1, "The maximum number is 100"
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-eks-nodegroup-updateconfig.html;
# "The maximum unavailable has a quota of 100 nodes",
# https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html; tests/contracts).
UPDATE_MAX_UNAVAILABLE = 100


def update_max_unavailable(pool: KubernetesPool) -> int:
    """The node group's update_config max_unavailable: the pool's budget (pools[].max_unavailable),
    within what EKS takes."""
    return max(1, min(pool.max_unavailable, UPDATE_MAX_UNAVAILABLE))


def node_repair_config() -> aws.eks.NodeGroupNodeRepairConfigArgs:
    """Node auto repair on, under the caps both clouds share (aicluster.kubernetes.health)."""
    return aws.eks.NodeGroupNodeRepairConfigArgs(
        enabled=True, max_parallel_nodes_repaired_count=REPAIR_PARALLEL_NODES,
        max_unhealthy_node_threshold_percentage=REPAIR_MAX_UNHEALTHY_PERCENT)


@dataclass(frozen=True)
class EksNodeGroupArgs:
    """One EKS managed node group, launching a GpuPool's launch template (`launcher="eks"`).

    context: the cluster's name (the node group's name) and tags (`ClusterDesign.context`, or your
        own).
    pool: the pool's Kubernetes design: name, capacity type, sizes, labels, taints
        (`ClusterDesign.kubernetes.pool(name)`).
    cluster_name: the EKS cluster's name (`EksCluster.cluster_name`).
    node_role_arn: the nodes' role (`NodeIdentity.role_arn`).
    subnet_id: the private cluster subnet.
    launch_template_id, launch_template_version: the pool's launch template (`GpuPool`).
    depends_on: the managed add-ons nodes need to become Ready (VPC CNI, kube-proxy, Pod Identity
        agent) and the node role's policies (`EksCluster.before_nodes`); set on the node group
        itself (children do not inherit it). Default: none.
    """
    context: ClusterContext
    pool: KubernetesPool
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    launch_template_id: pulumi.Input[str]
    launch_template_version: pulumi.Input[int]
    depends_on: Sequence[pulumi.Resource] = ()


class EksNodeGroup(pulumi.ComponentResource):
    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: EksNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:EksNodeGroup", name, None, opts)
        cluster, pool = args.context, args.pool
        group = aws.eks.NodeGroup(
            f"{name}-nodegroup",
            cluster_name=args.cluster_name,
            node_group_name=f"{cluster.name}-{pool.name}",
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.subnet_id],
            # The pool's AMI type (x86_64 or, for Grace nodes, arm64 NVIDIA) at its pinned release
            # (catalog/kubernetes.yaml): a bump rolls the group node by node.
            ami_type=versions().ami_types[pool.ami_role]["ami_type"],
            release_version=versions().ami_types[pool.ami_role]["release_version"],
            capacity_type=pool.capacity_type,
            # instance_types stays unset: the launch template names the type (capacity blocks
            # require it there: Amazon EKS User Guide, Capacity Blocks for ML).
            # Capacity blocks start empty (desired 0) and are scaled up when the block is active.
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_size, max_size=pool.max_nodes, desired_size=pool.desired_nodes),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=args.launch_template_id,
                version=pulumi.Output.from_input(args.launch_template_version).apply(str)),
            labels=dict(pool.labels),
            taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.eks_effect) for t in pool.taints],
            # A version or template update replaces at most the pool's max_unavailable nodes at a
            # time (1 by default), never the whole pool, and drains each with the eviction API: a
            # node whose pods a PodDisruptionBudget protects (a running gang) fails the update
            # instead of being killed (no forced update).
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=update_max_unavailable(pool)),
            force_update_version=False,
            # EKS node auto repair: reboots or replaces a node whose node monitoring agent condition
            # (AcceleratedHardwareReady: Xid, NVLink, DCGM) or Ready stays bad (docs/kubernetes-day-two.md,
            # "Health and repair"); one node at a time, none while a fifth of the group is unhealthy.
            node_repair_config=node_repair_config(),
            tags=cluster.labels("compute", pool.name),
            # Whoever scales the pool between min and max (an operator, an autoscaler, the scheduled
            # actions of a capacity block) owns the desired size; a `pulumi up` must not undo it
            # (terraform-aws-eks ignores scaling_config[0].desired_size the same way).
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on),
                                        ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.node_group_name = group.node_group_name
        self.register_outputs({"node_group_name": group.node_group_name})
