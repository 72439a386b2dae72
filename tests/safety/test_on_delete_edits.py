"""Changing a stored thing's `on_delete` (spec/teardown.py) is a routine edit: no resource is
replaced, no stateful resource loses `protect`, and only the fields the policy owns change:
`retain_on_delete` among the options, and among the inputs only the cloud's deletion protection
and final-backup fields (design/on_delete.py ON_DELETE_FIELDS), each of which the provider
updates in place or reads at deletion only (sources in design/on_delete.py)."""
from __future__ import annotations

import copy

import pytest

from aicluster.design.on_delete import ON_DELETE_FIELDS
from aicluster.design.stateful import stateful_kind, type_key
from tests.support.on_delete import with_policy
from tests.support.replacement import OPTIONS
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_plan, stack_spec_data


def _without(inputs: dict, paths: tuple[str, ...]) -> dict:
    out = copy.deepcopy(inputs)
    for path in paths:
        node = out
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(keys[-1], None)
    return out


@pytest.mark.parametrize("policy", ["snapshot", "delete"])
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_changing_on_delete_updates_in_place(stack, policy):
    before = stack_plan(stack)
    after = plan_with_spec(stack, with_policy(stack_spec_data(stack), policy))
    old, new = {r.urn: r for r in before.resources}, {r.urn: r for r in after.resources}
    assert set(old) == set(new), "an on_delete edit must neither add nor remove resources"
    changed = []
    for urn, a in old.items():
        b = new[urn]
        owned = ON_DELETE_FIELDS.get(type_key(a.type), ()) if stateful_kind(a.type, a.inputs) else ()
        assert _without(a.inputs, owned) == _without(b.inputs, owned), f"{a.name}: an input on_delete does not own"
        for option in OPTIONS:
            if option != "retain_on_delete":
                assert getattr(a, option) == getattr(b, option), f"{a.name}: {option}"
        if a.retain_on_delete != b.retain_on_delete:
            assert stateful_kind(a.type, a.inputs), f"{a.name}: only stateful resources follow on_delete"
            changed.append(a.name)
        if stateful_kind(a.type, a.inputs):
            assert b.protect == a.protect, f"{a.name}: protect must stay as it was"
    assert changed, f"{policy} should change what destroy does on {stack}"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_policy_owned_fields_are_named_by_real_inputs(stack):
    """A field in ON_DELETE_FIELDS that no resource has would make the edit check above vacuous."""
    after = plan_with_spec(stack, with_policy(stack_spec_data(stack), "delete"))
    for r in after.resources:
        if not stateful_kind(r.type, r.inputs):
            continue
        for path in ON_DELETE_FIELDS.get(type_key(r.type), ()):
            top = path.split(".")[0]
            if top in ("finalBackupTags", "finalBackupDescription", "finalSnapshotIdentifier", "deletionProtectionReason"):
                continue    # set under some policies only
            assert top in r.inputs, f"{r.name} ({r.type}) has no input {top}"
