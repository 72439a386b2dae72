"""What every GCP component shares: labels as GCP accepts them, names within GCP's limits, and the
project the stack deploys into."""
from __future__ import annotations

import hashlib
import re

import pulumi

from ..design import ClusterDesign, PoolDesign
from ..errors import Problem, SpecError

# Labels: keys start with a lowercase letter; keys and values hold lowercase letters, digits, `_`
# and `-`, at most 63 characters (cloud.google.com/compute/docs/labeling-resources).
_LABEL_BAD = re.compile(r"[^a-z0-9_-]")
NODE_LABEL = "aicluster-node"
CLUSTER_LABEL = "aicluster-cluster"
POOL_LABEL = "aicluster-pool"


def label_value(value: str) -> str:
    return _LABEL_BAD.sub("-", value.lower())[:63]


def label_key(key: str) -> str:
    key = label_value(key)
    return key if key[:1].isalpha() else f"x-{key}"[:63]


def labels(design: ClusterDesign, role: str, pool: str | None = None) -> dict[str, str]:
    """The cluster's labels (DESIGN.md) in GCP's alphabet: user tags lower-cased, `.` and other
    characters GCP refuses turned into `-`."""
    return {label_key(k): label_value(v) for k, v in design.labels(role, pool).items()}


def pool_labels(design: ClusterDesign, pool: PoolDesign) -> dict[str, str]:
    """Facts the policy pack reads off the instance template (as the AWS launch-template tags):
    the pool's size, the zone its nodes launch in, and the workload hints. Label values take no `.`: 7.5 is written 7_5, which the
    pack reads back as 7.5."""
    facts = {"aicluster-min-nodes": str(pool.min_nodes), "aicluster-max-nodes": str(pool.max_nodes),
             # Templates are global; the resume program creates the nodes in the cluster's zone.
             "aicluster-zone": design.zone}
    if design.workload:
        w = design.workload
        facts |= {"aicluster-model-params-b": f"{w.model_params_b:g}",
                  "aicluster-checkpoint-interval-min": f"{w.checkpoint_interval_min:g}",
                  "aicluster-max-checkpoint-stall-pct": f"{w.max_checkpoint_stall_pct:g}"}
    return {k: v.replace(".", "_") for k, v in facts.items()}


def node_tag(design: ClusterDesign) -> str:
    """The network tag of every node of the cluster (head and compute): firewall rules target it."""
    return f"{design.name}-node"


def head_tag(design: ClusterDesign) -> str:
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
