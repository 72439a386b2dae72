"""AIC-STO-003 checkpoint-stall-budget, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-STO-003"


def test_passes_a_70b_checkpoint_on_a_fast_filesystem():
    # 980 GB at 11.7 GB/s = 84 s = 4.6 % of 30 min
    assert hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70)).status == "pass"


def test_fails_a_70b_checkpoint_on_a_slow_filesystem():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70, capacity=2400, throughput=125))
    assert verdict.status == "warn"        # advisory by default
    text = hw.messages(verdict)
    assert "70B parameters x 14 B = 980 GB per checkpoint (tag on hw-lt)" in text
    assert "% of a 30 min interval (budget 5 %)" in text and "limited by the filesystem at 0.29 GB/s" in text


def test_hints_from_the_policy_config_win_over_tags():
    program = lambda: hw.efa_cluster(nodes=16, model_b=7)   # noqa: E731
    assert hw.check(RULE, program).status == "pass"
    verdict = hw.check(RULE, program, {"modelParamsB": 400, "maxCheckpointStallPct": 2})
    assert verdict.status == "warn"
    assert "400B parameters x 14 B = 5,600 GB per checkpoint (policy config)" in hw.messages(verdict)
    assert "(budget 2 %)" in hw.messages(verdict)


def test_without_hints_it_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster())
    assert verdict.status == "n/a" and "no workload hints" in verdict.not_applicable
