"""AIC-CMP-002 head-node-sized, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-CMP-002"
HEAD = {**hw.TAGS, "aicluster-role": "head"}


def _cluster(head_type: str, nodes: int):
    def program():
        hw.efa_cluster(nodes=nodes)
        _, subnet, sg = hw.network("ctl")
        hw.instance("head", subnet, sg, instance_type=head_type, tags=HEAD)
    return program


def test_a_big_enough_head_passes():
    assert hw.check(RULE, _cluster("m7i.xlarge", 16)).status == "pass"
    assert hw.check(RULE, _cluster("m7i.4xlarge", 1000)).status == "pass"


def test_an_undersized_head_warns_with_the_numbers():
    verdict = hw.check(RULE, _cluster("m7i.xlarge", 512))
    assert verdict.status == "warn"       # advisory by default
    assert "m7i.xlarge has 4 vCPU / 16 GiB; 512 compute nodes (up to 1024) need >= 16 vCPU / 64 GiB" \
        in hw.messages(verdict)


def test_thresholds_and_unknown_types_come_from_the_config():
    program = _cluster("c7i.2xlarge", 16)
    verdict = hw.check(RULE, program)
    assert verdict.status == "warn" and "not in the catalog" in hw.messages(verdict)
    config = {"instanceTypes": {"c7i.2xlarge": {"vcpu": 8, "memoryGib": 16}},
              "sizing": [{"maxNodes": 100000, "minVcpu": 8, "minMemoryGib": 32}], "enforcementLevel": "mandatory"}
    verdict = hw.check(RULE, program, config)
    assert verdict.status == "fail" and "need >= 8 vCPU / 32 GiB" in hw.messages(verdict)


def test_without_a_head_node_it_is_not_applicable():
    assert hw.check(RULE, lambda: hw.efa_cluster()).status == "n/a"
