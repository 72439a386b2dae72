"""EKS node groups of capacity blocks start empty (issue 11).

EKS user guide, "Create a managed node group with Capacity Blocks for ML": a node group created
before its block is active cannot launch instances; create it with desired size 0 and scale it up
when the block starts (a scheduled action, update-nodegroup-config or an autoscaler). EKS scales it
back to 0 forty minutes before the block ends. Whoever scales it owns the desired size afterwards:
`pulumi up` ignores it (terraform-aws-eks: lifecycle ignore_changes scaling_config[0].desired_size).
"""
from __future__ import annotations

import copy

import pytest

from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, CR

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def block_spec(**pool) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    spec["pools"][0].update(capacity={"type": "capacity-block", "reservation_id": CR}, **pool)
    return spec


def gpu_group(plan):
    return plan.named("demo-gpu-eks-nodegroup", NODE_GROUP)


@pytest.fixture(scope="module")
def plan():
    from tests.support import run_spec

    return run_spec(block_spec())


def test_capacity_block_node_group_is_created_empty(plan):
    group = gpu_group(plan)
    assert group.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert group.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 16, "desiredSize": 0}


def test_the_node_group_component_starts_a_block_empty_whatever_its_pool_says():
    """EksNodeGroup used on its own (a user's program, no spec check): a block pool asking for 16
    always-on nodes still gets a node group of 0..16 created at 0. Before: 16..16 at 16."""
    import dataclasses

    import pulumi
    from aicluster.aws.eks_nodes import EksNodeGroup, EksNodeGroupArgs
    from aicluster.design.cluster import design_cluster
    from aicluster.offline.engine import run_program

    design = design_cluster(parse_spec(block_spec()))
    pool = dataclasses.replace(design.kubernetes.pool("gpu"), min_nodes=16)

    def program():
        EksNodeGroup("own-gpu", EksNodeGroupArgs(
            context=design.context, pool=pool, cluster_name="demo", node_role_arn="arn:aws:iam::123456789012:role/node",
            subnet_id="subnet-0123456789abcdef0", launch_template_id="lt-0123456789abcdef0",
            launch_template_version=pulumi.Output.from_input(1)))

    group = run_program(program, stack="own", config={"aws:region": "us-east-1"}).named(
        "own-gpu-nodegroup", NODE_GROUP)
    assert group.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 16, "desiredSize": 0}
    assert "scalingConfig.desiredSize" in group.ignore_changes


def test_pulumi_up_never_resets_the_desired_size(plan):
    assert "scalingConfig.desiredSize" in gpu_group(plan).ignore_changes


def test_other_capacity_types_start_at_min_nodes(plan_spec):
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    spec["pools"][0].update(min_nodes=4)
    assert gpu_group(plan_spec(spec)).inputs["scalingConfig"] == {"minSize": 4, "maxSize": 16, "desiredSize": 4}


def test_always_on_nodes_in_a_capacity_block_are_refused():
    with pytest.raises(SpecError) as info:
        parse_spec(block_spec(min_nodes=16))
    (p,) = info.value.problems
    assert p.path == "pools[0].min_nodes" and p.value == 16 and p.suggestion == "0"
    assert "capacity-block on EKS" in p.allowed and "scheduled action" in p.allowed


def test_plan_says_karpenter_fills_the_block():
    """Issue 16: the block's NodePool (capacity type reserved, the block's id) launches into it
    while it is active; nobody scales the node group by hand."""
    from aicluster.aws.eks_report import kubernetes_lines
    from aicluster.design.cluster import design_cluster

    text = "\n".join(kubernetes_lines(design_cluster(parse_spec(block_spec()))))
    assert "created with desired size 0" in text
    assert "Karpenter's NodePool gpu launches into the block while it is active" in text
    assert "update-nodegroup-config" not in text


def test_plan_says_how_to_scale_the_block_up():
    """Phase 1 of api_access private installs no Karpenter: the node group is scaled by hand."""
    from aicluster.aws.eks_report import kubernetes_lines
    from aicluster.design.cluster import design_cluster

    spec = block_spec()
    spec["kubernetes"] = {"api_access": "private"}
    lines = kubernetes_lines(design_cluster(parse_spec(spec)))
    text = "\n".join(lines)
    assert "created with desired size 0" in text
    assert "--nodegroup-name demo-gpu --scaling-config minSize=0,maxSize=16,desiredSize=16" in text
    assert "scheduled action" in text
