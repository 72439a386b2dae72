"""What an estimate reports: throughput, memory, bound, time and cost, checkpoint, data loading, warnings."""
from __future__ import annotations

import json

import pytest

from aicluster.perf import BOUNDS, Hardware, LayoutHint, ModelShape, Moe, Storage, TrainingShape, estimate, what_if
from aicluster.perf.flops import flops_per_token, parameter_count

LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)
TRAIN = TrainingShape(global_batch_seqs=1024, tokens=15e12)
H100 = what_if("h100", 64)
FSX = Storage("fsx", throughput_gbs=24.0, client_gbs=3200.0)


@pytest.fixture(scope="module")
def est():
    return estimate(LLAMA3_70B, TRAIN, H100, storage=FSX)


def test_json_carries_what_the_issue_lists(est):
    d = json.loads(json.dumps(est.to_dict()))
    for key in ("tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s", "memory_per_gpu_gib", "layout",
                "bound", "breakdown_s", "train_days", "train_cost_usd", "checkpoint", "data_loading", "warnings"):
        assert key in d, key
    assert {"weights", "gradients", "optimizer", "activations"} <= set(d["memory_per_gpu_gib"])
    assert set(d["layout"]) == {"tp", "pp", "dp", "cp", "ep", "zero_stage", "recompute", "micro_batch", "virtual_stages"}
    assert {"compute", "exposed_tp", "bubble", "exposed_dp", "p2p", "optimizer"} <= set(d["breakdown_s"])
    assert d["bound"] in BOUNDS


def test_numbers_agree_with_each_other(est):
    b = est.best
    assert b.step_time_s == pytest.approx(b.breakdown.total)
    assert b.model_tflops_per_gpu == pytest.approx(b.tokens_per_s_per_gpu * flops_per_token(LLAMA3_70B) / 1e12)
    assert b.mfu == pytest.approx(b.model_tflops_per_gpu / 989)
    assert 0.2 < b.mfu < 0.75                     # what tuned stacks publish for a 70B dense model on H100
    assert est.tokens_per_s == pytest.approx(b.tokens_per_s_per_gpu * 512)
    assert est.train_days_ideal == pytest.approx(15e12 / est.tokens_per_s / 86400)
    assert est.train_days == pytest.approx(est.train_days_ideal / est.goodput.fraction)   # failures and stalls
    assert 0.8 < est.goodput.fraction < 1
    assert est.train_cost_usd == pytest.approx(64 * 55.04 * est.train_days * 24)   # p5.48xlarge $/h (catalog)
    assert b.memory.total <= b.memory.capacity == 80
    ranked = [c.tokens_per_s_per_gpu for c in est.candidates]
    assert ranked == sorted(ranked, reverse=True) and est.candidates[0] is est.best


def test_checkpoint_and_data_loading(est):
    assert est.checkpoint.size_gb == pytest.approx(parameter_count(LLAMA3_70B) * 14 / 1e9)
    assert est.checkpoint.write_s == pytest.approx(est.checkpoint.size_gb / 24.0)
    assert est.checkpoint.stall_pct == pytest.approx(100 * est.checkpoint.write_s / 1800)
    assert est.data_loading.mb_per_s == pytest.approx(est.tokens_per_s * 4 / 1e6)
    assert est.data_loading.filesystem_mb_per_s == 24000


def test_slow_filesystem_makes_storage_the_bound():
    slow = Storage("tiny", throughput_gbs=0.2, checkpoint_interval_min=10, max_checkpoint_stall_pct=2)
    est = estimate(LLAMA3_70B, TRAIN, H100, storage=slow)
    assert est.bound == "storage" and est.checkpoint.stall_pct > 2


def test_thin_fabric_makes_inter_node_traffic_the_bound():
    thin = what_if("h100", 64, inter_node_gbps_per_node=25)
    est = estimate(LLAMA3_70B, TRAIN, thin, hint=LayoutHint(tp=8, pp=1, zero_stage=1))
    assert est.best.bound == "inter-node"
    assert est.best.tokens_per_s_per_gpu < estimate(LLAMA3_70B, TRAIN, H100, hint=LayoutHint(tp=8, pp=1, zero_stage=1)
                                                    ).best.tokens_per_s_per_gpu / 2


