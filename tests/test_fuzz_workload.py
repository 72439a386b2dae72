"""Property: for ANY workload file (the model, training and parallelism sections, mostly sane,
sometimes junk) on a what-if cluster, `aicluster estimate` answers (text, JSON, --compare) or
raises SpecError. Nothing else may escape the training model: not ZeroDivisionError, OverflowError,
KeyError from an unknown accelerator, ValueError from a layout no search should have tried.
Set AICLUSTER_FUZZ_EXAMPLES to run more examples (CI's nightly job raises it)."""
from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aicluster.errors import SpecError
from aicluster.commands.estimate import answer
from aicluster.commands.workload_file import read_workload_data
from tests.support.fuzz import json_values

# Fewer than the spec fuzzer: each example may search thousands of layouts.
FUZZ = settings(max_examples=int(os.environ.get("AICLUSTER_FUZZ_EXAMPLES", 200)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

LLAMA3_8B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256,
             "seq_len": 8192}
ACCELERATORS = ["h100", "h200", "b200", "a100", "a100-80gb", "trainium2", "v4", "v5e", "v5p", "v6e", "H100"]


powers = st.sampled_from([1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024])
# Mostly sizes that fit somewhere, now and then the spec's extremes (the model must not overflow).
sizes = st.integers(0, 9).flatmap(lambda i: st.sampled_from([65_536, 262_144, 1_048_576]) if i == 0
                                  else st.one_of(powers, st.integers(1, 16384)))

moe = st.fixed_dictionaries({"experts": st.integers(1, 256), "top_k": st.integers(1, 8), "expert_ffn_hidden": sizes},
                            optional={"shared_experts": st.integers(0, 4)})

model = st.fixed_dictionaries(
    {"layers": st.one_of(st.integers(1, 96), st.just(4096)), "hidden": st.sampled_from([64, 512, 2048, 4096, 8192]),
     "heads": powers, "ffn_hidden": sizes, "vocab": st.sampled_from([1, 32000, 128256, 16_777_216]),
     "seq_len": st.sampled_from([1, 128, 2048, 8192, 131_072, 16_777_216])},
    optional={"head_dim": st.sampled_from([64, 128]), "mlp": st.sampled_from(["swiglu", "gelu", "relu2"]),
              "moe": moe})

training = st.fixed_dictionaries(
    {"global_batch_seqs": st.one_of(st.integers(1, 4096), st.integers(1, 100_000))},
    optional={"precision": st.sampled_from(["bf16", "fp8"]),
              "tokens": st.one_of(st.floats(1, 1e17), st.just("15.0e12")),
              "bytes_per_token": st.floats(0.5, 4096)})

parallelism = st.fixed_dictionaries({}, optional={
    "tp": powers, "pp": powers, "dp": powers, "cp": st.sampled_from([1, 2, 4]), "ep": st.sampled_from([1, 2, 8]),
    "zero_stage": st.integers(0, 3), "recompute": st.sampled_from(["none", "selective", "full"]),
    "micro_batch": st.sampled_from([1, 2, 4, 64]), "virtual_stages": st.sampled_from([1, 2, 5])})

hardware = st.fixed_dictionaries({"accelerator": st.sampled_from(ACCELERATORS),
                                  "nodes": st.one_of(st.integers(1, 64), st.sampled_from([128, 1024]))},
                                 optional={"inter_node_gbps_per_node": st.sampled_from([1, 400, 3200])})

@st.composite
def models(draw) -> dict:
    """A model whose heads and KV heads agree (the spec's own checks are tests/test_workload_spec.py):
    what the training model gets to see."""
    doc = draw(model)
    if "head_dim" not in doc:
        doc["hidden"] = max(doc["hidden"] // doc["heads"], 1) * doc["heads"]
    if draw(st.booleans()):
        doc["kv_heads"] = draw(st.sampled_from([d for d in range(1, doc["heads"] + 1) if doc["heads"] % d == 0]))
    return doc


sane_workloads = st.fixed_dictionaries(
    {"model": models(), "cluster": st.fixed_dictionaries({"hardware": hardware})},
    optional={"training": training, "parallelism": parallelism, "model_params_b": st.floats(0.001, 2000),
              "checkpoint_interval_min": st.floats(0.5, 600), "max_checkpoint_stall_pct": st.floats(0.1, 50),
              "clusters": st.lists(st.fixed_dictionaries({"hardware": hardware}), max_size=2)})


@st.composite
def junk_workloads(draw) -> dict:
    """A sane workload with one value, anywhere in it, replaced by anything JSON can hold."""
    doc = draw(sane_workloads)
    section = draw(st.sampled_from([k for k in doc if isinstance(doc[k], dict)] + [None]))
    target = doc if section is None else doc[section]
    key = draw(st.sampled_from(sorted(target) + ["extra"]))
    target[key] = draw(json_values)
    return doc


# Mostly workloads the training model itself gets to (its arithmetic is what is under test), a
# quarter with one value broken.
workloads = st.integers(0, 3).flatmap(lambda i: junk_workloads() if i == 0 else sane_workloads)


def _answer_or_spec_error(doc, compare: bool = False, fmt: str = "json"):
    try:
        text = answer(read_workload_data(doc, "fuzz.yaml"), fmt, compare)
    except SpecError as err:
        assert err.problems and str(err).strip()
        for problem in err.problems:
            assert isinstance(problem.path, str) and problem.allowed
        return err
    assert text.strip()
    if fmt == "json":
        json.loads(text)   # every number JSON can carry (no NaN, no Infinity)
    return text


def _no_nan(text: str) -> bool:
    return "NaN" not in text and "Infinity" not in text


@FUZZ
@given(workloads)
@example({"model": LLAMA3_8B, "cluster": {"hardware": {"accelerator": "h100", "nodes": 4}}})
@example({"model": LLAMA3_8B | {"seq_len": 16_777_216, "vocab": 16_777_216},
          "cluster": {"hardware": {"accelerator": "v5e", "nodes": 1}}})
@example({"model": LLAMA3_8B | {"moe": {"experts": 256, "top_k": 8, "expert_ffn_hidden": 1_048_576}},
          "parallelism": {"ep": 8}, "cluster": {"hardware": {"accelerator": "b200", "nodes": 64}}})
@example({"model": LLAMA3_8B, "parallelism": {"tp": 1024, "pp": 1024},
          "cluster": {"hardware": {"accelerator": "h100", "nodes": 1}}})
def test_any_workload_estimates_or_raises_spec_error(doc):
    result = _answer_or_spec_error(doc)
    if isinstance(result, str):
        assert _no_nan(result), result[:2000]


@FUZZ
@given(workloads)
def test_any_workload_compares_and_prints_text_or_raises_spec_error(doc):
    _answer_or_spec_error(doc, compare=True, fmt="text")


def test_the_property_can_fail():
    """The helper is not a tautology: an unknown accelerator is a SpecError, a valid workload an answer."""
    ok = _answer_or_spec_error({"model": LLAMA3_8B, "cluster": {"hardware": {"accelerator": "h100", "nodes": 4}}})
    assert isinstance(ok, str) and json.loads(ok)["estimate"]["accelerators"] == 32
    bad = _answer_or_spec_error({"model": LLAMA3_8B, "cluster": {"hardware": {"accelerator": "h1000", "nodes": 4}}})
    assert isinstance(bad, SpecError) and bad.problems[0].path == "cluster.hardware.accelerator"
