"""The workload facts a pool's template carries (ClusterContext.pool_facts): the size hints the
policy pack always read, and the described model and training as aicluster-model and
aicluster-training (aicluster.perf.tags), which decode back to what the plan estimates."""
from __future__ import annotations

from aicluster.design.cluster import design_cluster
from aicluster.perf import ModelShape
from aicluster.perf.flops import parameter_count
from aicluster.perf.tags import MODEL_TAG, TRAINING_TAG, workload_from_tags
from aicluster.spec.cluster import parse_spec
from aicluster.design.workload_shapes import shapes

LLAMA_70B = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256,
             "seq_len": 8192}
BASE = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 16}]}


def _facts(workload: dict | None) -> dict[str, str]:
    design = design_cluster(parse_spec({**BASE, **({"workload": workload} if workload else {})}))
    return design.pool_facts(design.pools[0])


def test_model_params_b_alone_keeps_the_three_hints_and_no_model_tags():
    facts = _facts({"model_params_b": 70})
    assert facts["aicluster-model-params-b"] == "70"
    assert facts["aicluster-checkpoint-interval-min"] == "30" and facts["aicluster-max-checkpoint-stall-pct"] == "5"
    assert MODEL_TAG not in facts and TRAINING_TAG not in facts


def test_a_described_model_adds_both_tags_and_counts_its_parameters():
    workload = {"model": LLAMA_70B, "training": {"global_batch_seqs": 1024, "tokens": 15e12},
                "parallelism": {"tp": 8, "recompute": "selective"}}
    facts = _facts(workload)
    assert facts[MODEL_TAG] == "l80h8192a64g8f28672v128256s8192-swiglu"
    assert facts[TRAINING_TAG] == "b1024-bf16-t15e12-tp8-rsel"
    # counted from the shape (no model_params_b given): Llama 3 70B's 70.6 B
    assert facts["aicluster-model-params-b"] == f"{parameter_count(ModelShape(**LLAMA_70B)) / 1e9:g}"
    assert 70 < float(facts["aicluster-model-params-b"]) < 71
    design = design_cluster(parse_spec({**BASE, "workload": workload}))
    assert workload_from_tags(facts) == (shapes(design.workload), "")


def test_no_workload_no_hints():
    assert set(_facts(None)) == {"aicluster-min-nodes", "aicluster-max-nodes"}


def test_a_model_too_large_to_spell_in_63_characters_goes_untagged():
    # Inside the spec's bounds, past any published model: the pack falls back to model_params_b.
    huge = {"layers": 4096, "hidden": 262_144, "heads": 4096, "kv_heads": 4096, "ffn_hidden": 1_048_576,
            "vocab": 16_777_216, "seq_len": 16_777_216, "moe": {"experts": 4096, "top_k": 4096,
                                                                "expert_ffn_hidden": 1_048_576}}
    facts = _facts({"model": huge, "model_params_b": 1000})
    assert MODEL_TAG not in facts and facts["aicluster-model-params-b"] == "1000"
