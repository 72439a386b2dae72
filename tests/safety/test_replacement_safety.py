"""Replacement safety: no routine spec edit touches a stateful resource, on any example stack.

For every stack in stacks/ and every edit in routine_edits.EDITS, plan the spec before and after
the edit (the real program under mocks, as `aicluster plan` does) and require every stateful
resource (components/aicluster/design/stateful.py: filesystems, the Slurm head node, secrets and the random bytes
behind them, databases, EKS/GKE control planes) to be unchanged: the same URN (type, name and
parent chain), the same inputs and the same resource options. Then `pulumi up` has nothing to
update, let alone replace. A tag edit may change tags/labels only (they update in place).

ParallelCluster lost filesystems to a subnet or security-group change (#4651) and to updates
that replaced a managed FSx (#6211); Cluster Toolkit replaced the controller on reconfigure
(#2774). These tests are why aicluster cannot.
"""
from __future__ import annotations

import pytest

from aicluster.errors import SpecError
from aicluster.design.stateful import stateful_resources
from tests.support.routine_edits import EDITS, NotApplicable
from tests.support.replacement import differences
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_plan, stack_spec_data

# Options that decide whether `pulumi up` replaces, deletes or protects a resource.
def _pair(stack: str, edit):
    try:
        return edit.make(stack_spec_data(stack))
    except NotApplicable as reason:
        pytest.skip(f"{edit.id} does not apply to {stack}: {reason}")


def test_every_stack_has_stateful_resources_to_protect():
    for stack in STACK_NAMES:
        assert stateful_resources(stack_plan(stack).resources), f"{stack}: no stateful resource found"


@pytest.mark.parametrize("edit", EDITS, ids=[e.id for e in EDITS])
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_routine_edit_leaves_every_stateful_resource_untouched(stack, edit):
    before_spec, after_spec = _pair(stack, edit)
    assert before_spec != after_spec, f"{edit.id} made no change to {stack}"
    try:
        before, after = plan_with_spec(stack, before_spec), plan_with_spec(stack, after_spec)
    except SpecError as err:   # a routine edit of a valid stack must stay valid
        pytest.fail(f"{edit.id} ({edit.what}) made {stack}'s spec invalid:\n{err}")
    assert stateful_resources(before.resources)
    problems = differences(before, after, allow_tags=edit.changes_tags)
    assert not problems, f"{edit.id} ({edit.what}) on {stack}:\n  " + "\n  ".join(problems)
    # Say so when the edit never reached the plan: then the comparison above proved nothing.
    if {r.urn: r.inputs for r in after.resources} == {r.urn: r.inputs for r in before.resources}:
        pytest.skip(f"{edit.id} ({edit.what}) changes nothing in {stack}'s plan")


@pytest.mark.parametrize("edit", [e for e in EDITS if e.changes_tags], ids=lambda e: e.id)
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_tag_edits_reach_the_stateful_resources_in_place(stack, edit):
    """A tag edit is not a no-op: the new tags land on the (untouched) stateful resources."""
    before_spec, after_spec = _pair(stack, edit)
    after = plan_with_spec(stack, after_spec)
    wanted = after_spec["tags"]
    tagged = [r for r in stateful_resources(after.resources)
              if isinstance(r.inputs.get("tags") or r.inputs.get("labels"), dict)]
    assert tagged, f"{stack}: no stateful resource carries tags"
    for resource in tagged:
        tags = resource.inputs.get("tags") or resource.inputs.get("labels")
        for key, value in wanted.items():
            assert tags.get(key) == value, f"{resource.name}: tag {key} is {tags.get(key)!r}, not {value!r}"


# --- the comparison itself can fail -------------------------------------------------------------


def test_a_changed_filesystem_input_is_reported(plan_spec, base_spec):
    """The safety comparison is not vacuous: an edit that does change the FSx (its capacity)
    is caught, and so is one that renames it (a new URN: delete + create)."""
    before = plan_spec(base_spec)
    bigger = {**base_spec, "storage": [{**base_spec["storage"][0], "capacity_gib": 48000}]}
    assert any("input storageCapacity changed" in p for p in differences(before, plan_spec(bigger), False))
    renamed = {**base_spec, "storage": [{**base_spec["storage"][0], "name": "data"}]}
    assert any("gone" in p for p in differences(before, plan_spec(renamed), False))


def test_a_changed_tag_is_reported_unless_tags_may_change(plan_spec, base_spec):
    before = plan_spec(base_spec)
    after = plan_spec({**base_spec, "tags": {"team": "other"}})
    assert any("input tags changed" in p for p in differences(before, after, allow_tags=False))
    assert differences(before, after, allow_tags=True) == []
