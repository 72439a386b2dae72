"""AIC-CMP-001 one-instance-type-per-pool, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws

from tests.support import handwritten as hw

RULE = "AIC-CMP-001"


def test_one_type_passes():
    assert hw.check(RULE, lambda: hw.efa_cluster()).status == "pass"


def test_mixed_instances_autoscaling_group_fails():
    def program():
        _, subnet, sg = hw.network()
        lt = hw.launch_template("lt", subnet, sg)
        hw.autoscaling_group("asg", lt, subnet, max_size=8, overrides=["p5.48xlarge", "p4d.24xlarge"])
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert "pool lt: 2 instance types (p4d.24xlarge, p5.48xlarge)" in hw.messages(verdict)


def test_node_group_with_several_types_fails():
    def program():
        _, subnet, _ = hw.network()
        aws.eks.NodeGroup("gpus", cluster_name="c", node_role_arn="arn:aws:iam::123456789012:role/n",
                          subnet_ids=[subnet.id], instance_types=["p5.48xlarge", "p5en.48xlarge"],
                          scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=2, max_size=4, min_size=0))
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "(p5.48xlarge, p5en.48xlarge)" in hw.messages(verdict)


def test_same_pool_instances_of_different_types_fail():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("a", subnet, sg, tags={**hw.TAGS, "aicluster-pool": "gpu"})
        hw.instance("b", subnet, sg, instance_type="p4de.24xlarge", tags={**hw.TAGS, "aicluster-pool": "gpu"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "pool gpu: 2 instance types" in hw.messages(verdict)


def test_no_accelerators_is_not_applicable():
    assert hw.check(RULE, lambda: hw.network()).status == "n/a"
