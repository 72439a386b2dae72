"""AIC-NET-002 fabric-placement, over hand-written stacks."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw

RULE = "AIC-NET-002"


def _pool(pg_strategy: str | None = None, *, on_asg: bool = False, **lt):
    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group(strategy=pg_strategy) if pg_strategy else None
        template = hw.launch_template("lt", subnet, sg, placement_group=None if on_asg else pg, **lt)
        hw.autoscaling_group("asg", template, subnet, max_size=8, placement=pg if on_asg else None)
    return program


@pytest.mark.parametrize("on_asg", [False, True])
def test_passes_in_a_cluster_placement_group(on_asg):
    assert hw.check(RULE, _pool("cluster", on_asg=on_asg)).status == "pass"


def test_fails_without_a_placement_group():
    verdict = hw.check(RULE, _pool())
    assert verdict.status == "fail"
    assert "8 EFA-capable nodes in no placement group" in hw.messages(verdict)


def test_fails_a_spread_placement_group():
    verdict = hw.check(RULE, _pool("spread"))
    assert verdict.status == "fail" and "with strategy spread" in hw.messages(verdict)


@pytest.mark.parametrize("lt", [{"reservation": "cr-0123456789abcdef0"},
                                {"market": "capacity-block", "reservation": "cr-0123456789abcdef0"}])
def test_a_reservation_or_capacity_block_provides_the_placement(lt):
    assert hw.check(RULE, _pool(**lt)).status == "pass"


def test_gcp_instances_need_a_collocated_resource_policy():
    def program(policy: bool):
        def run():
            _, sub = hw.gcp_network()
            pol = hw.compact_policy() if policy else None
            for i in range(2):
                hw.gce_instance(f"a3-{i}", sub, policy=pol)
        return run
    assert hw.check(RULE, program(True)).status == "pass"
    verdict = hw.check(RULE, program(False))
    assert verdict.status == "fail" and "compact placement" in hw.messages(verdict)


def test_gke_node_pool_needs_compact_placement():
    import pulumi_gcp as gcp

    def program(placement: str | None):
        def run():
            gcp.container.NodePool(
                "a3", cluster="c", location="us-central1-a", node_count=4,
                node_config=gcp.container.NodePoolNodeConfigArgs(machine_type="a3-megagpu-8g"),
                placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type=placement) if placement else None)
        return run
    assert hw.check(RULE, program("COMPACT")).status == "pass"
    assert hw.check(RULE, program(None)).status == "fail"


def test_a_single_node_or_non_fabric_pool_is_not_judged():
    def program():
        _, subnet, sg = hw.network()
        template = hw.launch_template("lt", subnet, sg, instance_type="g5.48xlarge", layout="ena")
        hw.autoscaling_group("asg", template, subnet, max_size=1)
    assert hw.check(RULE, program).status == "n/a"


def test_gcp_instance_template_sized_by_its_instance_group():
    import pulumi_gcp as gcp

    def program(collocated: bool):
        def run():
            _, sub = hw.gcp_network()
            policy = hw.compact_policy() if collocated else None
            template = gcp.compute.InstanceTemplate(
                "a3-template", machine_type="a3-megagpu-8g",
                disks=[gcp.compute.InstanceTemplateDiskArgs(source_image="debian-cloud/debian-12")],
                network_interfaces=[gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=sub.id)
                                    for _ in range(9)],
                resource_policies=policy.self_link if policy is not None else None)
            gcp.compute.InstanceGroupManager(
                "a3-group", base_instance_name="a3", zone="us-central1-a", target_size=4,
                versions=[gcp.compute.InstanceGroupManagerVersionArgs(instance_template=template.self_link_unique)])
        return run
    assert hw.check(RULE, program(True)).status == "pass"
    verdict = hw.check(RULE, program(False))
    assert verdict.status == "fail" and "pool a3-template (4 x a3-megagpu-8g)" in hw.messages(verdict)
