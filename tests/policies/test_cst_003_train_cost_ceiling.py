"""AIC-CST-003 train-cost-ceiling, over hand-written stacks."""
from __future__ import annotations

import pulumi_gcp as gcp
import pytest

from tests.support import handwritten as hw
from tests.support import workloads as wl

RULE = "AIC-CST-003"
TO_15T = lambda: wl.cluster(nodes=16, lt_tags=wl.tags(training=wl.TO_15T))   # noqa: E731


def test_without_a_ceiling_it_is_off():
    verdict = hw.check(RULE, TO_15T)
    assert verdict.status == "n/a" and "no maxTrainUsd" in verdict.not_applicable


def test_passes_under_a_generous_ceiling():
    assert hw.check(RULE, TO_15T, {"maxTrainUsd": 1e9}).status == "pass"


def test_a_big_token_count_fails_a_low_ceiling_with_days_rate_and_mfu():
    verdict = hw.check(RULE, TO_15T, {"maxTrainUsd": 1e6})
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "16 x p5.48xlarge (128 H100): 70.6B parameters (tags on hw-lt): 1.5e+13 tokens at" in text
    assert "days at " in text and "% goodput (checkpoints and failures) x ($880.64/h accelerators + $" in text
    assert "/h standing = $" in text
    assert "> $1,000,000 ceiling" in text and "MFU" in text


def test_a_described_workload_without_tokens_is_not_applicable():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16), {"maxTrainUsd": 1e6})
    assert verdict.status == "n/a" and "training.tokens" in verdict.not_applicable


def test_model_params_b_alone_fails_by_six_p_d_at_the_assumed_mfu():
    # 6 x 70e9 x 15e12 = 6.3e24 FLOPs / (0.4 x 128 x 989 TFLOP/s) = 1,440 days x $880.64/h = $30.4M
    program = lambda: hw.efa_cluster(nodes=16, model_b=70)   # noqa: E731
    verdict = hw.check(RULE, program, {"maxTrainUsd": 1e6, "trainTokens": 15e12})
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "6 x 70B parameters (tag on hw-lt) x 1.5e+13 tokens = 6.3e+24 FLOPs at an assumed 40 % MFU" in text
    days = float(text.split("TFLOP/s = ")[1].split(" days")[0].replace(",", ""))
    assert days == pytest.approx(6.3e24 / (0.4 * 128 * 989e12) / 86400, rel=0.01)
    assert hw.check(RULE, program, {"maxTrainUsd": 1e9, "trainTokens": 15e12}).status == "pass"
    # a higher assumed MFU makes it cheaper: 2.5 x 40 % -> under a ceiling 40 % MFU misses
    cost = float(text.split("= $")[-1].split(" >")[0].replace(",", ""))
    assert hw.check(RULE, program, {"maxTrainUsd": cost * 0.5, "trainTokens": 15e12, "assumedMfu": 1.0}).status == "pass"


def test_model_params_b_without_train_tokens_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70), {"maxTrainUsd": 1e6})
    assert verdict.status == "n/a" and "trainTokens" in verdict.not_applicable


def test_the_pack_and_the_plan_price_training_the_same_on_the_default_stack():
    """The pack reads the stack's resources, the plan its design: both charge the accelerators and
    the standing cost over the days at goodput, so a ceiling just above the plan's figure passes
    and one just below fails."""
    from aicluster.commands.check import load_rules, resolve_config, run_policies
    from aicluster.commands.plan_report import plan_estimate
    from tests.support.stack_plans import stack_result

    result = stack_result("aws-p5-slurm")
    e = plan_estimate(result.design).estimate
    assert e.standing_usd_per_hour > 0 and e.train_cost_usd > e.compute_cost_usd

    def status(ceiling: float) -> str:
        config = resolve_config([r.POLICY for r in load_rules()], {RULE: {"maxTrainUsd": ceiling}})
        (v,) = [v for v in run_policies(result.plan, config) if v.rule.ID == RULE]
        return v.status

    assert status(e.train_cost_usd * 1.001) == "pass"
    assert status(e.train_cost_usd * 0.999) == "fail"


def _six_pd_cost(verdict) -> float:
    return float(hw.messages(verdict).split("= $")[-1].split(" >")[0].replace(",", ""))


def test_the_six_p_d_fallback_prices_a_spot_pool_at_its_regions_spot_figure():
    """As AIC-CST-002 prices it: 2 x p4d.24xlarge on Spot in us-east-1 at the region's median spot
    figure ($6.79 each), not the us-east-1 on-demand $21.96 the fallback charged before."""
    def program():
        _, subnet, sg = hw.network("hw")
        lt = hw.launch_template("hw-lt", subnet, sg, instance_type="p4d.24xlarge", market="spot",
                                tags={**hw.TAGS, "aicluster-model-params-b": "7"})
        hw.autoscaling_group("hw-asg", lt, subnet, max_size=2)
    verdict = hw.check(RULE, program, {"maxTrainUsd": 1, "trainTokens": 1e12})
    text = hw.messages(verdict)
    assert verdict.status == "fail" and "x $13.58/h (us-east-1 spot, median of 3 zone(s)" in text, text
    # 6 x 7e9 x 1e12 FLOPs at 40 % of 16 x 312 TFLOP/s, at 2 x $6.79/h
    hours = 6 * 7e9 * 1e12 / (0.4 * 16 * 312e12) / 3600
    assert _six_pd_cost(verdict) == pytest.approx(hours * 13.58, rel=0.01)


def test_the_six_p_d_fallback_prices_a_tpu_slice_by_its_chips_in_its_region():
    """A v5p-128 slice (64 chips) in europe-west4: $4.2525 per chip-hour there. Before, the fallback
    looked for a reference price of the host type and found none: every TPU stack failed."""
    def program():
        gcp.tpu.V2Vm("slice", zone="europe-west4-b", runtime_version="tpu-ubuntu2204-base",
                     accelerator_type="v5p-128", labels={"aicluster-model-params-b": "70"})
    verdict = hw.check(RULE, program, {"maxTrainUsd": 1, "trainTokens": 1e12})
    text = hw.messages(verdict)
    assert verdict.status == "fail" and "europe-west4" in text and "no catalog price" not in text, text
    per_hour = float(text.split("days x $")[1].split("/h")[0].replace(",", ""))
    assert per_hour == pytest.approx(64 * 4.2525, rel=1e-3)
