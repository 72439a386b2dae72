"""AIC-STO-006 workload-storage, over hand-written stacks with a described workload, and how it
takes AIC-STO-002's and AIC-STO-003's place."""
from __future__ import annotations

from aicluster.perf import TrainingShape
from tests.support import handwritten as hw
from tests.support import workloads as wl

RULE = "AIC-STO-006"


def test_70b_on_a_24_tib_fsx_passes():
    # 988 GB checkpoint at 11.7 GB/s = 84 s = 4.7 % of 30 min; the loader reads < 1 MB/s
    assert hw.check(RULE, lambda: wl.cluster(nodes=16)).status == "pass"


def test_a_tiny_filesystem_fails_the_checkpoint_budget():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16, capacity=1200, throughput=125))
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "16 x p5.48xlarge (128 H100): 70.6B parameters (tags on hw-lt)" in text
    assert "checkpoint takes" in text and "to hw-fsx 0.15 GB/s" in text
    assert "of a 30 min interval (budget 5 %); needs >= 11.0 GB/s" in text


def test_a_data_loader_the_filesystem_cannot_feed_fails():
    # 1 MB per token (images, say) at ~150k tokens/s is ~150 GB/s: more than 11.7 GB/s.
    heavy = wl.tags(training=TrainingShape(global_batch_seqs=512, bytes_per_token=1e6))
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=heavy))
    assert verdict.status == "fail"
    assert "the data loader reads" in hw.messages(verdict) and "but hw-fsx 11.72 GB/s gives 11,719 MB/s" in hw.messages(verdict)


def test_interval_and_budget_come_from_the_tags_or_the_config():
    tight = {**wl.tags(), "aicluster-max-checkpoint-stall-pct": "1"}
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=tight))
    assert verdict.status == "fail" and "(budget 1 %)" in hw.messages(verdict)
    assert hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=tight), {"maxCheckpointStallPct": 10}).status == "pass"
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16), {"checkpointIntervalMin": 10})
    assert verdict.status == "fail" and "of a 10 min interval" in hw.messages(verdict)


def test_it_supersedes_sto_002_and_sto_003_when_the_workload_is_described():
    tiny = lambda: wl.cluster(nodes=16, capacity=1200, throughput=125)   # noqa: E731
    for rule in ("AIC-STO-002", "AIC-STO-003"):
        verdict = hw.check(rule, tiny)
        assert verdict.status == "n/a" and verdict.not_applicable == "superseded by AIC-STO-006 (workload described)"


def test_model_params_b_alone_keeps_sto_002_and_sto_003_and_is_not_applicable_here():
    tiny = lambda: hw.efa_cluster(nodes=16, model_b=70, capacity=1200, throughput=125)   # noqa: E731
    verdict = hw.check(RULE, tiny)
    assert verdict.status == "n/a" and "model_params_b only" in verdict.not_applicable
    assert hw.check("AIC-STO-002", tiny).status == "fail"
    assert hw.check("AIC-STO-003", tiny).status == "warn"


def test_without_a_parallel_filesystem_it_is_not_applicable():
    def program():
        _, subnet, sg = hw.network()
        lt = hw.launch_template("hw-lt", subnet, sg, tags=wl.tags())
        hw.autoscaling_group("hw-asg", lt, subnet, max_size=16)
    verdict = hw.check(RULE, program)
    assert verdict.status == "n/a" and "AIC-STO-001" in verdict.not_applicable
