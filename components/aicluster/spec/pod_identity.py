"""`kubernetes.service_accounts` and `kubernetes.datasets`: cloud identities for pods and the buckets
they may read or write, and read-only object-store volumes for datasets. Shape and meaning both
live here; spec.py only hangs the sections under `kubernetes` and calls `identity_problems`.

Least privilege is the rule the checks enforce: a service account reaches exactly the buckets (on
aws, prefixes) it names, read or read-write; no identity goes to a namespace's `default` account
(every pod there would carry it); a dataset is read through a named account that the spec grants
read on that very bucket and prefix.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from aicluster.errors import Problem, close_match
from aicluster.spec.workload import SpecModel

# The spec's names (spec.py `Name`): Kubernetes labels, namespaces, cloud resource names.
_NAME = r"^[a-z]([a-z0-9-]*[a-z0-9])?$"
K8sName = Annotated[str, Field(strict=True, pattern=_NAME, min_length=1, max_length=24)]
# s3://bucket[/prefix] or gs://bucket[/prefix]; bucket names as both clouds allow them (3-63
# characters: lower case, digits, dots, hyphens; GCS also underscores), prefixes of path segments.
_URI = r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[A-Za-z0-9._=-]+)*/?$"
BucketUri = Annotated[str, Field(strict=True, pattern=_URI, max_length=256)]
SCHEMES = {"aws": "s3", "gcp": "gs"}
MAX_GRANTS = 20          # buckets per service account: an IAM policy stays far below its size limit


class BucketGrantSpec(SpecModel):
    uri: BucketUri = Field(description="s3://bucket[/prefix] on aws, gs://bucket on gcp (GCS grants are per bucket).")
    access: Literal["read", "readwrite"] = Field(
        "read", description="read: list and get objects. readwrite: also put, delete and abort multipart uploads "
                            "(aws: s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload; gcp: "
                            "roles/storage.objectUser instead of roles/storage.objectViewer).")


class ServiceAccountSpec(SpecModel):
    name: K8sName = Field(description="The Kubernetes ServiceAccount aicluster creates (not `default`); pods "
                                      "that set serviceAccountName to it get its cloud identity.")
    namespace: K8sName | None = Field(None, description="kubernetes.namespace (the default) or a team's namespace.")
    buckets: tuple[BucketGrantSpec, ...] = Field(
        min_length=1, max_length=MAX_GRANTS,
        description="The only buckets the identity reaches: aws through EKS Pod Identity (an IAM role whose "
                    "policy names exactly these bucket and object ARNs), gcp through Workload Identity (a Google "
                    "service account with bucket-level roles on exactly these buckets).")


class DatasetSpec(SpecModel):
    name: K8sName = Field(description="The PersistentVolumeClaim pods mount (PersistentVolume <cluster>-<name>).")
    uri: BucketUri = Field(description="aws: s3://bucket[/prefix] (Mountpoint for Amazon S3 CSI driver); gcp: "
                                       "gs://bucket[/prefix] (Cloud Storage FUSE CSI driver). Mounted read-only.")
    service_account: K8sName = Field(
        description="A service account of kubernetes.service_accounts, in the dataset's namespace, with read on "
                    "this bucket and prefix: the mount uses the pod's identity (Mountpoint authenticationSource "
                    "pod; GCS FUSE through Workload Identity), so pods mount it with serviceAccountName set to it.")
    namespace: K8sName | None = Field(None, description="Where the claim lives: kubernetes.namespace (default) or a team's.")
    cache_gib: Annotated[int, Field(strict=True, ge=1, le=100_000)] | None = Field(
        None, description="A local read cache of this size per node, on the node's ephemeral storage (RAID0 local "
                          "NVMe / local SSD where the machine has it): Mountpoint's emptyDir cache, GCS FUSE's file "
                          "cache. Default: no cache (every epoch reads the bucket again).")


def parse_uri(uri: str) -> tuple[str, str, str]:
    """(scheme, bucket, prefix): s3://b/a/b/ -> ("s3", "b", "a/b"); no prefix -> ""."""
    scheme, rest = uri.split("://", 1)
    bucket, _, prefix = rest.partition("/")
    return scheme, bucket, prefix.strip("/")


def within(prefix: str, granted: str) -> bool:
    """Whether objects under `prefix` lie under the granted prefix ("" grants the whole bucket)."""
    return not granted or prefix == granted or prefix.startswith(granted + "/")


