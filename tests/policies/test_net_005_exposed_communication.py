"""AIC-NET-005 exposed-communication, over hand-written stacks with a described workload."""
from __future__ import annotations

from aicluster.perf import TrainingShape
from tests.support import handwritten as hw
from tests.support import workloads as wl

RULE = "AIC-NET-005"
# Llama 3 8B with a small batch (128 x 8192 tokens) on 16 p5: little compute per step to hide behind.
SMALL_BATCH_8B = wl.tags(wl.LLAMA3_8B, TrainingShape(global_batch_seqs=128))


def test_8b_passes_with_every_efa_device_wired():
    assert hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=SMALL_BATCH_8B)).status == "pass"


def test_dense_model_over_a_100_gbps_fabric_warns_with_the_split():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=SMALL_BATCH_8B, cards=1))
    assert verdict.status == "warn"            # advisory by default
    text = hw.messages(verdict)
    assert "16 x p5.48xlarge (128 H100): 8.0B parameters (tags on hw-lt)" in text
    assert "is exposed communication (" in text and "with 100 Gbps wired per node between nodes" in text
    assert "% > 25 %" in text


def test_the_ceiling_comes_from_the_config():
    program = lambda: wl.cluster(nodes=16, lt_tags=SMALL_BATCH_8B, cards=1)   # noqa: E731
    assert hw.check(RULE, program, {"maxExposedCommPct": 90}).status == "pass"
    verdict = hw.check(RULE, program, {"maxExposedCommPct": 5})
    assert verdict.status == "warn" and "% > 5 %" in hw.messages(verdict)


def test_model_params_b_alone_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70))
    assert verdict.status == "n/a" and "model_params_b only" in verdict.not_applicable


def test_a_workload_no_layout_runs_is_left_to_mem_002():
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=2, lt_tags=wl.tags(wl.LLAMA3_405B)))
    assert verdict.status == "n/a" and "AIC-MEM-002" in verdict.not_applicable
