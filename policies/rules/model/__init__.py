"""The cluster as raw resources describe it: pools, filesystems and head nodes.

Stack rules build this model from `StackValidationArgs.resources` and hand its shapes to
`aicluster.design.balance` (the same model `aicluster plan` uses). Nothing here reads our spec: a pool is
whatever a hand-written stack would write too.

One small finder per resource source, per cloud; `build` only composes them, in this order:

AWS pools
  * aws_launch_templates: a launch template whose instance type (or whose launchers' types) is an
    accelerated type in the catalog; its nodes come from, in order: the policy config `poolNodes`,
    the template's `aicluster-max-nodes` tag, the autoscaling groups (maxSize), EKS node groups
    (scalingConfig.maxSize) and instances that launch from it (aws_launchers);
  * aws_scaling_groups: an autoscaling group or EKS node group with accelerated types and no
    template;
  * aws_instances: accelerated `aws:ec2/instance`s that use no template, grouped by their
    `aicluster-pool` tag, else by type and placement group (one instance = one node).
GCP pools
  * gcp_instance_templates: an instance template with an accelerated machine type, sized by the
    instance group managers that use it (targetSize), in the zones of those groups and of its
    `aicluster-zone` label;
  * gcp_instances: accelerated instances, grouped like AWS instances;
  * gke_node_pools: a GKE node pool (autoscaling max x zones, else nodeCount x zones); TPU node
    pools included;
  * tpu_vms: a Cloud TPU VM (`gcp:tpu/v2Vm`): one slice, its hosts are the nodes.
filesystems (FSx for Lustre, Managed Lustre, Filestore) and heads.

References between resources (a template's placement group, a filesystem's subnet) are resolved
by the Index: by matching ids, ARNs, self links and names, and otherwise through the engine's
property dependencies (they exist even when the referenced id is not known yet, during a preview).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from . import (aws_instances, aws_launch_templates, aws_scaling_groups, filesystems, gcp_instance_templates,
               gcp_instances, gke_node_pools, heads, tpu_vms)
from .aws_launchers import launchers
from .cluster import Cluster, Fabric, Filesystem, Placement, Pool
from .index import Index
from .kinds import SG


def _aws_pools(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    users = launchers(ix)
    claimed = {id(u) for group in users.values() for u in group}   # what launches from a template
    return (aws_launch_templates.find(ix, config, users) + aws_scaling_groups.find(ix, config, claimed)
            + aws_instances.find(ix, config, claimed))


def _gcp_pools(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    return (gcp_instance_templates.find(ix, config) + gcp_instances.find(ix, config)
            + gke_node_pools.find(ix, config) + tpu_vms.find(ix, config))


# The last few models built: every stack rule of a pack run builds the model of the same resources
# (fifteen times a plan), and building it was two fifths of the pack's time.
_BUILT: list[tuple[Sequence[Any], tuple[int, ...], str, Cluster]] = []
_REMEMBERED = 8


def build(resources: Sequence[Any], config: Mapping[str, Any] | None = None) -> Cluster:
    """The cluster the resources describe. Remembered for the same resource list (the same objects,
    held here so their ids stay theirs) and the same `poolNodes`, the only config a finder reads;
    rules only read the model."""
    config = config or {}
    members = tuple(map(id, resources))
    sizes = json.dumps(config.get("poolNodes"), sort_keys=True, default=str)
    for seen, seen_members, seen_sizes, built in _BUILT:
        if seen is resources and seen_members == members and seen_sizes == sizes:
            return built
    ix = Index(resources)
    built = Cluster(ix, _aws_pools(ix, config) + _gcp_pools(ix, config), filesystems.find(ix), heads.find(ix))
    _BUILT.insert(0, (resources, members, sizes, built))
    del _BUILT[_REMEMBERED:]
    return built


__all__ = ["Cluster", "Fabric", "Filesystem", "Index", "Placement", "Pool", "SG", "build"]
