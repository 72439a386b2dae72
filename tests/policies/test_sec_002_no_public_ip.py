"""AIC-SEC-002 no-public-ip-on-compute, over hand-written stacks."""
from __future__ import annotations

import pulumi_gcp as gcp

from tests.support import handwritten as hw

RULE = "AIC-SEC-002"


def test_private_compute_passes_and_a_public_head_is_not_judged():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg)
        hw.instance("head", subnet, sg, instance_type="m7i.xlarge", public=True,
                    tags={**hw.TAGS, "aicluster-role": "head"})
    assert hw.check(RULE, program).status == "pass"


def test_public_ip_on_a_launch_template_interface_fails():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, public="true")
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "networkInterfaces[0] (card 0)" in hw.messages(verdict)


def test_public_gpu_instance_fails_even_without_tags():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("gpu", subnet, sg, public=True, tags={})
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "associatePublicIpAddress" in hw.messages(verdict)


def test_gcp_access_config_and_tpu_external_ips_fail():
    def program():
        _, sub = hw.gcp_network()
        hw.gce_instance("a3", sub, public=True)
        gcp.tpu.V2Vm("slice", zone="us-central2-b", runtime_version="tpu-ubuntu2204-base", accelerator_type="v5p-8",
                     network_config=gcp.tpu.V2VmNetworkConfigArgs(enable_external_ips=True))
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "networkInterfaces[0].accessConfigs" in text and "networkConfig.enableExternalIps" in text
