"""The spec's `workload` sections that describe a training job: the model's architecture, the
training set-up and the parallel layout (every degree optional: what is left out is searched).

Shape only (pydantic) plus the checks one section can make of itself (`workload_problems`): the
training model (aicluster.perf) decides what fits on which hardware. Also home of `SpecModel`, the
strict base every spec section shares, so that spec.py can import these sections without a cycle.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from aicluster.errors import Problem


class SpecModel(BaseModel):
    """Frozen, and unknown keys refused (reported with a close match by spec._problem_from)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _int(low: int, high: int) -> type[int]:
    # Strict: YAML's 8.5 or "8" is a mistake, not a number to round. The upper bounds only keep
    # the arithmetic and the layout search finite; they are far past any published model.
    return Annotated[int, Field(strict=True, ge=low, le=high)]  # type: ignore[return-value]


class MoeSpec(SpecModel):
    """A mixture-of-experts MLP: each token runs through `top_k` of `experts` expert MLPs."""

    experts: _int(1, 4096) = Field(description="Routed experts per MoE layer (Mixtral 8x7B: 8).")
    top_k: _int(1, 4096) = Field(description="Experts each token is routed to, at most `experts` "
                                             "(Mixtral: 2).")
    expert_ffn_hidden: _int(1, 1_048_576) = Field(description="FFN width of one expert (Mixtral: 14336).")
    shared_experts: _int(0, 256) = Field(0, description="Experts every token runs through besides the "
                                                        "routed ones (DeepSeek-style); default 0.")


class ModelSpec(SpecModel):
    """A decoder-only transformer, as its config file describes it (Llama 3 70B: layers 80, hidden
    8192, heads 64, kv_heads 8, ffn_hidden 28672, vocab 128256, seq_len 8192)."""

    layers: _int(1, 4096) = Field(description="Transformer layers (blocks).")
    hidden: _int(1, 262_144) = Field(description="Hidden size (d_model), a multiple of `heads` unless `head_dim` is given.")
    heads: _int(1, 4096) = Field(description="Attention (query) heads.")
    kv_heads: _int(1, 4096) | None = Field(
        None, description="Key/value heads, dividing `heads`: fewer than heads is grouped-query "
                          "attention (GQA). Default: heads (multi-head attention).")
    head_dim: _int(1, 65_536) | None = Field(
        None, description="Dimensions per attention head. Default: hidden / heads (then hidden must be a "
                          "multiple of heads); some wide models fix it (128) whatever the hidden size.")
    ffn_hidden: _int(1, 1_048_576) = Field(description="FFN (MLP) intermediate width of a dense layer.")
    vocab: _int(1, 16_777_216) = Field(description="Vocabulary size (tokens).")
    seq_len: _int(1, 16_777_216) = Field(description="Sequence length trained on, in tokens.")
    mlp: Literal["swiglu", "gelu", "relu2"] = Field(
        "swiglu", description="MLP kind: swiglu (three matrices: gate, up, down; Llama, Mixtral), gelu or "
                              "relu2 (two: up, down).")
    moe: MoeSpec | None = Field(None, description="Mixture of experts: every layer's MLP becomes experts. "
                                                  "Leave it out for a dense model.")

    @property
    def kv_heads_or_default(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads


class TrainingSpec(SpecModel):
    """How the model is trained: batch, precision and how many tokens."""

    global_batch_seqs: _int(1, 100_000_000) = Field(
        description="Sequences per optimizer step across all data-parallel ranks (Llama 3 405B: 2048 "
                    "of 8192 tokens = 16M tokens).")
    precision: Literal["bf16", "fp8"] = Field(
        "bf16", description="Matmul precision: bf16, or fp8 where the accelerator has FP8 tensor cores "
                            "(H100, H200, B200); weights and optimizer states keep mixed-precision sizes.")
    tokens: Annotated[float, Field(gt=0, le=1e17, allow_inf_nan=False)] | None = Field(
        None, description="Tokens to train on (Llama 3: 15.0e+12). Gives days and dollars to train; "
                          "leave it out for throughput only.")
    bytes_per_token: Annotated[float, Field(gt=0, le=1_048_576, allow_inf_nan=False)] = Field(
        4.0, description="Bytes the data loader reads per token: 4 for int32 token ids (default), 2 for "
                         "uint16 ids, more for raw text or images.")


class ParallelismSpec(SpecModel):
    """The parallel layout. Every key is optional: what is left out is searched, best first."""

    tp: _int(1, 100_000) | None = Field(None, description="Tensor-parallel degree (within a node / NVLink "
                                                          "domain in the best layouts).")
    pp: _int(1, 100_000) | None = Field(None, description="Pipeline-parallel stages.")
    dp: _int(1, 100_000) | None = Field(None, description="Data-parallel replicas.")
    cp: _int(1, 100_000) | None = Field(None, description="Context-parallel degree (splits the sequence).")
    ep: _int(1, 100_000) | None = Field(None, description="Expert-parallel degree (MoE models only).")
    zero_stage: _int(0, 3) | None = Field(
        None, description="ZeRO stage: 0 plain data parallel, 1 shards optimizer states, 2 also "
                          "gradients, 3 also weights (FSDP).")
    recompute: Literal["none", "selective", "full"] | None = Field(
        None, description="Activation recomputation: none, selective (attention only) or full (every "
                          "layer's activations recomputed in the backward pass).")
    micro_batch: _int(1, 100_000) | None = Field(None, description="Sequences per micro-batch per "
                                                                   "data-parallel rank.")
    virtual_stages: _int(1, 1024) | None = Field(
        None, description="Interleaved pipeline chunks per stage (1: no interleaving).")


def model_problems(model: ModelSpec, at: str) -> list[Problem]:
    """What one `model` section can say is wrong with itself, each at its YAML path."""
    problems = []
    if model.head_dim is None and model.hidden % model.heads:
        near = _multiples_near(model.hidden, model.heads)
        problems.append(Problem(f"{at}.hidden", model.hidden, f"a multiple of heads ({model.heads}): each head "
                                f"gets hidden / heads dimensions (or give head_dim)", near))
    kv = model.kv_heads_or_default
    if kv > model.heads or model.heads % kv:
        divisors = [d for d in _divisors(model.heads) if d <= 64 or d == model.heads]
        problems.append(Problem(f"{at}.kv_heads", kv, f"a divisor of heads ({model.heads}): {', '.join(map(str, divisors))} "
                                "(each key/value head serves a whole group of query heads)"))
    if model.moe is not None:
        moe = model.moe
        if moe.top_k > moe.experts:
            problems.append(Problem(f"{at}.moe.top_k", moe.top_k, f"at most experts ({moe.experts}): a token "
                                    "cannot be routed to more experts than there are", str(moe.experts)))
    return problems


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _multiples_near(value: int, step: int) -> str:
    lower, upper = value // step * step, -(-value // step) * step
    return " or ".join(str(v) for v in (lower, upper) if v > 0)
