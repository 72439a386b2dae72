"""What every GCP component shares: labels as GCP accepts them, names within GCP's limits, and the
project the stack deploys into."""
from __future__ import annotations

import hashlib
import re

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import Cluster
from aicluster.design.parts import PoolDesign
from aicluster.errors import Problem, SpecError

# Labels: keys start with a lowercase letter; keys and values hold lowercase letters, digits, `_`
# and `-`, at most 63 characters (cloud.google.com/compute/docs/labeling-resources).
_LABEL_BAD = re.compile(r"[^a-z0-9_-]")
CLUSTER_LABEL = "aicluster-cluster"
POOL_LABEL = "aicluster-pool"


def label_value(value: str) -> str:
    return _LABEL_BAD.sub("-", value.lower())[:63]


def label_key(key: str) -> str:
    key = label_value(key)
    return key if key[:1].isalpha() else f"x-{key}"[:63]


def labels(design: Cluster, role: str, pool: str | None = None) -> dict[str, str]:
    """The cluster's labels (ClusterDesign.labels) in GCP's alphabet: user tags lower-cased, `.` and other
    characters GCP refuses turned into `-`."""
    return {label_key(k): label_value(v) for k, v in design.labels(role, pool).items()}


def pool_labels(cluster: Cluster, pool: PoolDesign) -> dict[str, str]:
    """The pool facts the policy pack reads off the instance template (ClusterContext.pool_facts,
    as the AWS launch-template tags) and the zone its nodes launch in: templates are global, the
    resume program creates the nodes in the cluster's zone. Label values take no `.`: 7.5 is
    written 7_5, which the pack reads back as 7.5."""
    facts = {**cluster.pool_facts(pool), "aicluster-zone": cluster.zone}
    return {k: v.replace(".", "_") for k, v in facts.items()}


def node_tag(design: Cluster) -> str:
    """The network tag of every node of the cluster (head and compute): firewall rules target it."""
    return f"{design.name}-node"


def head_tag(design: Cluster) -> str:
    """The network tag of the head node: the SSH rule from network.ssh_ingress_cidrs targets it."""
    return f"{design.name}-head"


def short_name(text: str, limit: int) -> str:
    """`text` if it fits, else its head plus a digest of the whole, so two long names stay distinct."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return f"{text[:limit - 7].rstrip('-')}-{digest}"


def project() -> str:
    """The stack's `gcp:project`: what every project-scoped name (network profiles, IAM conditions,
    the power programs' API calls) is written with."""
    value = pulumi.Config("gcp").get("project")
    if not value:
        raise SpecError([Problem("gcp:project", None, "the stack config key gcp:project (the project to "
                                                      "deploy into), next to aicluster:cluster")],
                        subject="stack config")
    return value


# Every GKE node (system and pool): no legacy metadata server endpoints.
LEGACY_METADATA = {"disable-legacy-endpoints": "true"}


def node_metadata() -> dict[str, str]:
    return dict(LEGACY_METADATA)


def objects_under(bucket: str, prefix: str) -> str:
    """CEL: the bucket's objects whose names start with `prefix` (Cloud Storage resource names in IAM
    conditions, https://cloud.google.com/storage/docs/access-control/iam#conditions)."""
    return f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")'


def grant_objects_under(name: str, bucket, prefix: str, role: str, member, title: str, description: str,
                        opts: pulumi.ResourceOptions) -> gcp.storage.BucketIAMMember:
    """`role` on the bucket's objects under `prefix` only, for `member` (an IAM condition)."""
    return gcp.storage.BucketIAMMember(
        name, bucket=bucket, role=role, member=member,
        condition=gcp.storage.BucketIAMMemberConditionArgs(
            title=title, description=description,
            expression=pulumi.Output.from_input(bucket).apply(lambda b: objects_under(b, prefix))),
        opts=opts)
