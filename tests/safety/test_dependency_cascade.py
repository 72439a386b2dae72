"""The dependency check of tests/support/replacement.py is the package's (aicluster.offline.plan_diff):
on a real stack, an edit that replaces a subnet hands the filesystem in it a new subnet id, and both
the safety comparison and `aicluster diff` say so, though the fake cloud's ids (derived from names)
leave the filesystem's own inputs unchanged (ParallelCluster #4651). And the in-place keys the
login test allows for dependencies are never keys the replacement table says replace."""
from __future__ import annotations

import copy

from aicluster.catalog.replacement import load_replacement
from aicluster.offline.plan_diff import REPLACE, diff_plans
from tests.support.replacement import IN_PLACE_KEYS_BY_TYPE, differences
from tests.support.stack_plans import plan_with_spec, stack_plan, stack_spec_data

STACK = "aws-p5-slurm"


def _new_vpc_cidr():
    spec = copy.deepcopy(stack_spec_data(STACK))
    spec.setdefault("network", {})["vpc_cidr"] = "10.8.0.0/16"
    return stack_plan(STACK), plan_with_spec(STACK, spec)


def test_a_replaced_subnet_reaches_the_filesystem_through_the_cascade():
    before, after = _new_vpc_cidr()
    fsx = next(r for r in before.resources if r.type == "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert {k: v for k, v in fsx.inputs.items() if k == "subnetIds"} == \
        {k: v for k, v in after.get(fsx.urn).inputs.items() if k == "subnetIds"}   # the fake ids hide it
    change = next(c for c in diff_plans(before, after).changes if c.name == fsx.name)
    assert change.action == REPLACE and change.dangerous
    assert any("aws:ec2/subnet:Subnet" in why and "subnetIds" in why for why in change.replaced_by), change
    problems = differences(before, after, allow_tags=False)
    assert any(p.startswith(f"filesystem {fsx.name}") and "aws:ec2/subnet:Subnet" in p and "would be replaced" in p
               for p in problems), problems


def test_in_place_keys_allowed_for_dependencies_are_not_replacing_keys():
    table = load_replacement()
    for rtype, keys in IN_PLACE_KEYS_BY_TYPE.items():
        rules = table.rules(rtype)
        assert rules is not None and not rules.immutable, rtype
        replacing = {r.key.split(".")[0] for r in rules.replace}
        assert not keys & replacing, (rtype, sorted(keys & replacing))
