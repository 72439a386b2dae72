"""Where an edit really must change a stateful resource, `protect` stops `pulumi up` from
replacing or deleting it (docs/data-safety.md, "Replacing a protected resource on purpose").

Every stateful resource (components/aicluster/design/stateful.py) of every stack carries `protect` and
`retain_on_delete` on the resource itself (mocks and the policy engine do not see inherited
options). The one opt-out is a filesystem whose spec entry says `protect: false` (scratch).

The rule with `on_delete` (spec/teardown.py, docs/teardown.md): `protect` stays on whatever the
policy says (a plain `pulumi destroy` is refused; only `aicluster destroy` unprotects, and only
what the policy allows); `retain_on_delete` is on exactly under `retain`, the default.
"""
from __future__ import annotations

import copy

import pytest

from aicluster.design.stateful import STATEFUL_TYPES, stateful_kind, stateful_resources
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_plan, stack_spec_data
from tests.support.on_delete import with_policy
from tests.support.replacement import differences


def _opted_out(resource, spec: dict) -> bool:
    """A filesystem of a storage entry with `protect: false` (its resources are named after it)."""
    if stateful_kind(resource.type, resource.inputs) not in ("filesystem", "volume"):
        return False
    return any(fs.get("protect") is False and f"-{fs['name']}-" in f"{resource.name}-"
               for fs in spec.get("storage") or [])


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stateful_resource_is_protected_and_retained(stack):
    spec = stack_spec_data(stack)
    unguarded = [f"{r.name} ({r.type}): protect={r.protect} retain_on_delete={r.retain_on_delete}"
                 for r in stateful_resources(stack_plan(stack).resources)
                 if not (r.protect and r.retain_on_delete) and not _opted_out(r, spec)]
    assert not unguarded, "\n".join(unguarded)


def test_scratch_storage_may_opt_out_and_nothing_else_does(plan_spec, base_spec):
    base_spec["storage"].append({"name": "scratch", "type": "lustre", "mount": "/scratch",
                                 "capacity_gib": 1200, "deployment_type": "SCRATCH_2", "protect": False})
    plan = plan_spec(base_spec)
    unguarded = {r.name for r in stateful_resources(plan.resources) if not r.protect}
    assert unguarded == {"demo-scratch-fs"}
    assert all(r.protect and r.retain_on_delete for r in stateful_resources(plan.resources)
               if r.name != "demo-scratch-fs")


# Edits that are not routine: they change what a stateful resource is. Pulumi would replace it;
# `protect` makes `pulumi up` stop instead, and docs/data-safety.md says how to proceed on purpose.
NON_ROUTINE = {
    "zone": lambda s: s.update(zone=s["region"] + ("b" if s["cloud"] == "aws" else "-b")
                               if not s["zone"].endswith(("b", "-b")) else s["region"] + ("c" if s["cloud"] == "aws" else "-c")),
    "cluster-name": lambda s: s.update(name=(s["name"] + "-2")[:32]),
    "filesystem-name": lambda s: [fs.update(name=f"{fs['name']}2"[:24]) for fs in (s.get("storage") or [])[:1]],
}


@pytest.mark.parametrize("change", sorted(NON_ROUTINE))
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_edits_that_do_change_stateful_resources_hit_protected_ones(stack, change):
    before_spec = stack_spec_data(stack)
    after_spec = copy.deepcopy(before_spec)
    NON_ROUTINE[change](after_spec)
    if after_spec == before_spec:
        pytest.skip(f"{change} does not apply to {stack} (no filesystem)")
    before, after = plan_with_spec(stack, before_spec), plan_with_spec(stack, after_spec)
    touched = {p.split(" ")[1] for p in differences(before, after, allow_tags=False)}
    assert touched, f"{change} should change a stateful resource of {stack}"
    by_name = {r.name: r for r in stateful_resources(before.resources)}
    for name in touched:
        resource = by_name[name]
        assert resource.protect or _opted_out(resource, before_spec), \
            f"{change} on {stack} would replace unprotected {name} ({resource.type})"


def test_the_stateful_table_names_real_provider_types():
    """Each token is `package:module/resource` as Pulumi spells it (checked against the SDKs
    that are installed), so a typo cannot quietly exempt a resource."""
    import importlib

    packages = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "random": "pulumi_random", "tls": "pulumi_tls"}
    for kind, tokens in STATEFUL_TYPES.items():
        for token in tokens:
            package, rest = token.split(":")
            module, resource = rest.split("/")
            try:
                sdk = importlib.import_module(packages[package])
            except ImportError:
                continue   # pulumi_tls is not a dependency; its token is the documented one
            cls_name = resource[0].upper() + resource[1:]
            owner = getattr(sdk, module) if module != "index" else sdk
            assert hasattr(owner, cls_name), f"{kind}: {token} is not a {packages[package]} resource"



@pytest.mark.parametrize("policy", ["retain", "snapshot", "delete"])
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_on_delete_decides_retain_and_never_protect(stack, policy):
    """Under every policy each stateful resource stays protected; retained only under retain (the
    slurmdbd password stays while the database it opens does: it follows the database)."""
    spec = with_policy(stack_spec_data(stack), policy)
    plan = plan_with_spec(stack, spec)
    wrong = [f"{r.name} ({r.type}): protect={r.protect} retain_on_delete={r.retain_on_delete}"
             for r in stateful_resources(plan.resources) if not _opted_out(r, spec)
             and (not r.protect or r.retain_on_delete != (policy == "retain" or _kept_anyway(r, spec)))]
    assert not wrong, "\n".join(wrong)


def _kept_anyway(resource, spec: dict) -> bool:
    """What stays under every policy: a control plane (EKS, GKE: no on_delete of its own) and
    the slurmdbd password while the managed database it opens is retained."""
    if stateful_kind(resource.type, resource.inputs) == "control-plane":
        return True
    slurm = spec.get("slurm") or {}
    return "-slurmdbd" in resource.name and "-slurm-" in resource.name and \
        slurm.get("accounting") == "managed" and slurm.get("accounting_on_delete", "retain") == "retain"
