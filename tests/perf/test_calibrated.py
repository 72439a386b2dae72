"""Issue 29 item 5: every estimate says which of its figures rest on published measurements and the
model's measured error out of sample."""
from __future__ import annotations

import json

from aicluster.perf import ModelShape, Moe, TrainingShape, estimate, what_if
from aicluster.perf.calibration import MEASURED_ERROR
from tests.support.workloads import LLAMA3_70B

TRAIN = TrainingShape(global_batch_seqs=1024, tokens=15e12)

DEEPSEEK_LIKE = ModelShape(layers=61, hidden=7168, heads=128, kv_heads=128, ffn_hidden=18432, vocab=129280,
                           seq_len=4096, moe=Moe(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1))


def test_a_dense_a100_estimate_states_the_measured_error_and_no_extrapolation():
    est = estimate(LLAMA3_70B, TRAIN, what_if("a100-80gb", 16))
    c = est.calibrated
    gpu = MEASURED_ERROR["gpu"]
    assert (c.median_error_groups_equal, c.median_error_rows_equal, c.within_20pct) == tuple(gpu)
    assert c.extrapolates == () and "stays inside what they measured" in c.text()
    assert f"{100 * gpu.median_abs_groups_equal:.1f} %" in c.text()
    from pathlib import Path
    fitted = json.loads((Path(__file__).parents[1] / "data" / "training-throughput.json").read_text())["records"]
    assert json.loads(json.dumps(est.to_dict()))["calibrated"]["records"] == len(fitted) == 174


def test_a_moe_on_gb200_says_what_no_published_run_had():
    est = estimate(DEEPSEEK_LIKE, TrainingShape(global_batch_seqs=4096), what_if("gb200", 36))
    text = est.calibrated.text()
    assert "GB200 (no published run)" in text and "mixture of experts" in text


def test_a_tpu_estimate_quotes_the_tpu_error():
    est = estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=512), what_if("v5p", 64))
    assert est.calibrated.median_error_groups_equal == MEASURED_ERROR["tpu"].median_abs_groups_equal


def test_the_best_published_mfu_per_accelerator_is_what_the_data_says():
    """The optimism warning's thresholds are the best published run per accelerator and precision."""
    from pathlib import Path

    from aicluster.perf.estimate import BEST_PUBLISHED_MFU

    best: dict[tuple[str, str], float] = {}
    for name in ("training-throughput.json", "training-throughput-extra.json"):
        for r in json.loads((Path(__file__).parents[1] / "data" / name).read_text())["records"]:
            acc = {"TPUv5p": "TPU v5p"}.get(r["hardware"]["accelerator"], r["hardware"]["accelerator"])
            key = (acc, "fp8" if "fp8" in r["precision"].lower() else "bf16")
            best[key] = max(best.get(key, 0.0), r["derived"]["canonical_mfu_vs_bf16_peak"])
    assert {k: round(v, 2) for k, v in best.items()} == BEST_PUBLISHED_MFU


def test_an_h100_bf16_estimate_above_every_published_h100_run_says_so():
    """Fails on the old code, which held H100 BF16 to A100's 64 %."""
    est = estimate(LLAMA3_70B, TRAIN, what_if("h100", 16))
    assert est.best.mfu > 0.46          # the model's figure for this dense 70B
    (warning,) = [w for w in est.warnings if "above the best published H100 bf16 run (46%)" in w]
    assert f"at 46% MFU training takes {est.train_days * est.best.mfu / 0.46:,.1f} days" in warning
    assert any("above the best published H100 bf16 run" in x for x in est.calibrated.extrapolates)
