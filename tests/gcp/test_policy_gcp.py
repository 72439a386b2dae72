"""The policy pack over GCP: the example stacks pass, and the pack still catches what it must on
hand-written GCP instance templates (a missing MRDMA NIC, no compact placement, a filesystem in
another zone than the zone the template's `aicluster-zone` label names)."""
from __future__ import annotations


import pulumi_gcp as gcp
import pytest

from aicluster.commands.check import verdicts_for_plan
from tests.support.stack_plans import stack_result

from tests.support import handwritten as hw

GCP_STACKS = ["gcp-a3mega-slurm", "gcp-a3ultra-slurm"]


@pytest.mark.parametrize("stack", GCP_STACKS)
def test_example_stacks_pass_the_pack(stack):
    verdicts = {v.rule_id: v for v in verdicts_for_plan(stack_result(stack).plan)}
    assert [r for r, v in verdicts.items() if v.status in ("fail", "warn")] == []
    # The stacks describe their model: AIC-STO-006 judges storage in AIC-STO-002's place.
    for rule in ("AIC-NET-001", "AIC-NET-002", "AIC-NET-004", "AIC-NET-005", "AIC-STO-001", "AIC-STO-006",
                 "AIC-STO-004", "AIC-STO-005", "AIC-MEM-001", "AIC-MEM-002", "AIC-CMP-002", "AIC-SEC-002",
                 "AIC-SEC-004", "AIC-SEC-005", "AIC-CST-001"):
        assert verdicts[rule].status == "pass", (rule, verdicts[rule].not_applicable)


def a3u_template(sub, *, mrdma: int = 8, zone: str | None = "us-central1-a", policy=None, max_nodes: int = 4):
    labels = {"aicluster-cluster": "hw", "aicluster-role": "compute", "aicluster-pool": "h200",
              "aicluster-max-nodes": str(max_nodes)}
    if zone:
        labels["aicluster-zone"] = zone
    nics = [gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=sub.id, nic_type="GVNIC") for _ in range(2)]
    nics += [gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=sub.id, nic_type="MRDMA") for _ in range(mrdma)]
    return gcp.compute.InstanceTemplate(
        "a3u", machine_type="a3-ultragpu-8g", labels=labels, network_interfaces=nics,
        disks=[gcp.compute.InstanceTemplateDiskArgs(boot=True, source_image="projects/p/global/images/family/x")],
        resource_policies=policy.self_link if policy is not None else None)


def lustre(net, zone):
    gcp.lustre.Instance("lustre", capacity_gib="18000", per_unit_storage_throughput="1000", filesystem="fs",
                        instance_id="lustre", location=zone, network=net.id)


def test_zone_label_puts_a_template_pool_in_its_zone():
    def same_zone():
        net, sub = hw.gcp_network()
        a3u_template(sub, policy=hw.compact_policy())
        lustre(net, "us-central1-a")

    def other_zone():
        net, sub = hw.gcp_network()
        a3u_template(sub, policy=hw.compact_policy())
        lustre(net, "us-central1-b")

    def no_label():
        net, sub = hw.gcp_network()
        a3u_template(sub, policy=hw.compact_policy(), zone=None)
        lustre(net, "us-central1-b")

    assert hw.check("AIC-NET-004", same_zone).status == "pass"
    verdict = hw.check("AIC-NET-004", other_zone)
    assert verdict.status == "fail" and "us-central1-a, us-central1-b" in hw.messages(verdict)
    assert hw.check("AIC-NET-004", no_label).status == "n/a"       # a global template alone has no zone


def test_a_template_missing_mrdma_nics_fails_and_one_without_placement_fails():
    def short():
        net, sub = hw.gcp_network()
        a3u_template(sub, mrdma=4, policy=hw.compact_policy())

    def loose():
        net, sub = hw.gcp_network()
        a3u_template(sub, policy=None)

    verdict = hw.check("AIC-NET-001", short)
    assert verdict.status == "fail" and "4 of 8 GPU NICs" in hw.messages(verdict)
    assert hw.check("AIC-NET-002", loose).status == "fail"
