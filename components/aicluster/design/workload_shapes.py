"""A spec's workload as the training model takes it (perf.ModelShape, TrainingShape, LayoutHint),
and what the workload says that is worth a warning. Needs only the spec and the model: the design's
types (ClusterContext) and the estimate's inputs (design/workload.py) both build on it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from aicluster.perf import LayoutHint, Moe, ModelShape, TrainingShape
from aicluster.perf.flops import parameter_count

if TYPE_CHECKING:
    from aicluster.spec.cluster import WorkloadSpec

# Without a `training` section: a batch of about 4M tokens, what Llama 3 405B started with (1,024
# sequences of 4,096 tokens; "The Llama 3 Herd of Models", arXiv:2407.21783, section 3.4.1) and the
# order of GPT-3's 3.2M (arXiv:2005.14165, table 2.1). Large enough to keep a data-parallel
# cluster busy, small enough not to hide pipeline bubbles.
DEFAULT_BATCH_TOKENS = 4 * 2**20

# model_params_b and a described model that disagree by more than this are worth a warning: the
# balance report and the policy pack size checkpoints from model_params_b.
PARAMS_MISMATCH = 0.10

def model_shape(ws: WorkloadSpec) -> ModelShape | None:
    m = ws.model
    if m is None:
        return None
    moe = None if m.moe is None else Moe(m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden, m.moe.shared_experts)
    return ModelShape(layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads_or_default,
                      ffn_hidden=m.ffn_hidden, vocab=m.vocab, seq_len=m.seq_len, mlp=m.mlp, moe=moe,
                      head_size=m.head_dim)

def shapes(ws: WorkloadSpec) -> tuple[ModelShape, TrainingShape, LayoutHint] | None:
    """The workload as the training model takes it; None when only model_params_b describes it."""
    model = model_shape(ws)
    if model is None:
        return None
    t = ws.training
    if t is None:
        training = TrainingShape(global_batch_seqs=max(1, round(DEFAULT_BATCH_TOKENS / model.seq_len)))
    else:
        training = TrainingShape(global_batch_seqs=t.global_batch_seqs, precision=t.precision, tokens=t.tokens,
                                 bytes_per_token=t.bytes_per_token)
    hint = LayoutHint() if ws.parallelism is None else LayoutHint(**ws.parallelism.model_dump())
    return model, training, hint

def params_b(ws: WorkloadSpec) -> float:
    """Billions of parameters: model_params_b as written, else counted from the model."""
    if ws.model_params_b is not None:
        return ws.model_params_b
    model = model_shape(ws)
    assert model is not None, "workload_problems requires model_params_b or model"
    return parameter_count(model) / 1e9

def workload_warnings(ws: WorkloadSpec) -> tuple[str, ...]:
    """What the workload says that is worth a second look before trusting an estimate."""
    model = model_shape(ws)
    if model is None or ws.model_params_b is None:
        return ()
    counted = parameter_count(model) / 1e9
    if abs(counted - ws.model_params_b) <= PARAMS_MISMATCH * counted:
        return ()
    return (f"model_params_b {ws.model_params_b:g} differs from the {counted:.1f} B parameters the model section "
            f"describes: the balance report and the policy pack size checkpoints from model_params_b",)