def test_little_hbm_makes_memory_the_bound():
    est = estimate(LLAMA3_70B, TRAIN, what_if("a100", 16))   # 40 GB A100s: 128 of them for 70B
    assert est.bound == "memory"
    assert any("memory binds" in w for w in est.warnings)


def test_fp8_is_faster_on_hopper_and_warned_on_ampere():
    bf16 = estimate(LLAMA3_70B, TRAIN, H100).best.tokens_per_s_per_gpu
    fp8 = estimate(LLAMA3_70B, TrainingShape(1024, "fp8", 15e12), H100).best.tokens_per_s_per_gpu
    assert 1.2 < fp8 / bf16 < 2.0
    ampere = estimate(LLAMA3_70B, TrainingShape(1024, "fp8"), what_if("a100-80gb", 64))
    assert any("no FP8" in w for w in ampere.warnings)


def test_moe_searches_expert_parallelism_and_warns():
    """Mixtral 8x7B on 64 A100 40 GB: splitting the experts over 4 ranks is what lets the fastest
    layout fit, so the search picks expert parallelism; its degree divides the 8 experts and the
    data x context ranks it splits them over, and it beats the best layout without it."""
    mixtral = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
                         moe=Moe(experts=8, top_k=2, expert_ffn_hidden=14336))
    training, a100 = TrainingShape(global_batch_seqs=1024), what_if("a100", 8)
    est = estimate(mixtral, training, a100)
    lay = est.best.layout
    assert lay.ep > 1
    assert mixtral.moe.experts % lay.ep == 0 and (lay.dp * lay.cp) % lay.ep == 0
    for c in est.candidates:
        assert mixtral.moe.experts % c.layout.ep == 0 and (c.layout.dp * c.layout.cp) % c.layout.ep == 0
    without = estimate(mixtral, training, a100, hint=LayoutHint(ep=1))
    assert without.best.layout.ep == 1
    assert est.best.tokens_per_s_per_gpu > without.best.tokens_per_s_per_gpu
    assert any("MoE" in w for w in est.warnings)


def test_uncalibrated_accelerators_say_so():
    est = estimate(LLAMA3_70B, TRAIN, what_if("b200", 32))
    assert any("no published measurement of B200" in w for w in est.warnings)
    assert est.best.tokens_per_s_per_gpu > estimate(LLAMA3_70B, TRAIN, H100).best.tokens_per_s_per_gpu


def test_tpu_what_if_uses_ici_inside_the_slice():
    est = estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=512), what_if("v5p", 64))
    assert est.accelerators == 256 and est.best.layout.tp <= 256
    assert est.train_cost_usd is None   # no TPU price in the catalog


def test_unknown_accelerator_bandwidth_is_warned():
    hw = Hardware(name="x", accelerator="Trainium2", kind="trainium", count=64, per_node=16, bf16_tflops=667,
                  fp8_tflops=None, hbm_gib=96, hbm_gbs=2900, scale_up_size=16, scale_up_gbs=None,
                  scale_out_gbps_per_node=3200)
    est = estimate(LLAMA3_70B, TRAIN, hw)
    assert any("scale-up bandwidth is not in the catalog" in w for w in est.warnings)


def test_mfu_beyond_every_published_run_is_flagged():
    """A 70B model on a v5p slice with little tensor sharding extrapolates past MaxText's best (71 %)."""
    est = estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=512), what_if("v5p", 64))
    flagged = any("above the best published TPU v5p bf16 run" in w for w in est.warnings)
    assert flagged == (est.best.mfu > 0.71)
    h100 = estimate(LLAMA3_70B, TRAIN, H100)
    assert any("above the best published H100 bf16 run" in w for w in h100.warnings) == (h100.best.mfu > 0.46)
