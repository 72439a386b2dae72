"""Login nodes survive every routine edit: on every Slurm stack and for every edit in
routine_edits.EDITS, each login instance keeps its URN, options and inputs (its user data above
all: a new user data would stop the instance on AWS), and nothing it depends on changes an input
that could give it a new id. A tag edit may change tags and labels only.

Login nodes are not stateful (stateful.py), so test_replacement_safety does not look at them;
replacing one would still log every user out and kill their shells, which a routine edit must not.
"""
from __future__ import annotations

import pytest

from aicluster.errors import SpecError
from aicluster.design.stateful import IN_PLACE_METADATA_KEYS
from tests.support.replacement import IN_PLACE_KEYS_BY_TYPE, OPTIONS, _changed_keys, dependency_closure
from tests.support.routine_edits import EDITS, NotApplicable
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_spec_data

INSTANCES = ("aws:ec2/instance:Instance", "gcp:compute/instance:Instance")
SLURM_STACKS = [s for s in STACK_NAMES if stack_spec_data(s).get("scheduler", "slurm") == "slurm"]


def login_instances(plan) -> list:
    def role(r):
        tags = r.inputs.get("tags") if r.type.startswith("aws:") else r.inputs.get("labels")   # gcp tags: a list
        return (tags or {}).get("aicluster-role")
    return [r for r in plan.resources if r.type in INSTANCES and role(r) == "login"]


def login_differences(before, after, allow_tags: bool) -> list[str]:
    found = []
    after_by_urn = {r.urn: r for r in after.resources}
    metadata = IN_PLACE_METADATA_KEYS if allow_tags else frozenset()
    for old in login_instances(before):
        new = after_by_urn.get(old.urn)
        if new is None:
            found.append(f"{old.name}: gone (replaced or deleted)")
            continue
        found += [f"{old.name}: option {o}" for o in OPTIONS if getattr(old, o) != getattr(new, o)]
        found += [f"{old.name}: input {k} changed" for k in _changed_keys(old, new, metadata)]
        for dep in dependency_closure(before, old):
            dep_new = after_by_urn.get(dep.urn)
            keys = ["<gone>"] if dep_new is None else _changed_keys(
                dep, dep_new, metadata | IN_PLACE_KEYS_BY_TYPE.get(dep.type, set()))
            if keys:
                found.append(f"{old.name}: depends on {dep.name} ({dep.type}), whose {', '.join(keys)} changed")
    return found


def test_every_slurm_stack_has_a_login_node():
    assert SLURM_STACKS
    for stack in SLURM_STACKS:
        assert login_instances(plan_with_spec(stack, stack_spec_data(stack))), stack


# Booting a new node image replaces the login nodes by design (docs/images.md, Updating); every
# other routine edit leaves them alone.
KEEPS_LOGIN = [e for e in EDITS if not e.new_login_image]


@pytest.mark.parametrize("edit", KEEPS_LOGIN, ids=[e.id for e in KEEPS_LOGIN])
@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_routine_edit_leaves_login_nodes_untouched(stack, edit):
    try:
        before_spec, after_spec = edit.make(stack_spec_data(stack))
    except NotApplicable as reason:
        pytest.skip(f"{edit.id} does not apply to {stack}: {reason}")
    try:
        before, after = plan_with_spec(stack, before_spec), plan_with_spec(stack, after_spec)
    except SpecError as err:
        pytest.fail(f"{edit.id} made {stack}'s spec invalid:\n{err}")
    assert login_instances(before)
    problems = login_differences(before, after, allow_tags=edit.changes_tags)
    assert not problems, f"{edit.id} ({edit.what}) on {stack}:\n  " + "\n  ".join(problems)


def test_the_comparison_can_fail(base_spec):
    """A login node's own setting (its type) is reported: the check above is not vacuous."""
    from tests.support import run_spec

    bigger = {**base_spec, "slurm": {"login": {"instance_type": "m7i.xlarge"}}}
    assert any("instanceType" in p for p in login_differences(run_spec(base_spec), run_spec(bigger), False))