def identity_problems(cloud: str, kubernetes: Any, storage_names: set[str]) -> list[Problem]:
    """Every problem of `kubernetes.service_accounts` and `kubernetes.datasets` (spec `kubernetes`,
    the spec's filesystem names: their claims and volumes share the datasets' name space)."""
    namespaces = [kubernetes.namespace, *(t.name for t in kubernetes.teams)]
    scheme = SCHEMES[cloud]
    problems: list[Problem] = []
    accounts: dict[tuple[str, str], Any] = {}
    for i, sa in enumerate(kubernetes.service_accounts):
        at = f"kubernetes.service_accounts[{i}]"
        ns = sa.namespace or kubernetes.namespace
        if ns not in namespaces:
            problems.append(Problem(f"{at}.namespace", ns, f"kubernetes.namespace or a team's: {', '.join(namespaces)}",
                                    close_match(ns, namespaces)))
        if sa.name == "default":
            problems.append(Problem(f"{at}.name", sa.name, "a name of its own: every pod of the namespace runs as "
                                    "`default` unless it names another, so its identity would reach every pod"))
        if (ns, sa.name) in accounts:
            problems.append(Problem(f"{at}.name", sa.name, f"a name not used twice in namespace {ns}"))
        accounts.setdefault((ns, sa.name), sa)
        buckets: set[str] = set()
        for j, grant in enumerate(sa.buckets):
            where = f"{at}.buckets[{j}].uri"
            problems += _uri_problems(where, grant.uri, scheme)
            _, bucket, prefix = parse_uri(grant.uri)
            if cloud == "gcp" and prefix:
                problems.append(Problem(where, grant.uri, f"gs://{bucket}: GCS grants roles on a whole bucket; "
                                        "keep data an account must not reach in a bucket of its own"))
            if bucket in buckets:
                problems.append(Problem(where, grant.uri, f"one entry per bucket (bucket {bucket} is named twice)"))
            buckets.add(bucket)
    seen: set[str] = set()
    for i, ds in enumerate(kubernetes.datasets):
        at = f"kubernetes.datasets[{i}]"
        ns = ds.namespace or kubernetes.namespace
        if ns not in namespaces:
            problems.append(Problem(f"{at}.namespace", ns, f"kubernetes.namespace or a team's: {', '.join(namespaces)}",
                                    close_match(ns, namespaces)))
        if ds.name in seen or ds.name in storage_names:
            problems.append(Problem(f"{at}.name", ds.name, "a name no other dataset or filesystem (storage) has: "
                                    "each is a claim and a cluster-wide PersistentVolume"))
        seen.add(ds.name)
        uri_problems = _uri_problems(f"{at}.uri", ds.uri, scheme)
        problems += uri_problems
        sa = accounts.get((ns, ds.service_account))
        if sa is None:
            names = [name for (space, name) in accounts if space == ns]
            problems.append(Problem(f"{at}.service_account", ds.service_account,
                                    f"a service account of kubernetes.service_accounts in namespace {ns}"
                                    + (f": {', '.join(names)}" if names else " (none is declared there)"),
                                    close_match(ds.service_account, names)))
        elif not uri_problems and not _grants_read(sa, ds.uri):
            problems.append(Problem(f"{at}.uri", ds.uri, f"a bucket and prefix that service account "
                                    f"{ds.service_account} is granted (its buckets: "
                                    f"{', '.join(g.uri for g in sa.buckets)})"))
    return problems


def _uri_problems(where: str, uri: str, scheme: str) -> list[Problem]:
    if parse_uri(uri)[0] == scheme:
        return []
    return [Problem(where, uri, f"a {scheme}:// bucket: this cloud's object store",
                    f"{scheme}://{uri.split('://', 1)[1]}")]


def _grants_read(sa: Any, uri: str) -> bool:
    _, bucket, prefix = parse_uri(uri)
    for grant in sa.buckets:
        _, granted_bucket, granted_prefix = parse_uri(grant.uri)
        if granted_bucket == bucket and within(prefix, granted_prefix):
            return True
    return False


__all__ = ["BucketGrantSpec", "DatasetSpec", "ServiceAccountSpec", "identity_problems", "parse_uri", "within",
           "SCHEMES"]
