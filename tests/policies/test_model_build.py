"""The pack's cluster model (policies/rules/model.build) is built once per pack run: every stack
rule asks for the model of the same resources, and only `poolNodes` of a rule's config changes
it. A different resource list, a changed one, or other pool sizes give a model of their own."""
from __future__ import annotations

import importlib

from aicluster.offline.policy_bridge import RULES_PACKAGE, load_rules, run_policies, stack_resources
from tests.support.stack_plans import stack_plan

STACK = "aws-p5-slurm"


def _model():
    load_rules()
    return importlib.import_module(f"{RULES_PACKAGE}.model")


def test_the_same_resources_and_pool_sizes_give_the_same_model():
    model, resources = _model(), stack_resources(stack_plan(STACK))
    first = model.build(resources, {"minHeadroomPct": 10})
    assert model.build(resources, {"ceilingUsd": 1}) is first       # other config keys: the same model
    assert model.build(resources) is first
    assert [p.key for p in first.pools] == ["gpu"]


def test_other_pool_sizes_give_another_model():
    model, resources = _model(), stack_resources(stack_plan(STACK))
    default = model.build(resources, {})
    sized = model.build(resources, {"poolNodes": {"gpu": 3}})
    assert sized is not default
    assert (sized.pools[0].nodes, sized.pools[0].nodes_source) == (3, "policy config poolNodes")
    assert default.pools[0].nodes != 3
    assert model.build(resources, {"poolNodes": {"gpu": 3}}) is sized


def test_another_or_changed_resource_list_gives_another_model():
    model, resources = _model(), stack_resources(stack_plan(STACK))
    first = model.build(resources, {})
    copy = list(resources)
    assert model.build(copy, {}) is not first
    assert model.build([], {}).pools == []
    resources.append(resources.pop(0))            # the same list, changed in place
    assert model.build(resources, {}) is not first


def test_a_pack_run_builds_the_model_once(monkeypatch):
    """Fifteen stack rules, one model (building it was two fifths of the pack's time)."""
    model = _model()
    built = []
    original = model._aws_pools          # the finders run once per model built

    def counted(ix, config):
        built.append(len(ix.resources))
        return original(ix, config)

    monkeypatch.setattr(model, "_aws_pools", counted)
    verdicts = run_policies(stack_plan(STACK))
    assert len(verdicts) > 15
    assert len(built) == 1, f"the model was built {len(built)} times in one pack run"
