"""aicluster:aws:EksCluster - the Kubernetes control plane for `scheduler: kubernetes`.

- The cluster: the pinned Kubernetes version, a private API endpoint and, with `kubernetes.api_access:
  endpoint` (the default), a public one open to the spec's `api_access_cidrs` only: EKS has no
  IAM-gated endpoint, and the `pulumi up` that installs the add-ons must reach the API from where it
  runs (with `vpc` it runs inside the VPC; with `private` it installs nothing inside the cluster);
  API authentication with access entries for `admins`, control-plane
  logs with a retention, no self-managed add-ons (the managed ones below are the only copies),
  `protect` and `retain_on_delete` (it holds the jobs' and queues' state).
- Two small control-plane subnets in two zones (EKS requires two), in the VPC's free last quarter.
- The node role's EKS permissions, and the VPC CNI's own role through EKS Pod Identity, so no pod
  needs the node's credentials or IMDS (GPU nodes keep hop limit 1).
- Managed add-ons at pinned versions: the Pod Identity agent, the VPC CNI and kube-proxy before any
  node group (nodes come up Ready), CoreDNS, the node monitoring agent and the Mountpoint
  for S3 CSI driver once the system node group exists.
- The system node group (add-on controllers), from its own small launch template (IMDSv2 with hop
  limit 1, encrypted root volume).
- A Kubernetes provider built from the cluster's outputs (exec credentials through
  `aws eks get-token`: no token is stored anywhere); none with api_access private (phase 1).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from aicluster.design.model import ClusterContext, ClusterDesign
from aicluster.kubernetes.capacity import karpenter_pools
from aicluster.design.kubernetes import ROLE_LABEL, KubernetesDesign, versions
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS    # one retention for every aicluster log group
from aicluster.aws.iam import partition

LOG_TYPES = ["api", "audit", "authenticator"]
SYSTEM_ROOT_GIB = 100
# EKS access policy for `admins` (EKS user guide, access-policies).
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# Managed add-ons that must run before nodes can become Ready; CoreDNS needs nodes to run on.
BEFORE_NODES = ("eks-pod-identity-agent", "vpc-cni", "kube-proxy")
# The node monitoring agent runs on the nodes (a DaemonSet) and sets the node conditions EKS node
# auto repair acts on (the GPU node groups' node_repair_config, aws/eks_nodes.py).
# The Mountpoint for S3 CSI driver (datasets): v2's node DaemonSet tolerates every taint by default
# (chart values node.tolerateAllTaints: true), so it runs on the tainted GPU nodes; it holds no S3
# permission of its own (volumes authenticate as the pod: aws/pod_identity.py).
AFTER_NODES = ("coredns", "eks-node-monitoring-agent", "aws-mountpoint-s3-csi-driver")
VPC_CNI_SERVICE_ACCOUNT = "aws-node"


def service_assume_role_policy(service: str, tag_session: bool = True) -> str:
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]})


def _cluster_security_group(vpc_config) -> str:
    """The security group EKS creates for the control plane (typed output or plain dict)."""
    if hasattr(vpc_config, "cluster_security_group_id"):
        return vpc_config.cluster_security_group_id
    return vpc_config.get("cluster_security_group_id") or vpc_config.get("clusterSecurityGroupId")


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with the caller's AWS credentials (no stored token)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "interactiveMode": "Never",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"]}}}],
    }, sort_keys=True)


@dataclass(frozen=True)
class EksClusterArgs:
    """The EKS control plane, its managed add-ons, the system node group and the admins' access.

    context: the cluster's name (the EKS cluster's name, its log group, node group names), region
        (the ARN partition, the kubeconfig) and tags (`ClusterDesign.context`, or your own).
    kubernetes: the Kubernetes design: version, API access (public endpoint, CIDRs), control-plane
        subnets, system nodes, admins, whether anything is installed inside the cluster (then a
        Kubernetes provider is built) (`ClusterDesign.kubernetes`). Add-on versions come from the
        catalog (catalog/kubernetes.yaml).
    vpc_id: the VPC (the control-plane subnets aicluster creates go into it).
    subnet_id: the private cluster subnet: the system node group lives there.
    node_role_name, node_role_arn: the GPU nodes' role (`NodeIdentity`): it gets the EKS worker
        policies here, and the system nodes use it too.
    """
    context: ClusterContext
    kubernetes: KubernetesDesign
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    node_role_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]


class EksCluster(pulumi.ComponentResource):
    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider | None           # None with api_access private (phase 1)
    before_nodes: list[pulumi.Resource]     # what GPU node groups must wait for
    ready: list[pulumi.Resource]            # what Kubernetes objects must wait for

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:EksCluster", name, None, opts)
        context, kd = args.context, args.kubernetes
        assert kd is not None
        v = versions()
        part = partition(context.region)
        child = pulumi.ResourceOptions(parent=self)
        tags = context.labels("control-plane")

        role = aws.iam.Role(f"{name}-cluster-role", description=f"aicluster {context.name}: EKS control plane",
                            assume_role_policy=service_assume_role_policy("eks.amazonaws.com"), tags=tags, opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=role.name,
            policy_arn=f"arn:{part}:iam::aws:policy/AmazonEKSClusterPolicy", opts=child)

        subnet_ids = self._control_plane_subnets(name, context, kd, args.vpc_id, child)
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=f"/aws/eks/{context.name}/cluster", retention_in_days=LOG_RETENTION_DAYS,
            tags=tags, opts=child)

        public = kd.public_endpoint
        cluster = aws.eks.Cluster(
            name,
            name=context.name,
            version=kd.version,
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=subnet_ids,
                endpoint_private_access=True,
                endpoint_public_access=public,
                public_access_cidrs=list(kd.api_access_cidrs) if public else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                # The identity running `pulumi up` installs the add-ons through the Kubernetes API.
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            # The managed add-ons below are the only CNI, kube-proxy and CoreDNS: pinned, upgradable.
            bootstrap_self_managed_addons=False,
            enabled_cluster_log_types=LOG_TYPES,
            tags=tags,
            # Set on the resource itself (mocks and policies see only what is set here).
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True,
                                        depends_on=[logs, cluster_policy]),
        )
        self.cluster_name = cluster.name
        self.endpoint = cluster.endpoint
        self.cluster_security_group_id = cluster.vpc_config.apply(_cluster_security_group)

        # Node permissions EKS requires (the role itself is the pool's NodeIdentity role).
        node_policies = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{short}", role=args.node_role_name,
                                         policy_arn=f"arn:{part}:iam::aws:policy/{policy}", opts=child)
            for short, policy in (("worker", "AmazonEKSWorkerNodePolicy"),
                                  ("ecr", "AmazonEC2ContainerRegistryPullOnly"))
        ]
        cni_role = aws.iam.Role(f"{name}-vpc-cni-role", description=f"aicluster {context.name}: VPC CNI (Pod Identity)",
                                assume_role_policy=service_assume_role_policy("pods.eks.amazonaws.com"),
                                tags=tags, opts=child)
        cni_policy = aws.iam.RolePolicyAttachment(f"{name}-vpc-cni-policy", role=cni_role.name,
                                                  policy_arn=f"arn:{part}:iam::aws:policy/AmazonEKS_CNI_Policy",
                                                  opts=child)

        before = []
        for addon in BEFORE_NODES:
            deps = [cni_policy, *before] if addon == "vpc-cni" else []
            before.append(aws.eks.Addon(
                f"{name}-{addon}", cluster_name=cluster.name, addon_name=addon, addon_version=v.addons[addon],
                resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
                pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=cni_role.arn, service_account=VPC_CNI_SERVICE_ACCOUNT)] if addon == "vpc-cni" else None,
                tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=deps)))

        system = self._system_nodes(name, context, kd, cluster, args, tags, [*before, *node_policies])
        after = [aws.eks.Addon(
            f"{name}-{addon}", cluster_name=cluster.name, addon_name=addon, addon_version=v.addons[addon],
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system])) for addon in AFTER_NODES]

        for i, arn in enumerate(kd.admins):
            entry = aws.eks.AccessEntry(f"{name}-admin-{i}", cluster_name=cluster.name, principal_arn=arn,
                                        type="STANDARD", tags=tags, opts=child)
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}-policy", cluster_name=cluster.name, principal_arn=arn,
                policy_arn=f"arn:{part}:eks::aws:cluster-access-policy/{ADMIN_POLICY}",
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]))

        self.kubeconfig = pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority).apply(
            lambda a: kubeconfig(a[0], a[1], a[2]["data"], context.region))
        self.provider = None
        if kd.in_cluster:
            self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                         opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]))
        self.before_nodes = [*before, *node_policies]
        self.ready = [*before, *after, system]
        self.register_outputs({"cluster_name": cluster.name, "endpoint": cluster.endpoint,
                               "kubeconfig": self.kubeconfig})

    def _control_plane_subnets(self, name: str, context: ClusterContext, kd: KubernetesDesign, vpc_id,
                               child) -> list:
        if kd.control_plane_subnet_ids:
            return list(kd.control_plane_subnet_ids)
        return [aws.ec2.Subnet(
            f"{name}-control-plane-{i}", vpc_id=vpc_id, cidr_block=cidr, availability_zone=zone,
            map_public_ip_on_launch=False,
            tags={**context.labels("network"), "Name": f"{context.name}-control-plane-{zone}"}, opts=child).id
            for i, (cidr, zone) in enumerate(kd.control_plane_subnets)]

    def _system_nodes(self, name: str, context: ClusterContext, kd: KubernetesDesign, cluster: aws.eks.Cluster,
                      args: EksClusterArgs, tags: dict, depends_on: list) -> aws.eks.NodeGroup:
        ami = versions().ami_types["system"]
        template = aws.ec2.LaunchTemplate(
            f"{name}-system-template",
            description=f"aicluster {context.name}: EKS system nodes (add-on controllers)",
            update_default_version=True,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=ami["root_device"],
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=SYSTEM_ROOT_GIB, volume_type="gp3", encrypted="true", delete_on_termination="true"))],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                                for kind in ("instance", "volume", "network-interface")],
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cluster.name,
            node_group_name=f"{context.name}-system",
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.subnet_id],
            ami_type=ami["ami_type"],
            release_version=ami["release_version"],     # pinned, as the GPU node groups' (eks_nodes.py)
            instance_types=[kd.system_instance_type],
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=kd.system_nodes, max_size=kd.system_nodes, desired_size=kd.system_nodes),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)),
            labels={ROLE_LABEL: "system"},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )


def eks_pool_security_groups(nodes_security_group_id, eks: EksCluster) -> list:
    """Managed node groups whose template names security groups get no cluster security group
    from EKS: add it, or the control plane cannot reach the kubelets."""
    return [nodes_security_group_id, eks.cluster_security_group_id]


def attach_kubernetes(design: ClusterDesign, eks: EksCluster, pools: dict, filesystems: list, subnet_id,
                      node_role_arn, *, instance_profile_arn=None,
                      nodes_security_group_id=None, remote_write_url=None) -> dict[str, pulumi.Output]:
    """The node groups for the pools' launch templates, then everything inside the cluster, and
    Karpenter for the pools that grow past their node group (given the nodes' instance profile and
    security group, which its EC2NodeClasses name as the launch templates do)."""
    from aicluster.aws.eks_addons import KubernetesAddons, KubernetesAddonsArgs
    from aicluster.aws.eks_nodes import EksNodeGroup, EksNodeGroupArgs
    from aicluster.aws.pod_identity import PodIdentities, PodIdentitiesArgs

    groups = {
        name: EksNodeGroup(f"{design.name}-{name}-eks", EksNodeGroupArgs(
            context=design.context, pool=design.kubernetes.pool(name), cluster_name=eks.cluster_name,
            node_role_arn=node_role_arn, subnet_id=subnet_id, launch_template_id=pool.launch_template_id,
            launch_template_version=pool.launch_template_version, depends_on=eks.before_nodes))
        for name, pool in pools.items()
    }
    PodIdentities(f"{design.name}-pods", PodIdentitiesArgs(
        context=design.context, identities=design.kubernetes.identities, cluster_name=eks.cluster_name,
        depends_on=eks.before_nodes))
    if design.kubernetes.in_cluster:
        KubernetesAddons(f"{design.name}-k8s", KubernetesAddonsArgs(
            design=design, provider=eks.provider,
            filesystems=[(fs_design, fs.file_system_id, fs.mount)
                         for fs_design, fs in zip(design.storage, filesystems)],
            depends_on=eks.ready, remote_write_url=remote_write_url))
    outputs: dict[str, pulumi.Output] = {}
    if instance_profile_arn is not None and karpenter_pools(design.kubernetes):
        from aicluster.aws.karpenter import Karpenter, KarpenterArgs
        karpenter = Karpenter(f"{design.name}-karpenter", KarpenterArgs(
            design=design, provider=eks.provider, cluster_name=eks.cluster_name, cluster_endpoint=eks.endpoint,
            node_role_arn=node_role_arn, instance_profile_arn=instance_profile_arn, subnet_id=subnet_id,
            security_group_ids=eks_pool_security_groups(nodes_security_group_id, eks),
            placement_groups={name: pool.placement_group_name for name, pool in pools.items()},
            depends_on=eks.ready))
        outputs["karpenter_interruption_queue"] = karpenter.queue_name
    return outputs | {
        "eks_cluster": eks.cluster_name,
        "kubeconfig": eks.kubeconfig,
        "kubernetes_api": eks.endpoint,
        "node_groups": {name: g.node_group_name for name, g in groups.items()},
    }
