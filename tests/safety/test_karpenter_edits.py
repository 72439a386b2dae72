"""Edits that change a pool's Karpenter NodePool never replace its node group, the control plane or
a filesystem (issue 16, safety). The NodePool appears when min_nodes drops below max_nodes, and
its limits follow max_nodes; the node group only changes its sizes, which EKS updates in place."""
from __future__ import annotations

import pytest

from tests.support.replacement import differences
from tests.support.stack_plans import plan_with_spec, stack_spec_data

STACK = "aws-p5-eks"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
# aws.eks.NodeGroup inputs whose change replaces the group (the provider's ForceNew arguments; the
# scaling, labels, taints, update and version arguments update in place).
FORCES_NEW = ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes", "nodeGroupName",
              "nodeRoleArn", "remoteAccess", "subnetIds")


def _spec(**pool) -> dict:
    spec = stack_spec_data(STACK)
    spec["pools"][0].update(pool)
    return spec


EDITS = {
    "scale-from-zero": (_spec(), _spec(min_nodes=0)),                        # the NodePool appears
    "nodepool-limit-up": (_spec(min_nodes=0), _spec(min_nodes=0, max_nodes=32)),
    "nodepool-limit-down": (_spec(min_nodes=0), _spec(min_nodes=0, max_nodes=8)),
    "floor-up": (_spec(min_nodes=0), _spec(min_nodes=4)),                   # fewer NodePool nodes
    "fixed-again": (_spec(min_nodes=0), _spec()),                            # the NodePool goes
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_nodepool_edit_keeps_the_node_group_and_the_control_plane(edit):
    before_spec, after_spec = EDITS[edit]
    before, after = plan_with_spec(STACK, before_spec), plan_with_spec(STACK, after_spec)
    nodepools = {bool(before.of_type(NODEPOOL)), bool(after.of_type(NODEPOOL))}
    assert True in nodepools, "the edit must involve a NodePool"
    (old,) = [g for g in before.of_type(NODE_GROUP) if g.inputs["nodeGroupName"] == "p5-eks-gpu"]
    new = {r.urn: r for r in after.resources}.get(old.urn)
    assert new is not None, f"{edit}: the node group {old.name} is gone"
    changed = [k for k in FORCES_NEW if old.inputs.get(k) != new.inputs.get(k)]
    assert not changed, f"{edit}: node group inputs that replace it changed: {changed}"
    assert old.inputs["launchTemplate"]["id"] == new.inputs["launchTemplate"]["id"]
    # The control plane and the filesystem (every stateful resource) are untouched.
    assert differences(before, after, allow_tags=False) == []

