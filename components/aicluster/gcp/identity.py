"""aicluster:gcp:NodeIdentity - a service account for one role of node (compute, head).

Least privilege: the account can write its logs and metrics (the Ops Agent) and nothing else here;
each control plane grants only what it needs on its own resources (reading one secret, one bucket,
creating instances named for its cluster). Instances use the cloud-platform scope, so IAM alone
decides (Google's recommendation for service accounts on VMs).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.gcp.common import project, short_name

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
BASE_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")


def account_id(cluster: str, role: str) -> str:
    """6-30 characters, a lowercase letter first (IAM service account ids)."""
    return short_name(f"{cluster}-{role}", 30)


@dataclass(frozen=True)
class NodeIdentityArgs:
    """A service account for one role of node, with the logging and metrics roles only.

    context: the cluster's name (the account id is <name>-<role>, shortened to 30 characters) and
        the rest of `ClusterDesign.context`, or a `ClusterContext` of your own.
    role: the role of node the account is for ("compute", "head"); in the account id and its
        display name.
    """
    context: ClusterContext
    role: str = "compute"


class NodeIdentity(pulumi.ComponentResource):
    email: pulumi.Output[str]
    member: pulumi.Output[str]        # serviceAccount:<email>
    account_name: pulumi.Output[str]  # projects/<p>/serviceAccounts/<email>, for IAM on the account itself

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:NodeIdentity", name, None, opts)
        design = args.context
        child = pulumi.ResourceOptions(parent=self)
        account = gcp.serviceaccount.Account(
            f"{name}-account", account_id=account_id(design.name, args.role),
            display_name=f"aicluster {design.name}: {args.role} nodes",
            description=f"aicluster {design.name}: {args.role} nodes (logs and metrics only; grants are per resource)",
            opts=child)
        for role in BASE_ROLES:
            gcp.projects.IAMMember(f"{name}-{role.split('/')[1].replace('.', '-')}", project=project(), role=role,
                                   member=account.member, opts=child)
        self.email, self.member, self.account_name = account.email, account.member, account.name
        self.register_outputs({"email": account.email})
