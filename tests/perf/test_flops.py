"""FLOPs and parameters against worked examples from the sources (docs/training-model.md, section 1)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicluster.perf import ModelShape, Moe
from aicluster.perf.calibration import record
from aicluster.perf.flops import flops_per_token, parameter_count, recompute_flops_per_token

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "training-throughput.json").read_text())
LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)


@pytest.mark.parametrize("row", DATA["records"], ids=lambda r: r["id"])
def test_canonical_flops_per_token_match_every_published_row(row):
    """The reference set converts every source's FLOPs to one convention; ours must agree on every
    architecture in it (GPT, Llama 2/3 with GQA, Nemotron's ReLU^2, MaxText's 128-wide heads)."""
    assert flops_per_token(record(row).model) == pytest.approx(row["derived"]["canonical_flops_per_token"], rel=1e-3)


def test_reproduces_nemo_model_tflops_from_tokens_per_second():
    """NeMo 24.07 prints tokens/s and model TFLOP/s per GPU; F_tok turns one into the other."""
    rows = [r for r in DATA["records"] if r["group"] == "nemo-2407-h100-fp8"]
    assert len(rows) == 12
    for row in rows:
        tflops = row["derived"]["tokens_per_s_per_gpu"] * flops_per_token(record(row).model) / 1e12
        assert tflops == pytest.approx(row["derived"]["canonical_model_tflops_per_gpu"], rel=1e-3)


@pytest.mark.parametrize("layers,hidden,seq,vocab", [(96, 12288, 2048, 51200), (24, 2304, 2048, 51200),
                                                      (128, 25600, 2048, 51200)])
def test_equals_narayanan_closed_form_for_gpt_shapes(layers, hidden, seq, vocab):
    """Narayanan et al. 2021: 72 B s L h^2 (1 + s/6h + V/12Lh) FLOPs per iteration (per sequence: / B)."""
    m = ModelShape(layers=layers, hidden=hidden, heads=hidden // 128, kv_heads=hidden // 128, ffn_hidden=4 * hidden,
                   vocab=vocab, seq_len=seq, mlp="gelu")
    narayanan = 72 * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
    assert flops_per_token(m) * seq == pytest.approx(narayanan, rel=1e-9)


def test_full_recompute_is_narayanans_96_coefficient():
    """Full recompute adds one forward pass: 72 -> 96 (4 passes instead of 3)."""
    m = ModelShape(layers=96, hidden=12288, heads=96, kv_heads=96, ffn_hidden=4 * 12288, vocab=51200,
                   seq_len=2048, mlp="gelu")
    gemm, attn = recompute_flops_per_token(m, "full")
    layers_only = flops_per_token(m) - 6 * m.vocab * m.hidden
    assert (layers_only + gemm + attn) / layers_only == pytest.approx(4 / 3, rel=1e-9)
    assert recompute_flops_per_token(m, "none") == (0.0, 0.0)
    assert recompute_flops_per_token(m, "selective")[0] == 0.0


def test_parameter_counts_of_known_models():
    assert parameter_count(LLAMA3_70B) / 1e9 == pytest.approx(70.6, abs=0.2)
    llama3_8b = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, seq_len=8192)
    assert parameter_count(llama3_8b) / 1e9 == pytest.approx(8.03, abs=0.05)
    mixtral = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
                         moe=Moe(experts=8, top_k=2, expert_ffn_hidden=14336))
    assert parameter_count(mixtral) / 1e9 == pytest.approx(46.7, abs=0.3)   # Mixtral 8x7B: 46.7B total


def test_moe_counts_active_experts_for_flops_and_all_for_parameters():
    dense = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096)
    moe = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
                     moe=Moe(experts=8, top_k=2, expert_ffn_hidden=14336))
    mlp = 3 * 4096 * 14336 * 32
    assert flops_per_token(moe) - flops_per_token(dense) == pytest.approx(6 * (mlp + 32 * 4096 * 8), rel=1e-9)
    assert parameter_count(moe) - parameter_count(dense) == pytest.approx(7 * mlp + 32 * 4096 * 8, rel=1e-9)
