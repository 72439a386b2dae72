"""The spec's workload sections (model, training, parallelism): what they accept, and every
problem at its YAML path with what is allowed and a close match."""
from __future__ import annotations

import copy

import pytest

from aicluster.errors import SpecError
from aicluster.spec.cluster import WorkloadSpec, parse_spec
from aicluster.design.workload_shapes import DEFAULT_BATCH_TOKENS, params_b, shapes
from tests.support import BASE_SPEC

LLAMA3_70B = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
              "vocab": 128256, "seq_len": 8192}
MIXTRAL = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000,
           "seq_len": 4096, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336}}


def spec_with(workload: dict) -> dict:
    data = copy.deepcopy(BASE_SPEC)
    data["workload"] = workload
    return data


def problems(workload: dict) -> dict[str, str]:
    """path -> rendered problem, for a spec with this workload section."""
    with pytest.raises(SpecError) as err:
        parse_spec(spec_with(workload))
    return {p.path: str(p) for p in err.value.problems}


def test_model_params_b_alone_is_still_a_workload():
    ws = parse_spec(spec_with({"model_params_b": 70})).workload
    assert ws.model_params_b == 70 and ws.model is None
    assert shapes(ws) is None
    assert params_b(ws) == 70


def test_a_full_workload_parses_into_the_training_models_shapes():
    ws = parse_spec(spec_with({"model": LLAMA3_70B, "training": {"global_batch_seqs": 2048, "precision": "fp8",
                                                                 "tokens": "15.0e12"},
                               "parallelism": {"tp": 8, "zero_stage": 1, "recompute": "full"}})).workload
    model, training, hint = shapes(ws)
    assert (model.layers, model.hidden, model.kv_heads, model.mlp, model.moe) == (80, 8192, 8, "swiglu", None)
    assert training.global_batch_seqs == 2048 and training.precision == "fp8"
    assert training.tokens == 15.0e12            # YAML 1.1 reads 15.0e12 as text: taken as the number
    assert training.bytes_per_token == 4
    assert (hint.tp, hint.pp, hint.zero_stage, hint.recompute) == (8, None, 1, "full")
    # model_params_b left out: counted from the architecture (Llama 3 70B: 70.6 B)
    assert 70 < params_b(ws) < 71


def test_kv_heads_default_to_heads_and_training_to_a_4m_token_batch():
    model = {k: v for k, v in LLAMA3_70B.items() if k != "kv_heads"}
    ws = parse_spec(spec_with({"model": model})).workload
    shape, training, _ = shapes(ws)
    assert shape.kv_heads == 64
    assert training.global_batch_seqs == DEFAULT_BATCH_TOKENS // 8192 == 512
    assert training.tokens is None


def test_moe_model_parses():
    ws = parse_spec(spec_with({"model": MIXTRAL})).workload
    moe = shapes(ws)[0].moe
    assert (moe.experts, moe.top_k, moe.expert_ffn_hidden, moe.shared_experts) == (8, 2, 14336, 0)
    assert 46 < params_b(ws) < 47.5     # Mixtral 8x7B: 46.7 B


def test_head_dim_lets_hidden_be_any_size():
    ws = parse_spec(spec_with({"model": LLAMA3_70B | {"hidden": 8000, "head_dim": 128}})).workload
    assert shapes(ws)[0].head_dim == 128


def test_neither_model_params_b_nor_model_is_refused():
    found = problems({"checkpoint_interval_min": 30})
    assert "required unless `model`" in found["workload.model_params_b"]


@pytest.mark.parametrize("section", ["training", "parallelism"])
def test_training_and_parallelism_need_a_model(section):
    value = {"global_batch_seqs": 8} if section == "training" else {"tp": 8}
    found = problems({"model_params_b": 70, section: value})
    assert f"workload.{section}" in found and "describe the model too" in found[f"workload.{section}"]


