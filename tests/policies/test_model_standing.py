"""The pack's standing cost (policies/rules/model/standing.py) reads the same neutral items off the
raw resources that aicluster.design.standing_cost builds from the design, and prices them with the
same function: for every example stack the plan and the pack agree, item by item and in dollars."""
from __future__ import annotations

import importlib

import pytest

from aicluster.design.standing_cost import standing_cost, standing_items
from aicluster.offline.policy_bridge import RULES_PACKAGE, load_rules, stack_resources
from tests.support.stack_plans import STACK_NAMES, stack_result


def _pack():
    load_rules()
    return (importlib.import_module(f"{RULES_PACKAGE}.model"),
            importlib.import_module(f"{RULES_PACKAGE}.model.standing"))


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_design_and_resources_give_the_same_standing_cost(stack):
    model, standing = _pack()
    result = stack_result(stack)
    cluster = model.build(stack_resources(result.plan))
    assert standing.standing_items_from_resources(cluster) == standing_items(result.design)
    assert standing.standing_from_resources(cluster) == standing_cost(result.design)


def test_a_hand_written_stack_is_read_by_what_it_creates():
    """Resources, not the spec: a second NAT gateway or a deleted secret changes the pack's items."""
    model, standing = _pack()
    resources = [r for r in stack_resources(stack_result("aws-p5-slurm").plan)
                 if r.resource_type != "aws:secretsmanager/secret:Secret"]
    items = {i.item: i for i in standing.standing_items_from_resources(model.build(resources))}
    assert "secrets" not in items
    assert items["NAT gateway"].q("count") == 1 and items["FSx for Lustre"].q("gib") == 24000
    assert items["FSx for Lustre"].region == "us-east-1"


def test_no_resources_no_items():
    model, standing = _pack()
    assert standing.standing_items_from_resources(model.build([])) == ()
