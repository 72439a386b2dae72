"""aicluster:aws:NodeIdentity - the role and instance profile of compute nodes.

Least privilege: nodes get Session Manager access (no SSH keys, no open port 22) and nothing
else here; each control plane adds only the statements it needs (reading its own secrets).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext


def partition(region: str) -> str:
    """The ARN partition of a region, so managed-policy ARNs are right outside the main one."""
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws"


def ssm_core_policy_arn(region: str) -> str:
    """The managed policy that lets SSM Session Manager reach an instance (head, login and compute
    nodes all take it: no SSH port is needed to log in)."""
    return f"arn:{partition(region)}:iam::aws:policy/AmazonSSMManagedInstanceCore"


def ec2_assume_role_policy(region: str) -> str:
    service = "ec2.amazonaws.com.cn" if partition(region) == "aws-cn" else "ec2.amazonaws.com"
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    })


@dataclass(frozen=True)
class NodeIdentityArgs:
    """The role and instance profile of a kind of node.

    context: the cluster's name (the role's description), region (the ARN partition, the EC2
        service principal) and tags (`ClusterDesign.context`, or your own).
    role: what the nodes are, in the role's description and its `aicluster-role` tag; default
        "compute".
    """
    context: ClusterContext
    role: str = "compute"


class NodeIdentity(pulumi.ComponentResource):
    role_name: pulumi.Output[str]
    role_arn: pulumi.Output[str]
    instance_profile_arn: pulumi.Output[str]

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:NodeIdentity", name, None, opts)
        cluster = args.context
        child = pulumi.ResourceOptions(parent=self)
        tags = cluster.labels(args.role)
        role = aws.iam.Role(
            f"{name}-role",
            description=f"aicluster {cluster.name}: {args.role} nodes",
            assume_role_policy=ec2_assume_role_policy(cluster.region),
            tags=tags,
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-ssm",
            role=role.name,
            policy_arn=ssm_core_policy_arn(cluster.region),
            opts=child,
        )
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=tags, opts=child)
        self.role_name = role.name
        self.role_arn = role.arn
        self.instance_profile_arn = profile.arn
        self.register_outputs({"role_arn": role.arn, "instance_profile_arn": profile.arn})
