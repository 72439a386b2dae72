"""Memory per accelerator on the busiest pipeline stage (docs/training-model.md section 2).

Model states follow ZeRO (Rajbhandari et al. 2020, section 3.1): mixed-precision Adam keeps 2 B of
weights, 2 B of gradients and 12 B of fp32 master weights and moments per parameter; ZeRO stage 1
shards the 12 B, stage 2 the gradients too, stage 3 the weights too, over the data-parallel (and
context-parallel) ranks. Activations follow Korthikanti et al. 2022 (Table 2) with sequence
parallelism whenever TP > 1 and FlashAttention (no s^2 score matrices kept).
"""
from __future__ import annotations

import functools

from aicluster.perf.flops import attention_params, mlp_params
from aicluster.perf.result import Memory
from aicluster.perf.shapes import MLP_MATRICES, Hardware, Layout, ModelShape

GIB = 2 ** 30
# CUDA context, NCCL buffers and communication buckets: a fixed reserve per GPU. A design choice
# (PyTorch's CUDA context alone is ~0.5-1 GiB on Hopper), not a sourced figure.
RESERVED_GIB = 2.0
# Caching-allocator fragmentation on activations (docs/training-model.md: "10-20 %").
FRAGMENTATION = 1.10


def stage_layers(m: ModelShape, layout: Layout) -> int:
    """Layers on the fullest pipeline stage: stages (and interleaved chunks) may be uneven by one
    layer, as Llama 3 405B's 126 layers over 16 stages were."""
    chunks = layout.pp * layout.virtual_stages
    return -(-m.layers // chunks) * layout.virtual_stages


def stage_params(m: ModelShape, layout: Layout) -> tuple[float, float]:
    """(dense, expert) parameters one accelerator holds on the first stage, before ZeRO sharding.
    TP splits every matrix; EP splits the experts; the first stage also holds the embedding."""
    return _stage_params(m, stage_layers(m, layout), layout.tp, layout.ep)


@functools.lru_cache(maxsize=1024)
def _stage_params(m: ModelShape, layers: int, tp: int, ep: int) -> tuple[float, float]:
    # The layout search asks for the same few stages thousands of times (perf.estimate).
    experts = 0.0
    if m.moe is not None:
        shared = m.moe.shared_experts * MLP_MATRICES[m.mlp] * m.hidden * m.moe.expert_ffn_hidden
        routed = mlp_params(m, active=False) - shared - m.hidden * m.moe.experts
        experts = layers * routed / (tp * ep)
        dense = layers * (attention_params(m) + shared + m.hidden * m.moe.experts) / tp
    else:
        dense = layers * (attention_params(m) + mlp_params(m, active=False)) / tp
    return dense + m.vocab * m.hidden / tp, experts


def activation_bytes_per_layer(m: ModelShape, layout: Layout) -> float:
    """One micro-batch through one layer, 16-bit activations. Korthikanti's 34 s b h for GPT (f = 4h,
    GELU) is attention 11 + layer norms 4 + MLP 19 (input 2, two 8 h-wide tensors, dropout mask 1);
    today's models (Llama, Mixtral, Nemotron, MPT) train without dropout, so both 1-byte masks go:
    32 s b h."""
    s = m.seq_len / layout.cp
    b, h = layout.micro_batch, m.hidden
    if layout.recompute == "full":
        return 2.0 * s * b * h / layout.tp            # only each layer's input is kept
    n_mat = MLP_MATRICES[m.mlp]
    if m.moe is None:
        mlp = 2 * h + 2 * n_mat * m.ffn_hidden
    else:   # every token is routed to top_k experts (plus the shared ones)
        mlp = 2 * h + 2 * n_mat * m.moe.expert_ffn_hidden * (m.moe.top_k + m.moe.shared_experts)
    return s * b * (14 * h + mlp) / layout.tp


def micro_batches(global_batch: int, layout: Layout) -> int:
    """Micro-batches per step per pipeline (rounded up: the global batch may round up)."""
    return max(1, -(-global_batch // (layout.dp * layout.micro_batch)))


def memory(m: ModelShape, layout: Layout, hardware: Hardware, global_batch: int) -> Memory:
    layers = stage_layers(m, layout)
    dense, experts = _stage_params(m, layers, layout.tp, layout.ep)
    shards = layout.dp * layout.cp                  # ZeRO shards over data x context parallel ranks
    expert_shards = max(1, shards // layout.ep)     # experts are already split ep ways within them
    z = layout.zero_stage

    def per(bytes_, sharded_from):   # bytes per param, sharded when the ZeRO stage reaches it
        return bytes_ * (dense / shards + experts / expert_shards if z >= sharded_from else dense + experts)

    weights, grads, optimizer = per(2, 3), per(2, 2), per(12, 1)
    # 1F1B: the first stage keeps min(p, m) micro-batches of L/p layers in flight; interleaving adds
    # (p - 1) / (p v) of that (Korthikanti et al. 2022, section 4.2.3).
    m_count = micro_batches(global_batch, layout)
    in_flight = min(layout.pp, m_count)
    interleave = 1 + (layout.pp - 1) / (layout.pp * layout.virtual_stages) if layout.virtual_stages > 1 else 1
    acts = activation_bytes_per_layer(m, layout) * layers * in_flight * interleave * FRAGMENTATION
    # fp32 logits of the last stage: 4 b s V / t (docs/training-model.md section 2).
    logits = 4.0 * layout.micro_batch * (m.seq_len / layout.cp) * m.vocab / layout.tp
    return Memory(weights=weights / GIB, gradients=grads / GIB, optimizer=optimizer / GIB,
                  activations=acts / GIB, buffers=logits / GIB + RESERVED_GIB, capacity=hardware.hbm_gib)
