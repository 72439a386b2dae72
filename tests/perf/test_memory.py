"""Memory per GPU: ZeRO sharding and Korthikanti et al.'s activation memory (docs/training-model.md, section 2)."""
from __future__ import annotations

import pytest

from aicluster.perf import Layout, ModelShape, what_if
from aicluster.perf.memory import GIB, RESERVED_GIB, activation_bytes_per_layer, memory

GPT3 = ModelShape(layers=96, hidden=12288, heads=96, kv_heads=96, ffn_hidden=4 * 12288, vocab=51200, seq_len=2048,
                  mlp="gelu")
H100 = what_if("h100", 64)


def test_korthikanti_activations_per_layer():
    """Table 2 of Korthikanti et al. 2022 with sequence parallelism: 34 s b h / t without the s^2 scores
    (FlashAttention or selective recompute), less the two 1-byte dropout masks (no dropout today):
    32 s b h / t; 2 s b h / t with full recompute."""
    s, b, h, t = 2048, 1, 12288, 8
    assert activation_bytes_per_layer(GPT3, Layout(tp=t, recompute="selective")) == pytest.approx(32 * s * b * h / t)
    assert activation_bytes_per_layer(GPT3, Layout(tp=t, recompute="none")) == pytest.approx(32 * s * b * h / t)
    assert activation_bytes_per_layer(GPT3, Layout(tp=t, recompute="full")) == pytest.approx(2 * s * b * h / t)
    assert activation_bytes_per_layer(GPT3, Layout(tp=t, cp=2, micro_batch=2)) == pytest.approx(32 * s * b * h / t)


@pytest.mark.parametrize("zero,weights,grads,optimizer", [(0, 2, 2, 12), (1, 2, 2, 12 / 8), (2, 2, 2 / 8, 12 / 8),
                                                          (3, 2 / 8, 2 / 8, 12 / 8)])
def test_zero_stages_shard_model_states_over_data_parallel_ranks(zero, weights, grads, optimizer):
    m = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=16384, vocab=50000, seq_len=2048,
                   mlp="gelu")
    mem = memory(m, Layout(dp=8, zero_stage=zero), what_if("h100", 1), 64)
    params = 32 * 12 * 4096 ** 2 + 50000 * 4096   # 12 h^2 per GPT layer, plus the embedding on stage one
    assert mem.weights * GIB == pytest.approx(weights * params)
    assert mem.gradients * GIB == pytest.approx(grads * params)
    assert mem.optimizer * GIB == pytest.approx(optimizer * params)


def test_pipeline_first_stage_holds_every_layers_activations_and_interleaving_adds():
    """1F1B keeps p micro-batches of L/p layers on stage one: L layers' worth; interleaving x (1 + (p-1)/(p v))."""
    one = activation_bytes_per_layer(GPT3, Layout(tp=8)) * 1.10 / GIB   # 10 % fragmentation
    plain = memory(GPT3, Layout(tp=8, pp=8, dp=1), H100, 64)
    assert plain.activations == pytest.approx(96 * one)
    interleaved = memory(GPT3, Layout(tp=8, pp=8, dp=1, virtual_stages=3), H100, 64)
    assert interleaved.activations == pytest.approx(96 * one * (1 + 7 / 24))
    few = memory(GPT3, Layout(tp=8, pp=8, dp=1), H100, 2)   # 2 micro-batches: only 2 in flight
    assert few.activations == pytest.approx(96 / 8 * 2 * one)
    assert plain.buffers == pytest.approx(4 * 2048 * 51200 / 8 / GIB + RESERVED_GIB)
