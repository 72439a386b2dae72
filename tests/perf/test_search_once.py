"""The layout search runs once per design and workload in a process: `aicluster plan` asks for the
same estimate from its Training section, the monitoring thresholds (in the program and for the
rule files) and the policy pack (AIC-MEM-002 also on less HBM, the headroom check); each used to
run the whole search again. And a remembered search gives the answer a fresh one gives."""
from __future__ import annotations

import copy
import dataclasses
import importlib

import pytest
import yaml

from aicluster.commands import plan_report
from aicluster.errors import SpecError
from aicluster.perf import LayoutHint, ModelShape, Moe, TrainingShape, estimate, what_if
from aicluster.commands.planner import plan_stack
from aicluster.commands.stacks import read_stack
from tests.support import STACK_NAMES

# `aicluster.perf.estimate` is also the name of the function the package exports: import the modules.
SEARCH = importlib.import_module("aicluster.perf.search")
ESTIMATE = importlib.import_module("aicluster.perf.estimate")

LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)


@pytest.fixture
def searches(monkeypatch) -> list[tuple]:
    """The arguments of every layout search (perf.search.layouts) from here on, none remembered."""
    calls: list[tuple] = []
    original = SEARCH.layouts

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    for module in (SEARCH, ESTIMATE):     # wherever the search is looked up
        monkeypatch.setattr(module, "layouts", counted, raising=False)
    ESTIMATE.clear_search_cache()
    return calls


@pytest.mark.parametrize("name", STACK_NAMES)
def test_a_plan_searches_the_layouts_once(name, searches):
    """`aicluster plan --format json` (and the text and markdown reports of the same plan): the
    estimate, the monitoring thresholds and the policy pack's verdicts share one search."""
    result = plan_stack(name)
    report = plan_report.to_json(result)
    plan_report.text(result)
    plan_report.markdown(result)
    assert report["estimate"]["status"] == "estimated"
    # One search per placement of the job: one on HGX nodes and TPU slices, two on NVL72 (every GPU
    # of each domain, 16 of its 18 nodes: perf.hardware.placements), each run once.
    placed = {args[1] for args in searches}
    assert len(searches) == len(placed) <= 2, f"{len(searches)} layout searches for one plan of {name}"


def test_a_different_workload_is_searched_again(searches, tmp_path):
    """Two clusters, two searches: the memo is keyed by what the search depends on."""
    base = read_stack("aws-p5-slurm")
    spec = copy.deepcopy(base.spec_data)
    spec["pools"][0]["max_nodes"] = 2 * spec["pools"][0]["max_nodes"]
    other = tmp_path / "Pulumi.twice.yaml"
    other.write_text(yaml.safe_dump({"config": {**base.config, "aicluster:cluster": spec}}, sort_keys=False))
    for target in ("aws-p5-slurm", str(other), "aws-p5-slurm", str(other)):
        plan_report.to_json(plan_stack(target))
    assert len(searches) == 2
    assert sorted(args[1].count for args in searches) == [128, 256]


@pytest.mark.parametrize("model,training,hw", [
    (LLAMA3_70B, TrainingShape(1024, tokens=15e12), what_if("h100", 16)),
    (ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
                moe=Moe(experts=8, top_k=2, expert_ffn_hidden=14336)), TrainingShape(256), what_if("a100", 4)),
], ids=["llama3-70b-h100", "mixtral-a100"])
def test_a_remembered_search_answers_as_a_fresh_one(model, training, hw, searches):
    """Less HBM after more (the headroom check), then the same again: each answer equals the one
    a process that never searched before gives, and the search ran once."""
    tighter = dataclasses.replace(hw, hbm_gib=0.8 * hw.hbm_gib)
    remembered = [estimate(model, training, h, top=5) for h in (hw, tighter)]
    assert len(searches) == 1
    for h, answer in zip((hw, tighter), remembered):
        ESTIMATE.clear_search_cache()
        assert estimate(model, training, h, top=5) == answer
    assert remembered[1].layouts_fitting < remembered[0].layouts_fitting
    assert all(c.memory.capacity == tighter.hbm_gib for c in remembered[1].candidates)


def test_a_fixed_layout_that_cannot_work_names_its_key_after_a_remembered_search(searches):
    """The memo holds the search, not the check of the user's fixed keys: the error still names
    the caller's path."""
    hw, training = what_if("h100", 16), TrainingShape(512)
    estimate(LLAMA3_70B, training, hw)
    for at in ("workload.parallelism", "aicluster-training"):
        with pytest.raises(SpecError, match=f"{at}.tp"):
            estimate(LLAMA3_70B, training, hw, hint=LayoutHint(tp=3), at=at)


def test_nvl72_searches_each_placement_once(searches):
    """On NVL72 the estimate searches two placements (all 72 GPUs of a domain, 64 of them); asked
    again, it searches neither again."""
    hw = what_if("gb200", 36)
    for _ in range(2):
        estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=512), hw)
    assert len(searches) == 2 and {args[1].count for args in searches} == {144, 128}
