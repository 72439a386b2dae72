"""aicluster:aws:PodIdentities - the cloud identities of `kubernetes.service_accounts` on EKS.

Per service account: an IAM role only EKS Pod Identity may assume (pods.eks.amazonaws.com,
sts:AssumeRole + sts:TagSession), an inline policy that names exactly the account's buckets
(s3:ListBucket on each bucket ARN, limited to the prefix; the object actions of its access on
bucket/prefix/*; no wildcard bucket and no s3:*: pod_identity_design.s3_policy), and the
PodIdentityAssociation that gives the role to that one ServiceAccount in that one namespace. The
Pod Identity agent add-on (aws/eks.py) serves the credentials; the ServiceAccount object itself is
made inside the cluster (aicluster.kubernetes.data). Datasets read through these identities too: their
Mountpoint volumes use pod-level credentials, so the CSI driver holds no S3 permission at all.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext
from aicluster.design.pod_identity import PodIdentity, iam_role_name, s3_policy
from aicluster.aws.iam import partition

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def pod_identity_trust() -> str:
    """Only EKS Pod Identity assumes the role; it tags the session with the cluster, namespace and
    service account (EKS user guide, pod-id-role: sts:AssumeRole and sts:TagSession)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": POD_IDENTITY_SERVICE}, "Action": ["sts:AssumeRole", "sts:TagSession"]}]})


@dataclass(frozen=True)
class PodIdentitiesArgs:
    """The IAM roles and Pod Identity associations of the pods' service accounts.

    context: the cluster's name, region (the ARN partition) and tags (`ClusterDesign.context`).
    identities: the service accounts and their bucket grants (`ClusterDesign.kubernetes.identities`).
    cluster_name: the EKS cluster (`EksCluster.cluster_name`).
    depends_on: what the associations wait for (`EksCluster.before_nodes`: the Pod Identity agent).
    """
    context: ClusterContext
    identities: Sequence[PodIdentity]
    cluster_name: pulumi.Input[str]
    depends_on: Sequence[pulumi.Resource] = ()


class PodIdentities(pulumi.ComponentResource):
    role_arns: dict[str, pulumi.Output[str]]      # PodIdentity.key -> its role's ARN

    def __init__(self, name: str, args: PodIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:PodIdentities", name, None, opts)
        context = args.context
        part = partition(context.region)
        child = pulumi.ResourceOptions(parent=self)
        self.role_arns = {}
        for ident in args.identities:
            tags = {**context.labels("pod-identity"), "aicluster-service-account": f"{ident.namespace}/{ident.name}"}
            role = aws.iam.Role(
                f"{name}-{ident.key}", name=iam_role_name(context.name, ident),
                description=f"aicluster {context.name}: pods of service account {ident.namespace}/{ident.name}",
                assume_role_policy=pod_identity_trust(), tags=tags, opts=child)
            policy = aws.iam.RolePolicy(f"{name}-{ident.key}-buckets", role=role.id,
                                        policy=json.dumps(s3_policy(ident, part), sort_keys=True), opts=child)
            aws.eks.PodIdentityAssociation(
                f"{name}-{ident.key}", cluster_name=args.cluster_name, namespace=ident.namespace,
                service_account=ident.name, role_arn=role.arn, tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, *args.depends_on]))
            self.role_arns[ident.key] = role.arn
        self.register_outputs({"role_arns": self.role_arns})
