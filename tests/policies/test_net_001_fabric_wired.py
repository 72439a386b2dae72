"""AIC-NET-001 fabric-fully-wired, over hand-written stacks."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw

RULE = "AIC-NET-001"


@pytest.mark.parametrize("layout", ["efa-only", "efa"])
def test_passes_when_every_efa_card_carries_a_device(layout):
    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group()
        lt = hw.launch_template("lt", subnet, sg, layout=layout, placement_group=pg)
        hw.autoscaling_group("asg", lt, subnet, max_size=4, placement=pg)
    verdict = hw.check(RULE, program)
    assert verdict.status == "pass", hw.messages(verdict)


def test_fails_a_multi_node_p5_pool_without_efa():
    def program():
        _, subnet, sg = hw.network()
        lt = hw.launch_template("lt", subnet, sg, layout="ena")
        hw.autoscaling_group("asg", lt, subnet, max_size=4)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "0 of 32 EFA devices wired" in text and "0 Gbps per GPU" in text and "card(s) 0-31" in text


def test_fails_a_partly_wired_old_layout_with_the_numbers():
    def program():
        _, subnet, sg = hw.network()
        lt = hw.launch_template("lt", subnet, sg, layout="efa", cards=8, tags={**hw.TAGS, "aicluster-max-nodes": "8"})
        del lt
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "8 of 32 EFA devices wired (all-efa layout) = 100 Gbps per GPU, 25% of p5.48xlarge's 3200 Gbps" in text
    assert "card(s) 8-31" in text


def test_instances_with_efa_network_interfaces_count_per_card():
    import pulumi_aws as aws

    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group()
        for i in range(2):
            enis = [aws.ec2.NetworkInterface(f"n{i}-efa{c}", subnet_id=subnet.id, security_groups=[sg.id],
                                             interface_type="efa", tags=hw.TAGS) for c in range(4)]
            aws.ec2.Instance(
                f"node{i}", ami="ami-0123456789abcdef0", instance_type="p4d.24xlarge", placement_group=pg.name,
                network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(network_interface_id=e.id, device_index=c,
                                                                         network_card_index=c)
                                    for c, e in enumerate(enis)],
                tags={**hw.TAGS, "aicluster-pool": "a100"})
    assert hw.check(RULE, program).status == "pass"


def test_single_node_pools_are_not_judged():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, layout="ena", tags={**hw.TAGS, "aicluster-max-nodes": "1"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "n/a"


def test_node_count_from_the_policy_config_when_the_stack_has_none():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("gpu-lt", subnet, sg, layout="ena")
    assert hw.check(RULE, program).status == "n/a"          # size unknown: not judged
    verdict = hw.check(RULE, program, {"poolNodes": {"gpu-*": 16}})
    assert verdict.status == "fail" and "(16 x p5.48xlarge)" in hw.messages(verdict)


def test_gcp_a3_mega_needs_its_eight_gpu_nics():
    def program():
        _, sub = hw.gcp_network()
        policy = hw.compact_policy()
        for i in range(2):
            hw.gce_instance(f"a3-{i}", sub, gpu_nics=8 if i == 0 else 2, policy=policy)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert "2 of 8 GPU NICs wired" in hw.messages(verdict) and "25% of a3-megagpu-8g's 1600 Gbps" in hw.messages(verdict)


def test_gke_node_pool_counts_additional_node_networks():
    import pulumi_gcp as gcp

    def program(networks: int):
        gcp.container.NodePool(
            "a3u", cluster="projects/p/locations/us-central1/clusters/c", location="us-central1",
            node_locations=["us-central1-b"], node_count=4,
            node_config=gcp.container.NodePoolNodeConfigArgs(machine_type="a3-ultragpu-8g"),
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT"),
            network_config=gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=[
                gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=f"n{i}", subnetwork=f"s{i}")
                for i in range(networks)]))
    assert hw.check(RULE, lambda: program(9)).status == "pass"        # 1 + 9 NICs: 2 gVNIC + 8 MRDMA
    verdict = hw.check(RULE, lambda: program(1))
    assert verdict.status == "fail" and "0 of 8 GPU NICs" in hw.messages(verdict)


def test_eks_node_groups_with_and_without_an_efa_launch_template():
    import pulumi_aws as aws

    def program(with_template: bool):
        def run():
            _, subnet, sg = hw.network()
            pg = hw.placement_group()
            template = hw.launch_template("efa-lt", subnet, sg, placement_group=pg) if with_template else None
            aws.eks.NodeGroup(
                "gpus", cluster_name="c", node_role_arn="arn:aws:iam::123456789012:role/n", subnet_ids=[subnet.id],
                instance_types=None if with_template else ["p5.48xlarge"],
                launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version="1") if template else None,
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=4, max_size=4, min_size=0))
        return run
    assert hw.check(RULE, program(True)).status == "pass"
    verdict = hw.check(RULE, program(False))
    assert verdict.status == "fail" and "pool gpus (4 x p5.48xlarge): 0 of 32 EFA devices" in hw.messages(verdict)
