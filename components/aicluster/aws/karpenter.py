"""aicluster:aws:Karpenter - scale-from-zero for the EKS GPU pools (aicluster.kubernetes.capacity decides
which pools and what their NodePools, EC2NodeClasses and NodeOverlays say).

- The controller's IAM role, assumed through EKS Pod Identity by the `karpenter` service account
  only, with the controller policy of Karpenter's getting-started CloudFormation template at the
  pinned release (node lifecycle, EKS integration, interruption, resource discovery), scoped to
  this cluster: instances and launch templates it creates must carry
  kubernetes.io/cluster/<name>=owned and eks:eks-cluster-name=<name>, and it may terminate only
  those. The template's instance-profile management is left out: the EC2NodeClasses name the
  nodes' existing instance profile (the managed node groups' role, whose access entry EKS already
  made), so Karpenter may pass that one role and read that one profile, and create none. The
  zonal-shift statement is left out too (zonal shift stays off).
- The interruption queue: SQS (SSE, TLS only, 5-minute retention) fed by EventBridge rules for
  Spot interruption warnings, rebalance recommendations, instance state changes, scheduled health
  events and capacity-reservation (capacity block) interruptions: Karpenter drains a node before
  EC2 takes it, and replaces it ahead of time.
- The chart, on the system nodes, and per pool the EC2NodeClass, NodePool and (EFA pools) the
  NodeOverlay with the node's huge pages, once the chart (and its CRDs) is installed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from aicluster.design.model import ClusterDesign
from aicluster.kubernetes.capacity import (KARPENTER_SERVICE_ACCOUNT, NodeClassInputs, karpenter_pools, karpenter_values,
                            node_class, node_overlay, node_pool)
from aicluster.kubernetes.in_cluster import KubernetesObject, helm_release
from aicluster.design.kubernetes import SYSTEM_NODES, versions
from aicluster.aws.eks_nodes import eks_node_user_data
from aicluster.aws.iam import partition

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
QUEUE_RETENTION_S = 300
# EventBridge events Karpenter acts on (getting-started cloudformation.yaml, the *Rule resources).
INTERRUPTION_EVENTS = {
    "scheduled-change": ("aws.health", "AWS Health Event"),
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "instance-state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "capacity-reservation-interruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}


def pod_identity_trust() -> str:
    """Only EKS Pod Identity may assume the role (sts:TagSession: it tags the session with the pod's
    cluster, namespace and service account)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": POD_IDENTITY_SERVICE},
         "Action": ["sts:AssumeRole", "sts:TagSession"]}]})


def controller_policy(cluster: str, region: str, part: str, node_role_arn: str, instance_profile_arn: str,
                      queue_arn: str) -> dict[str, Any]:
    """Karpenter's controller policy, scoped to one cluster (see the module's docstring)."""
    ec2 = f"arn:{part}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    request_owned = {f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
                     "aws:RequestTag/eks:eks-cluster-name": cluster}
    created = [f"{ec2}:*:{kind}/*" for kind in ("fleet", "instance", "volume", "network-interface",
                                                 "launch-template", "spot-instances-request")]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowScopedEC2InstanceAccessActions", "Effect": "Allow",
         "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:security-group/*", f"{ec2}:*:subnet/*",
                      f"{ec2}:*:capacity-reservation/*", f"{ec2}:*:placement-group/*"],
         "Action": ["ec2:RunInstances", "ec2:CreateFleet"]},
        {"Sid": "AllowScopedEC2LaunchTemplateAccessActions", "Effect": "Allow",
         "Resource": f"{ec2}:*:launch-template/*", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
         "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedEC2InstanceActionsWithTags", "Effect": "Allow", "Resource": created,
         "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
         "Condition": {"StringEquals": request_owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceCreationTagging", "Effect": "Allow", "Resource": created,
         "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": {**request_owned,
                                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                       "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceTagging", "Effect": "Allow", "Resource": f"{ec2}:*:instance/*",
         "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                       "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                       "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim",
                                                                     "Name"]}}},
        {"Sid": "AllowScopedDeletion", "Effect": "Allow",
         "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
         "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
         "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Resource": node_role_arn, "Action": "iam:PassRole",
         "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}},
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Resource": instance_profile_arn,
         "Action": "iam:GetInstanceProfile"},
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Resource": "*",
         "Action": "iam:ListInstanceProfiles"},
        {"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow",
         "Resource": f"arn:{part}:eks:{region}:*:cluster/{cluster}", "Action": "eks:DescribeCluster"},
        {"Sid": "AllowInterruptionQueueActions", "Effect": "Allow", "Resource": queue_arn,
         "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]},
        {"Sid": "AllowRegionalReadActions", "Effect": "Allow", "Resource": "*",
         "Action": ["ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"],
         "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
        {"Sid": "AllowSSMReadActions", "Effect": "Allow",
         "Resource": f"arn:{part}:ssm:{region}::parameter/aws/service/*", "Action": "ssm:GetParameter"},
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
    ]}


