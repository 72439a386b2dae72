"""AIC-MEM-002 layout-fits-hbm, over hand-written stacks with a described workload."""
from __future__ import annotations

import pulumi_gcp as gcp

from tests.support import handwritten as hw
from tests.support import workloads as wl

RULE = "AIC-MEM-002"


def test_70b_on_16_p5_passes():
    assert hw.check(RULE, lambda: wl.cluster(nodes=16)).status == "pass"


def test_405b_on_2_nodes_fails_no_layout_runs():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=2, lt_tags=wl.tags(wl.LLAMA3_405B)))
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "2 x p5.48xlarge (16 H100): 405.8B parameters (tags on hw-lt): no layout runs" in text
    assert "80 GiB" in text            # what each GPU has (the training model words the rest)


def test_70b_on_2_nodes_fits_tightly_and_fails_a_larger_headroom():
    # The best layout that fits (ZeRO-3, full recompute) leaves about 7 % of 80 GiB free.
    assert hw.check(RULE, lambda: wl.cluster(nodes=2)).status == "pass"
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=2), {"minHeadroomPct": 30})
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "no layout leaves 30 % of HBM free; the best that fits (tp " in text and "of 80.0 GiB per accelerator" in text


def test_headroom_from_the_config_fails_a_cluster_that_passes_by_default():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16), {"minHeadroomPct": 90})
    assert verdict.status == "fail" and "no layout leaves 90 % of HBM free" in hw.messages(verdict)


def test_model_params_b_alone_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=2, model_b=405))
    assert verdict.status == "n/a" and "model_params_b only" in verdict.not_applicable
    assert hw.check("AIC-MEM-001", lambda: hw.efa_cluster(nodes=2, model_b=405)).status == "fail"   # judged there


def test_a_malformed_tag_is_not_applicable_with_the_reason():
    bad = {**wl.tags(), "aicluster-model": "l80h8192-swiglu"}
    verdict = hw.check(RULE, lambda: wl.cluster(lt_tags=bad))
    assert verdict.status == "n/a" and "malformed workload tag" in verdict.not_applicable
    assert "lacks heads" in verdict.not_applicable


def test_no_workload_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster())
    assert verdict.status == "n/a" and "no described workload" in verdict.not_applicable


def test_tpu_slices_are_one_ici_domain_of_all_their_chips():
    def program(accelerator: str):
        def run():
            gcp.tpu.V2Vm("slice", zone="us-central2-b", runtime_version="tpu-ubuntu2204-base",
                         accelerator_type=accelerator, labels=wl.tags())
        return run
    # v5p-128 = 64 chips x 95 GiB: 70B fits; v5litepod-16 = 16 chips x 16 GiB = 256 GiB: nothing does
    assert hw.check(RULE, program("v5p-128")).status == "pass"
    verdict = hw.check(RULE, program("v5litepod-16"))
    assert verdict.status == "fail"
    assert "TPU v5e 16-chip slice (16 TPU v5e): 70.6B parameters (tags on slice): no layout runs" in hw.messages(verdict)
