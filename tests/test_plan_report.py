"""The plan's training estimate section (aicluster.commands.plan_report): the estimate for the spec's
workload in text, markdown and JSON; one line when the workload gives only model_params_b; a
finding, not a crash, when nothing fits."""
from __future__ import annotations

import json

import pytest

from aicluster.commands import plan_report
from aicluster.errors import Problem, SpecError
from aicluster.commands.plan_report import PlanEstimate, estimate_lines, markdown, plan_estimate, text, to_json
from tests.support.estimates import a_candidate, an_estimate
from tests.support.stack_plans import result_with_spec, stack_spec_data

LLAMA_70B = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256,
             "seq_len": 8192}


def _described(stack: str = "aws-p5-slurm", **workload):
    spec = stack_spec_data(stack)
    spec["workload"] = {"model": LLAMA_70B, **workload}
    return result_with_spec(stack, spec)


def test_the_estimate_lines_show_layout_throughput_mfu_days_dollars_bound_and_warnings():
    est = an_estimate(warnings=("pool small not included (a job spans one pool)",))
    lines = estimate_lines(PlanEstimate("estimated", est))
    body = "\n".join(lines)
    assert "16 x p5.48xlarge (128 GPUs)" in body
    assert "tp 8  pp 1  dp 16  cp 1  ep 1  zero 1  recompute selective  micro-batch 1" in body
    assert "3,277 tokens/s per GPU, 419,456 tokens/s in all" in body
    assert "40.0 % (395 model TFLOP/s per GPU), step 20.00 s, bound: compute" in body
    assert "343.4 days at 95.4 % goodput (330.0 if every hour trained)" in body
    assert "$8,000,000 to train: accelerators $1,000.00/h over 343.4 days" in body
    assert lines[-2:] == ["warnings:", "  - pool small not included (a job spans one pool)"]


def test_without_tokens_or_a_price_it_says_what_is_missing():
    lines = estimate_lines(PlanEstimate("estimated", an_estimate(train_days=None, train_cost_usd=None)))
    lines = estimate_lines(PlanEstimate("estimated", an_estimate(train_days=None, train_days_ideal=None,
                                                                  train_cost_usd=None)))
    assert any("give training.tokens" in line for line in lines)
    lines = estimate_lines(PlanEstimate("estimated", an_estimate(train_cost_usd=None, usd_per_hour=None)))
    assert any("343.4 days at" in line for line in lines) and any("cost" in line and "unknown" in line for line in lines)
    virtual = an_estimate(best=a_candidate(layout=a_candidate().layout.__class__(pp=4, virtual_stages=2)))
    assert any("virtual stages 2" in line for line in estimate_lines(PlanEstimate("estimated", virtual)))


def _params_only(stack: str = "aws-p5-slurm"):
    spec = stack_spec_data(stack)
    spec["workload"] = {"model_params_b": 70}
    return result_with_spec(stack, spec)


def test_model_params_b_alone_is_one_line_naming_workload_model():
    pe = plan_estimate(_params_only().design)
    assert pe.status == "not-described" and pe.estimate is None
    (line,) = estimate_lines(pe)
    assert "needs workload.model" in line
    assert pe.to_json() == {"status": "not-described", "note": line}


def test_no_workload_is_one_line_too():
    spec = stack_spec_data("aws-p5-slurm")
    del spec["workload"]
    pe = plan_estimate(result_with_spec("aws-p5-slurm", spec).design)
    assert pe.status == "no-workload" and "describe workload.model" in estimate_lines(pe)[0]


@pytest.fixture
def nothing_fits(monkeypatch):
    def refuse(design, top=3):
        raise SpecError([Problem("workload.parallelism", None, "no layout fits 80 GiB of HBM: 405 B parameters "
                                 "need at least 48 GPUs")], subject="workload")
    monkeypatch.setattr(plan_report, "estimate_design", refuse)


def test_model_params_b_alone_shows_in_every_format():
    result = _params_only()
    assert any("needs workload.model" in line for line in text(result))
    assert "needs workload.model" in "\n".join(markdown(result))
    assert to_json(result)["estimate"]["status"] == "not-described"


def test_a_model_that_fits_nowhere_is_a_finding_in_every_format_not_a_crash(nothing_fits):
    result = _described()
    assert any(line.strip().startswith("finding: workload.parallelism") and "405 B parameters" in line
               for line in text(result))
    md = "\n".join(markdown(result))
    assert "### Training estimate" in md and "finding: workload.parallelism" in md
    doc = json.loads(json.dumps(to_json(result)))
    assert doc["estimate"]["status"] == "finding" and "need at least 48 GPUs" in doc["estimate"]["note"]


def test_a_described_model_is_estimated_in_text_markdown_and_json(monkeypatch):
    seen = []

    def fake(design, top=3):
        seen.append(design.workload.model.layers)
        return an_estimate()
    monkeypatch.setattr(plan_report, "estimate_design", fake)
    result = _described(training={"global_batch_seqs": 1024, "tokens": 15e12})
    out = "\n".join(text(result))
    assert "Training estimate (the workload on the largest accelerator pool, with its partition, at max nodes)" in out
    assert out.index("Balance") < out.index("Training estimate") < out.index("Policy pack")
    assert "  throughput  3,277 tokens/s per GPU" in out
    assert "bound: compute" in "\n".join(markdown(result))
    doc = json.loads(json.dumps(to_json(result)))
    assert doc["estimate"]["status"] == "estimated" and doc["estimate"]["mfu"] == 0.40
    assert doc["estimate"]["layout"]["tp"] == 8 and doc["estimate"]["train_days"] == 343.4
    assert seen and set(seen) == {80}


def test_the_real_training_model_estimates_a_described_stack():
    result = _described(training={"global_batch_seqs": 1024, "tokens": 15e12})
    pe = plan_estimate(result.design)
    assert pe.status == "estimated", pe.note
    e = pe.estimate
    assert e.accelerators == 128 and 0 < e.best.mfu < 1 and e.train_days > 0 and e.train_cost_usd > 0
    assert any(line.startswith("MFU") for line in estimate_lines(pe))


def test_the_default_stacks_estimate_states_goodput_and_standing_cost():
    """Issue 29, done when: the default stack's estimate states goodput and the standing cost, and
    its cost to train is the accelerators plus the standing cost over the days at goodput."""
    from aicluster.design.standing_cost import standing_cost
    from tests.support.stack_plans import stack_result

    result = stack_result("aws-p5-slurm")
    pe = plan_estimate(result.design)
    e = pe.estimate
    assert e.standing_usd_per_hour == pytest.approx(standing_cost(result.design).usd_per_hour) and e.standing_usd_per_hour > 0
    assert e.train_days == pytest.approx(e.train_days_ideal / e.goodput.fraction) and e.goodput.fraction < 1
    assert e.train_cost_usd == pytest.approx((e.usd_per_hour + e.standing_usd_per_hour) * e.train_days * 24)
    body = "\n".join(estimate_lines(pe))
    assert f"% goodput ({e.train_days_ideal:,.1f} if every hour trained)" in body
    assert "best checkpoint interval" in body
    assert f"standing (${e.standing_usd_per_hour:,.2f}/h)" in body
