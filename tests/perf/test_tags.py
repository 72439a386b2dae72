"""The workload tag codec (aicluster.perf.tags): exact round trips inside the label alphabet, and
malformed values read as None with a reason, never an exception."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aicluster.perf import LayoutHint, Moe, ModelShape, TrainingShape
from aicluster.perf.tags import (MODEL_TAG, TRAINING_TAG, real_text, real_value, workload_from_tags,
                                 workload_tags)

LABEL = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LLAMA_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)
MIXTRAL = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
                     moe=Moe(experts=8, top_k=2, expert_ffn_hidden=14336))


def test_llama_70b_reads_as_the_docs_show_and_round_trips():
    training = TrainingShape(global_batch_seqs=1024, tokens=1.5e13)
    tags = workload_tags(LLAMA_70B, training)
    assert tags == {MODEL_TAG: "l80h8192a64g8f28672v128256s8192-swiglu", TRAINING_TAG: "b1024-bf16-t15e12"}
    assert workload_from_tags(tags) == ((LLAMA_70B, training, LayoutHint()), "")


def test_a_head_size_apart_from_hidden_over_heads_round_trips():
    wide = ModelShape(layers=48, hidden=12288, heads=64, kv_heads=64, ffn_hidden=49152, vocab=32000, seq_len=2048,
                      head_size=128)
    tags = workload_tags(wide, TrainingShape(global_batch_seqs=256))
    assert tags[MODEL_TAG] == "l48h12288a64g64f49152v32000s2048d128-swiglu"
    assert workload_from_tags(tags)[0].model == wide


def test_moe_and_a_fixed_layout_round_trip():
    training = TrainingShape(global_batch_seqs=512, precision="fp8", tokens=8e12, bytes_per_token=2.5)
    hint = LayoutHint(tp=8, pp=4, ep=8, zero_stage=0, recompute="full", micro_batch=2)
    tags = workload_tags(MIXTRAL, training, hint)
    assert tags[MODEL_TAG].endswith("-swiglu-e8k2x14336")
    assert tags[TRAINING_TAG] == "b512-fp8-t8e12-y25d1-tp8pp4ep8z0mb2-rfull"
    assert workload_from_tags(tags) == ((MIXTRAL, training, hint), "")


@pytest.mark.parametrize("value, text", [(1.5e13, "15e12"), (2.5, "25d1"), (4.0, "4"), (0.0, "0"),
                                         (15_000_000_000_000, "15e12"), (0.1 + 0.2, "30000000000000004d17")])
def test_reals_are_an_integer_mantissa_and_a_power_of_ten(value, text):
    assert real_text(value) == text
    assert real_value(text) == value


def test_a_value_too_long_for_a_label_is_refused_on_encoding():
    huge = ModelShape(layers=10**6, hidden=10**9, heads=10**6, kv_heads=10**6, ffn_hidden=10**9, vocab=10**9,
                      seq_len=10**9, moe=Moe(experts=10**6, top_k=10**6, expert_ffn_hidden=10**9, shared_experts=9))
    with pytest.raises(ValueError, match="at most 63"):
        workload_tags(huge, TrainingShape(global_batch_seqs=1))


@pytest.mark.parametrize("tags, reason", [
    ({}, "no aicluster-model and aicluster-training tags"),
    ({MODEL_TAG: "l80h8192a64g8f28672v128256s8192-swiglu"}, "aicluster-training tag missing"),
    ({MODEL_TAG: "l80h8192a64g8f28672v128256-swiglu", TRAINING_TAG: "b1-bf16"}, "lacks seq_len"),
    ({MODEL_TAG: "l80h8192a64g8f28672v128256s8192-mish", TRAINING_TAG: "b1-bf16"}, "MLP 'mish'"),
    ({MODEL_TAG: "l80l8h8192a64g8f28672v128256s8192-gelu", TRAINING_TAG: "b1-bf16"}, "given twice"),
    ({MODEL_TAG: "l0h8192a64g8f28672v128256s8192-gelu", TRAINING_TAG: "b1-bf16"}, "layers must be >= 1"),
    ({MODEL_TAG: "l8h8a8g8f8v8s8-gelu-e8x8", TRAINING_TAG: "b1-bf16"}, "lacks top_k"),
    ({MODEL_TAG: "l8h8a8g8f8v8s8-gelu", TRAINING_TAG: "b1-fp4"}, "does not start with b<sequences>"),
    ({MODEL_TAG: "l8h8a8g8f8v8s8-gelu", TRAINING_TAG: "b1-bf16-t5-t6"}, "cannot read 't6'"),
    ({MODEL_TAG: "l8h8a8g8f8v8s8-gelu", TRAINING_TAG: "b1-bf16-qq8"}, "unknown key 'qq'"),
    ({MODEL_TAG: "l8h8a8g8f8v8s8-gelu", TRAINING_TAG: "b1-bf16-y0"}, "bytes per token must be > 0"),
    ({MODEL_TAG: 7, TRAINING_TAG: "b1-bf16"}, "not text"),
])
def test_malformed_tags_give_none_and_a_reason(tags, reason):
    workload, why = workload_from_tags(tags)
    assert workload is None and reason in why


_dims = st.integers(min_value=1, max_value=65_536)
models = st.builds(
    ModelShape, layers=st.integers(1, 512), hidden=_dims, heads=st.integers(1, 256), kv_heads=st.integers(1, 256),
    ffn_hidden=st.integers(1, 99_999), vocab=st.integers(1, 99_999), seq_len=st.integers(1, 524_288),
    mlp=st.sampled_from(["swiglu", "gelu", "relu2"]), head_size=st.none() | st.integers(1, 256),
    moe=st.none() | st.builds(Moe, experts=st.integers(1, 512), top_k=st.integers(1, 9),
                              expert_ffn_hidden=st.integers(1, 32_768), shared_experts=st.integers(0, 4)))
trainings = st.builds(
    TrainingShape, global_batch_seqs=st.integers(1, 65_536), precision=st.sampled_from(["bf16", "fp8"]),
    # Token budgets are round figures (15e12); four significant digits keep the tag within 63.
    tokens=st.none() | st.builds(lambda m, e: float(m * 10**e), st.integers(1, 9_999), st.integers(0, 12)),
    bytes_per_token=st.sampled_from([4.0, 2.0, 2.5, 8.0]))
hints = st.builds(
    LayoutHint, tp=st.none() | st.integers(1, 64), pp=st.none() | st.integers(1, 128), dp=st.none() | st.integers(1, 1024),
    cp=st.none() | st.integers(1, 32), ep=st.none() | st.integers(1, 64), zero_stage=st.none() | st.integers(0, 3),
    recompute=st.none() | st.sampled_from(["none", "selective", "full"]), micro_batch=st.none() | st.integers(1, 8),
    virtual_stages=st.none() | st.integers(1, 8))


def test_the_largest_workload_the_strategies_draw_still_fits():
    # Past any published model in each field at once; the spec allows more, and then the design
    # leaves the two tags off (aicluster.design.cluster.ClusterContext.pool_facts).
    model = ModelShape(layers=512, hidden=65_536, heads=256, kv_heads=256, ffn_hidden=99_999, vocab=99_999,
                       seq_len=524_288, head_size=256, moe=Moe(experts=512, top_k=9, expert_ffn_hidden=32_768, shared_experts=4))
    training = TrainingShape(global_batch_seqs=65_536, tokens=9_999e12, bytes_per_token=2.5)
    hint = LayoutHint(tp=64, pp=128, dp=1024, cp=32, ep=64, zero_stage=3, recompute="selective", micro_batch=8,
                      virtual_stages=8)
    assert [len(v) for v in workload_tags(model, training, hint).values()] == [63, 63]


@settings(max_examples=300, deadline=None)
@given(models, trainings, hints)
def test_every_workload_round_trips_within_the_label_alphabet(model, training, hint):
    tags = workload_tags(model, training, hint)
    for value in tags.values():
        assert LABEL.fullmatch(value), value
    assert workload_from_tags(tags) == ((model, training, hint), "")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([MODEL_TAG, TRAINING_TAG, "other"]), st.text(max_size=70)))
def test_decoding_any_text_never_raises(tags):
    workload, why = workload_from_tags(tags)
    assert (workload is None) == bool(why)
