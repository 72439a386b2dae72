"""Parameters and FLOPs per token of a decoder-only transformer (docs/training-model.md section 1).

Canonical convention: matmul FLOPs only, non-causal attention, LM head included, input embedding
excluded: F_tok = 6 (L N_layer + V h) + 12 L s a d_h. It reproduces NeMo 24.07's published model
TFLOP/s from its tokens/s, and Narayanan et al.'s 72 B s L h^2 (1 + s/6h + V/12Lh) for GPT shapes.
"""
from __future__ import annotations

from aicluster.perf.shapes import MLP_MATRICES, ModelShape


def attention_params(m: ModelShape) -> float:
    """Q and output projections (a heads) plus K and V (g KV heads), per layer."""
    return 2.0 * m.hidden * m.heads * m.head_dim + 2.0 * m.hidden * m.kv_heads * m.head_dim


def mlp_params(m: ModelShape, *, active: bool) -> float:
    """Per layer. MoE: the experts a token visits (active) or every expert (memory)."""
    n_mat = MLP_MATRICES[m.mlp]
    if m.moe is None:
        return float(n_mat * m.hidden * m.ffn_hidden)
    experts = (m.moe.top_k if active else m.moe.experts) + m.moe.shared_experts
    router = m.hidden * m.moe.experts
    return float(experts * n_mat * m.hidden * m.moe.expert_ffn_hidden + router)


def layer_params(m: ModelShape, *, active: bool = True) -> float:
    return attention_params(m) + mlp_params(m, active=active)


def parameter_count(m: ModelShape) -> float:
    """Every parameter: the layers (all experts), the input embedding and an untied LM head."""
    return m.layers * layer_params(m, active=False) + 2.0 * m.vocab * m.hidden


def attention_flops_per_token(m: ModelShape) -> float:
    """Scores and weighted values, forward and backward (non-causal convention)."""
    return 12.0 * m.layers * m.seq_len * m.heads * m.head_dim


def matmul_flops_per_token(m: ModelShape) -> float:
    """Weight matmuls, forward (2) and backward (4) per active parameter, LM head included."""
    return 6.0 * (m.layers * layer_params(m, active=True) + m.vocab * m.hidden)


def flops_per_token(m: ModelShape) -> float:
    """Model FLOPs per token (MFU's numerator)."""
    return matmul_flops_per_token(m) + attention_flops_per_token(m)


def recompute_flops_per_token(m: ModelShape, recompute: str) -> tuple[float, float]:
    """(matmul, attention) FLOPs that activation recomputation adds per token. Full: one more
    forward of every layer; selective: the attention core only (Korthikanti et al. 2022)."""
    attention_forward = attention_flops_per_token(m) / 3
    if recompute == "full":
        return 2.0 * m.layers * layer_params(m, active=True), attention_forward
    if recompute == "selective":
        return 0.0, attention_forward
    return 0.0, 0.0