def queue_policy(queue_arn: str) -> dict[str, Any]:
    """EventBridge (and SQS) may send to the queue; nothing reaches it without TLS."""
    return {"Version": "2012-10-17", "Id": "EC2InterruptionPolicy", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
         "Action": "sqs:SendMessage", "Resource": queue_arn},
        {"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]}


def profile_name(instance_profile_arn: str) -> str:
    """arn:aws:iam::<account>:instance-profile/<name> -> <name> (profiles aicluster makes have no path)."""
    return instance_profile_arn.rsplit("/", 1)[1]


@dataclass(frozen=True)
class KarpenterArgs:
    """Karpenter and the NodePools of the pools it scales.

    design: the cluster design (the pools Karpenter scales, their NodePools and EC2NodeClasses:
        aicluster.kubernetes.capacity).
    provider: the cluster's Kubernetes provider (`EksCluster.provider`); None in phase 1 of
        api_access private: the IAM role, Pod Identity association and interruption queue are
        made (the cloud resources of `private` and `vpc` are the same), the chart and the
        NodePools come in phase 2.
    cluster_name, cluster_endpoint: the EKS cluster (`EksCluster.cluster_name`, `.endpoint`).
    node_role_arn, instance_profile_arn: the nodes' role and instance profile (`NodeIdentity`): the
        managed node groups' own, so Karpenter's nodes join through the same access entry.
    subnet_id: the private cluster subnet, security_group_ids: the nodes' groups (the pools' launch
        templates have the same: `eks_pool_security_groups`).
    placement_groups: pool name -> its placement group name (`GpuPool.placement_group_name`), for
        the pools that have one.
    depends_on: what the chart waits for (`EksCluster.ready`).
    """
    design: ClusterDesign
    provider: k8s.Provider | None
    cluster_name: pulumi.Input[str]
    cluster_endpoint: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    instance_profile_arn: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    security_group_ids: Sequence[pulumi.Input[str]]
    placement_groups: Mapping[str, pulumi.Input[str] | None]
    depends_on: Sequence[pulumi.Resource] = ()


class Karpenter(pulumi.ComponentResource):
    queue_name: pulumi.Output[str]
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:Karpenter", name, None, opts)
        design = args.design
        context, chart = design.context, versions().charts["karpenter"]
        part = partition(context.region)
        child = pulumi.ResourceOptions(parent=self)
        tags = context.labels("autoscaler")

        queue = aws.sqs.Queue(f"{name}-interruptions", name=f"{context.name}-karpenter",
                              message_retention_seconds=QUEUE_RETENTION_S, sqs_managed_sse_enabled=True,
                              tags=tags, opts=child)
        aws.sqs.QueuePolicy(f"{name}-interruptions", queue_url=queue.url,
                            policy=queue.arn.apply(lambda arn: json.dumps(queue_policy(arn), sort_keys=True)),
                            opts=child)
        for event, (source, detail) in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}", description=f"aicluster {context.name}: {detail} -> Karpenter",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail]}), tags=tags, opts=child)
            aws.cloudwatch.EventTarget(f"{name}-{event}", rule=rule.name, arn=queue.arn,
                                       target_id="KarpenterInterruptionQueueTarget", opts=child)

        role = aws.iam.Role(f"{name}-controller", description=f"aicluster {context.name}: Karpenter (Pod Identity)",
                            assume_role_policy=pod_identity_trust(), tags=tags, opts=child)
        policy = aws.iam.RolePolicy(
            f"{name}-controller", role=role.id,
            policy=pulumi.Output.all(args.node_role_arn, args.instance_profile_arn, queue.arn).apply(
                lambda a: json.dumps(controller_policy(context.name, context.region, part, a[0], a[1], a[2]),
                                     sort_keys=True)),
            opts=child)
        association = aws.eks.PodIdentityAssociation(
            f"{name}-controller", cluster_name=args.cluster_name, namespace=chart.namespace,
            service_account=KARPENTER_SERVICE_ACCOUNT, role_arn=role.arn, tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))

        self.queue_name = queue.name
        self.role_arn = role.arn
        self.register_outputs({"interruption_queue": queue.name, "role_arn": role.arn})
        if args.provider is None:
            return      # api_access private, phase 1: the cloud side only; phase 2 adds the chart and objects
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=[*args.depends_on, association])
        release = helm_release(name, chart, karpenter_values(
            design, interruption_queue=queue.name, cluster_endpoint=args.cluster_endpoint,
            node_selector=SYSTEM_NODES), in_cluster)

        after_chart = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[release])
        profile = pulumi.Output.from_input(args.instance_profile_arn).apply(profile_name)
        for pool in karpenter_pools(design.kubernetes):
            ids = NodeClassInputs(
                subnet_id=args.subnet_id, security_group_ids=[{"id": sg} for sg in args.security_group_ids],
                instance_profile=profile, user_data=eks_node_user_data(design, pool.name),
                placement_group=args.placement_groups.get(pool.name))
            for obj in (node_class(design, pool.name, ids), node_pool(design, pool.name),
                        node_overlay(design, pool.name)):
                if obj is not None:
                    KubernetesObject(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj, after_chart)
