"""AIC-MEM-001 training-state-fits, over hand-written stacks."""
from __future__ import annotations

import pulumi_gcp as gcp

from tests.support import handwritten as hw

RULE = "AIC-MEM-001"


def test_70b_fits_on_16_p5():
    # 1120 GB of training state vs 0.8 x 128 x 80 GiB = 8796 GB
    assert hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70)).status == "pass"


def test_70b_on_one_p5_fails_with_the_numbers():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("node", subnet, sg, tags={**hw.TAGS, "aicluster-model-params-b": "70"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "70B parameters (tag on p5.48xlarge@no-placement-group) on 1 x p5.48xlarge = 8 GPUs with 640 GiB HBM" in text
    assert "training state 1120 GB (16 B/param) exceeds 550 GB" in text
    assert "needs >= 1304 GiB HBM" in text


def test_model_size_and_headroom_from_the_policy_config():
    program = lambda: hw.efa_cluster(nodes=2)   # noqa: E731 - 16 x H100 = 1280 GiB
    assert hw.check(RULE, program).status == "n/a"
    assert hw.check(RULE, program, {"modelParamsB": 40}).status == "pass"        # 640 GB <= 1100 GB
    verdict = hw.check(RULE, program, {"modelParamsB": 40, "memoryHeadroomPct": 60})
    assert verdict.status == "fail" and "the 40 % of HBM left" in hw.messages(verdict)


def test_tpu_slices_count_their_chips():
    def program(accelerator: str):
        def run():
            gcp.tpu.V2Vm("slice", zone="us-central2-b", runtime_version="tpu-ubuntu2204-base",
                         accelerator_type=accelerator, labels={"aicluster-model-params-b": "70"})
        return run
    # v5p-128 = 64 chips x 95 GiB = 6080 GiB: fits; v5litepod-16 = 16 x 16 GiB = 256 GiB: does not
    assert hw.check(RULE, program("v5p-128")).status == "pass"
    verdict = hw.check(RULE, program("v5litepod-16"))
    assert verdict.status == "fail" and "16 accelerators with 256 GiB HBM" in hw.messages(verdict)


def test_gke_tpu_node_pool_sized_by_its_topology():
    def program(topology: str):
        def run():
            gcp.container.NodePool(
                "v5p", cluster="c", location="us-east5-a",
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type="ct5p-hightpu-4t", resource_labels={"aicluster-model-params-b": "405"}),
                placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=topology))
        return run
    # 405B x 16 B = 6480 GB; 4x4x4 = 64 chips x 95 GiB x 0.8 = 5222 GB: no; 4x4x8 = 128 chips: 10445 GB: yes
    verdict = hw.check(RULE, program("4x4x4"))
    assert verdict.status == "fail" and "405B parameters (tag on v5p) on 16 x ct5p-hightpu-4t" in hw.messages(verdict)
    assert "64 accelerators with 6,080 GiB HBM" in hw.messages(verdict)
    assert hw.check(RULE, program("4x4x8")).status == "pass"
