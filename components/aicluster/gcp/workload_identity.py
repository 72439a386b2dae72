"""aicluster:gcp:WorkloadIdentities - the cloud identities of `kubernetes.service_accounts` on GKE.

Per service account: a Google service account of its own (id from pod_identity_design.gsa_account_id,
unique per cluster, namespace and name), that only that one Kubernetes ServiceAccount may act as
(roles/iam.workloadIdentityUser for <project>.svc.id.goog[<namespace>/<name>]: GKE docs,
Authenticate to Google Cloud APIs from GKE workloads), and a bucket-level role on exactly each of
its buckets: roles/storage.objectViewer for read, roles/storage.objectUser for readwrite. No project
role: the account reaches nothing but those buckets. The Kubernetes ServiceAccount, annotated
iam.gke.io/gcp-service-account with the account's email, is made inside the cluster
(aicluster.kubernetes.data); the cluster's Workload Identity pool and the nodes' GKE metadata server are
gke.py's and gke_nodes.py's. GCS FUSE dataset volumes authenticate as the pod, through this.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.pod_identity import (GCS_ROLES, WORKLOAD_IDENTITY_USER, PodIdentity, gsa_account_id,
                                   workload_identity_member)
from aicluster.gcp.common import project


@dataclass(frozen=True)
class WorkloadIdentitiesArgs:
    """The Google service accounts and bucket grants of the pods' service accounts.

    context: the cluster's name (account ids, descriptions) (`ClusterDesign.context`).
    identities: the service accounts and their bucket grants (`ClusterDesign.kubernetes.identities`).
    depends_on: what the bindings wait for (the GKE cluster, whose Workload Identity pool the
        member names). Default nothing.
    """
    context: ClusterContext
    identities: Sequence[PodIdentity]
    depends_on: Sequence[pulumi.Resource] = ()


class WorkloadIdentities(pulumi.ComponentResource):
    emails: dict[str, pulumi.Output[str]]         # PodIdentity.key -> its Google service account's email

    def __init__(self, name: str, args: WorkloadIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:WorkloadIdentities", name, None, opts)
        context, project_id = args.context, project()
        child = pulumi.ResourceOptions(parent=self)
        self.emails = {}
        for ident in args.identities:
            account = gcp.serviceaccount.Account(
                f"{name}-{ident.key}", account_id=gsa_account_id(context.name, ident),
                display_name=f"aicluster {context.name}: {ident.namespace}/{ident.name}",
                description=f"aicluster {context.name}: pods of Kubernetes service account "
                            f"{ident.namespace}/{ident.name} (bucket-level grants only)",
                opts=child)
            gcp.serviceaccount.IAMMember(
                f"{name}-{ident.key}-workload-identity", service_account_id=account.name,
                role=WORKLOAD_IDENTITY_USER, member=workload_identity_member(project_id, ident),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)))
            for grant in ident.grants:
                gcp.storage.BucketIAMMember(f"{name}-{ident.key}-{grant.bucket}", bucket=grant.bucket,
                                            role=GCS_ROLES[grant.access], member=account.member, opts=child)
            self.emails[ident.key] = account.email
        self.register_outputs({"emails": self.emails})
