"""spec -> the pods' cloud identities and dataset volumes, pure (no Pulumi): what the EKS Pod
Identity roles, the GKE Workload Identity service accounts, the Kubernetes ServiceAccounts and the
object-store PersistentVolumes are made from.

- An identity reaches exactly its buckets: on aws an IAM policy of s3:ListBucket on the bucket ARN
  (limited to the prefix by an s3:prefix condition) and the object actions on bucket/prefix/*, the
  permissions Mountpoint documents (doc/CONFIGURATION.md, IAM permissions); on gcp a bucket-level
  role, roles/storage.objectViewer for read and roles/storage.objectUser for readwrite (Cloud
  Storage IAM roles), on a Google service account that only that one Kubernetes ServiceAccount may
  impersonate (roles/iam.workloadIdentityUser for <project>.svc.id.goog[<namespace>/<name>]).
- A dataset is a static, read-only PersistentVolume of the cloud's object-store CSI driver, bound to
  one claim, that authenticates as the pod that mounts it: Mountpoint v2 with authenticationSource
  pod (the driver itself holds no S3 permission), GCS FUSE through the pod's Workload Identity.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aicluster.spec.pod_identity import parse_uri, within

if TYPE_CHECKING:
    from aicluster.spec.cluster import ClusterSpec

S3_LIST = ("s3:ListBucket",)
S3_READ = ("s3:GetObject",)
S3_WRITE = ("s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject")
GCS_ROLES = {"read": "roles/storage.objectViewer", "readwrite": "roles/storage.objectUser"}
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"
CSI_DRIVERS = {"aws": "s3.csi.aws.com", "gcp": "gcsfuse.csi.storage.gke.io"}
# The pod annotation GKE's GCS FUSE webhook injects its sidecar for (GKE docs, Cloud Storage FUSE CSI driver).
GCSFUSE_POD_ANNOTATION = "gke-gcsfuse/volumes"
GCSFUSE_STORAGE_LIMIT_ANNOTATION = "gke-gcsfuse/ephemeral-storage-limit"   # the sidecar's, file cache included
GSA_ID_LIMIT = 30        # Google service account ids: 6-30 characters
IAM_ROLE_NAME_LIMIT = 64  # IAM role names (IAM User Guide, IAM and AWS STS quotas)


@dataclass(frozen=True)
class BucketGrant:
    bucket: str
    prefix: str          # "" grants the whole bucket
    access: str          # read | readwrite

    def covers(self, bucket: str, prefix: str) -> bool:
        return bucket == self.bucket and within(prefix, self.prefix)


@dataclass(frozen=True)
class PodIdentity:
    """One Kubernetes ServiceAccount and the buckets its cloud identity reaches."""

    name: str
    namespace: str
    grants: tuple[BucketGrant, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}-{self.name}"


@dataclass(frozen=True)
class Dataset:
    """One bucket (and prefix) mounted read-only through the cloud's object-store CSI driver."""

    name: str            # the claim
    namespace: str
    bucket: str
    prefix: str
    service_account: str
    cache_gib: int | None
    driver: str          # the CSI driver (CSI_DRIVERS)

    @property
    def uri(self) -> str:
        scheme = "s3" if self.driver == CSI_DRIVERS["aws"] else "gs"
        return f"{scheme}://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")


def design_identities(spec: "ClusterSpec") -> tuple[PodIdentity, ...]:
    k8s = spec.kubernetes
    out = []
    for sa in k8s.service_accounts:
        grants = []
        for g in sa.buckets:
            _, bucket, prefix = parse_uri(g.uri)
            grants.append(BucketGrant(bucket, prefix, g.access))
        out.append(PodIdentity(sa.name, sa.namespace or k8s.namespace, tuple(grants)))
    return tuple(out)


def design_datasets(spec: "ClusterSpec") -> tuple[Dataset, ...]:
    k8s = spec.kubernetes
    out = []
    for ds in k8s.datasets:
        _, bucket, prefix = parse_uri(ds.uri)
        out.append(Dataset(ds.name, ds.namespace or k8s.namespace, bucket, prefix, ds.service_account, ds.cache_gib,
                           CSI_DRIVERS[spec.cloud]))
    return tuple(out)


def s3_policy(identity: PodIdentity, partition: str) -> dict:
    """The identity's IAM policy: per bucket, ListBucket on the bucket (only under the prefix) and
    the object actions of its access on the objects under the prefix. No wildcard bucket, no s3:*."""
    statements = []
    for k, g in enumerate(identity.grants):
        bucket_arn = f"arn:{partition}:s3:::{g.bucket}"
        listing = {"Sid": f"List{k}", "Effect": "Allow", "Action": list(S3_LIST), "Resource": [bucket_arn]}
        if g.prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [g.prefix, f"{g.prefix}/*"]}}
        objects = f"{bucket_arn}/{g.prefix}/*" if g.prefix else f"{bucket_arn}/*"
        actions = list(S3_READ + (S3_WRITE if g.access == "readwrite" else ()))
        statements += [listing, {"Sid": f"Objects{k}", "Effect": "Allow", "Action": actions, "Resource": [objects]}]
    return {"Version": "2012-10-17", "Statement": statements}


def workload_identity_member(project: str, identity: PodIdentity) -> str:
    """The one Kubernetes ServiceAccount allowed to act as the identity's Google service account."""
    return f"serviceAccount:{project}.svc.id.goog[{identity.namespace}/{identity.name}]"


def _unique_name(head: str, cluster: str, identity: PodIdentity, limit: int) -> str:
    """`head` cut to fit `limit` with a hash tail unique per cluster, namespace and name."""
    digest = hashlib.sha256(f"{cluster}/{identity.namespace}/{identity.name}".encode()).hexdigest()[:6]
    return f"{head[:limit - len(digest) - 1].rstrip('-')}-{digest}"


def gsa_account_id(cluster: str, identity: PodIdentity) -> str:
    """A Google service account id (6-30 characters, a letter first), unique per cluster, namespace
    and name (two clusters of a project never share one): readable head, hash tail."""
    return _unique_name(f"{identity.namespace}-{identity.name}", cluster, identity, GSA_ID_LIMIT)


def iam_role_name(cluster: str, identity: PodIdentity) -> str:
    """The pod role's IAM name (at most 64 characters), unique per cluster, namespace and name."""
    return _unique_name(f"{cluster}-pod-{identity.namespace}-{identity.name}", cluster, identity, IAM_ROLE_NAME_LIMIT)
