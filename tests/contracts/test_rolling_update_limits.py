"""The managed node pools' rolling-update settings, from pools[].max_unavailable, within what the
clouds take (issue 26, item 4):

- EKS managed node group update_config MaxUnavailable: "Minimum: 1", "The maximum number is 100"
  (AWS CloudFormation User Guide, AWS::EKS::Nodegroup UpdateConfig,
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-eks-nodegroup-updateconfig.html;
  "The maximum unavailable has a quota of 100 nodes. The default value is one node.",
  https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html, Setup phase).
  MaxUnavailablePercentage (1..100) is never set: aicluster gives nodes.
- GKE surge upgrade: maxSurge new nodes first, maxUnavailable 0; "(maxUnavailable + maxSurge)
  determines the level of parallelism" and not both may be 0 (Kubernetes Engine API,
  NodePool.UpgradeSettings; https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies).
"""
from __future__ import annotations

import copy
import dataclasses

import pytest

from aicluster.aws.eks_nodes import UPDATE_MAX_UNAVAILABLE, update_max_unavailable
from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_spec_data

EKS_MAX_UNAVAILABLE = (1, 100)
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_POOL = "gcp:container/nodePool:NodePool"
EKS_STACKS = [s for s in STACK_NAMES if stack_spec_data(s)["cloud"] == "aws"
              and stack_spec_data(s).get("scheduler") == "kubernetes"]
GKE_STACKS = [s for s in STACK_NAMES if stack_spec_data(s)["cloud"] == "gcp"
              and stack_spec_data(s).get("scheduler") == "kubernetes"]


def with_budget(stack: str, budget) -> dict:
    spec = copy.deepcopy(stack_spec_data(stack))
    for pool in spec["pools"]:
        pool["max_unavailable"] = budget
    return spec


def test_the_eks_cap_is_the_documented_one():
    assert UPDATE_MAX_UNAVAILABLE == EKS_MAX_UNAVAILABLE[1]


@pytest.mark.parametrize("stack", EKS_STACKS)
@pytest.mark.parametrize("budget", [1, 2, "100%"])
def test_every_gpu_node_group_updates_its_pools_budget_at_a_time(stack, budget):
    spec = with_budget(stack, budget)
    design = design_cluster(parse_spec(spec))
    plan = plan_with_spec(stack, spec)
    for group in plan.resources:
        if group.type != NODE_GROUP or group.inputs["nodeGroupName"].endswith("-system"):
            continue
        pool = next(p for p in design.pools if group.inputs["nodeGroupName"] == f"{design.name}-{p.name}")
        value = group.inputs["updateConfig"]["maxUnavailable"]
        assert value == min(pool.max_unavailable, 100), (group.name, value, pool.max_unavailable)
        assert EKS_MAX_UNAVAILABLE[0] <= value <= EKS_MAX_UNAVAILABLE[1]
        assert "maxUnavailablePercentage" not in group.inputs["updateConfig"]


def test_a_budget_past_the_eks_quota_is_capped():
    design = design_cluster(parse_spec(with_budget(EKS_STACKS[0], "100%")))
    kpool = design.kubernetes.pools[0]
    assert update_max_unavailable(dataclasses.replace(kpool, max_unavailable=500)) == 100
    assert update_max_unavailable(dataclasses.replace(kpool, max_unavailable=0)) == 1


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_every_gpu_node_pool_surges_its_pools_budget_and_takes_none_down_first(stack):
    spec = with_budget(stack, 2)
    plan = plan_with_spec(stack, spec)
    pools = [p for p in plan.resources if p.type == NODE_POOL and "upgradeSettings" in p.inputs
             and p.inputs["upgradeSettings"].get("strategy") == "SURGE"]
    if not pools:
        pytest.skip(f"{stack} has no GPU node pool")
    for pool in pools:
        settings = pool.inputs["upgradeSettings"]
        assert settings["maxUnavailable"] == 0 and settings["maxSurge"] == 2, (pool.name, settings)