@pytest.mark.parametrize("change, path, allowed, suggestion", [
    ({"hidden": 8190}, "workload.model.hidden", "a multiple of heads (64)", "8128 or 8192"),
    ({"kv_heads": 7}, "workload.model.kv_heads", "a divisor of heads (64)", None),
    ({"kv_heads": 128}, "workload.model.kv_heads", "a divisor of heads (64)", None),
    ({"layers": 0}, "workload.model.layers", ">= 1", None),
    ({"layers": 80.5}, "workload.model.layers", "a whole number", None),
    ({"seq_len": "8k"}, "workload.model.seq_len", "a whole number", None),
    ({"mlp": "swiglue"}, "workload.model.mlp", "swiglu, gelu, relu2", "swiglu"),
    ({"moe": {"experts": 8, "top_k": 9, "expert_ffn_hidden": 1}}, "workload.model.moe.top_k",
     "at most experts (8)", "8"),
    ({"moe": {"experts": 8, "top_k": 2}}, "workload.model.moe.expert_ffn_hidden", "required", None),
])
def test_model_problems_name_their_path(change, path, allowed, suggestion):
    found = problems({"model": LLAMA3_70B | change})
    assert path in found, found
    assert allowed in found[path]
    if suggestion:
        assert f"did you mean {suggestion}?" in found[path]


@pytest.mark.parametrize("section, value, path, allowed", [
    ("training", {"global_batch_seqs": 0}, "workload.training.global_batch_seqs", ">= 1"),
    ("training", {"global_batch_seqs": 8, "precision": "fp16"}, "workload.training.precision", "bf16, fp8"),
    ("training", {"global_batch_seqs": 8, "tokens": -1}, "workload.training.tokens", "> 0"),
    ("training", {"global_batch_seqs": 8, "tokens": "lots"}, "workload.training.tokens", "a number"),
    ("training", {"global_batch_seqs": 8, "tokens": float("inf")}, "workload.training.tokens", "finite"),
    ("training", {"tokens": 1e12}, "workload.training.global_batch_seqs", "required"),
    ("parallelism", {"zero_stage": 4}, "workload.parallelism.zero_stage", "<= 3"),
    ("parallelism", {"tp": 0}, "workload.parallelism.tp", ">= 1"),
    ("parallelism", {"recompute": "ful"}, "workload.parallelism.recompute", "none, selective, full"),
])
def test_training_and_parallelism_problems_name_their_path(section, value, path, allowed):
    found = problems({"model": LLAMA3_70B, section: value})
    assert path in found, found
    assert allowed in found[path]


@pytest.mark.parametrize("where, key, close", [
    ((), "modell", "model"),
    (("model",), "hiden", "hidden"),
    (("model",), "kv_head", "kv_heads"),
    (("model", "moe"), "topk", "top_k"),
    (("training",), "global_batch", "global_batch_seqs"),
    (("parallelism",), "tpp", "tp"),
])
def test_unknown_keys_are_refused_with_a_close_match(where, key, close):
    workload = {"model": copy.deepcopy(MIXTRAL), "training": {"global_batch_seqs": 8}, "parallelism": {}}
    target = workload
    for part in where:
        target = target[part]
    target[key] = 1
    path = ".".join(("workload",) + where + (key,))
    found = problems(workload)
    assert path in found, found
    assert "unknown key" in found[path] and f"did you mean {close}?" in found[path]


def test_every_problem_is_reported_at_once():
    found = problems({"model": LLAMA3_70B | {"layers": 0, "vocab": -1},
                      "training": {"global_batch_seqs": 0}, "parallelism": {"pp": 0}})
    assert {"workload.model.layers", "workload.model.vocab", "workload.training.global_batch_seqs",
            "workload.parallelism.pp"} <= set(found)


def test_sections_are_frozen():
    ws = WorkloadSpec.model_validate({"model": LLAMA3_70B})
    with pytest.raises(Exception, match="frozen"):
        ws.model.layers = 1   # a spec is a value: the design and the estimate read the same one
