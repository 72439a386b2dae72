"""Issue 29 item 5: every estimate says which of its figures rest on published measurements and the
model's measured error out of sample."""
from __future__ import annotations

import json

from aicluster.perf import ModelShape, Moe, TrainingShape, estimate, what_if
from aicluster.perf.calibration import MEASURED_ERROR
from tests.perf.test_estimate import LLAMA3_70B, TRAIN

DEEPSEEK_LIKE = ModelShape(layers=61, hidden=7168, heads=128, kv_heads=128, ffn_hidden=18432, vocab=129280,
                           seq_len=4096, moe=Moe(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1))


def test_a_dense_h100_estimate_states_the_measured_error_and_no_extrapolation():
    est = estimate(LLAMA3_70B, TRAIN, what_if("h100", 16))
    c = est.calibrated
    gpu = MEASURED_ERROR["gpu"]
    assert (c.median_error_groups_equal, c.median_error_rows_equal, c.within_20pct) == tuple(gpu)
    assert c.extrapolates == () and "stays inside what they measured" in c.text()
    assert f"{100 * gpu.median_abs_groups_equal:.1f} %" in c.text()
    assert json.loads(json.dumps(est.to_dict()))["calibrated"]["records"] == 174


def test_a_moe_on_gb200_says_what_no_published_run_had():
    est = estimate(DEEPSEEK_LIKE, TrainingShape(global_batch_seqs=4096), what_if("gb200", 36))
    text = est.calibrated.text()
    assert "GB200 (no published run)" in text and "mixture of experts" in text


def test_a_tpu_estimate_quotes_the_tpu_error():
    est = estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=512), what_if("v5p", 64))
    assert est.calibrated.median_error_groups_equal == MEASURED_ERROR["tpu"].median_abs_groups_equal
