"""catalog/replacement.yaml, the table `aicluster diff` reads: complete for every custom resource type
any stack or contract variant plans (a type it lacks is named), every entry sourced, and the
loader refuses a malformed entry rather than guessing."""
from __future__ import annotations

import pytest
import yaml

from aicluster.catalog import CatalogError
from aicluster.catalog import replacement as replacement_module
from aicluster.catalog.replacement import CONDITIONS, load_replacement
from tests.support.contract_plans import variants
from tests.support.stack_plans import STACK_NAMES, stack_plan

SOURCE_PREFIXES = ("https://github.com/hashicorp/terraform-provider-aws/",
                   "https://github.com/hashicorp/terraform-provider-google/",
                   "https://github.com/hashicorp/terraform-provider-google-beta/",
                   "https://github.com/hashicorp/terraform-provider-random/",
                   "https://github.com/hashicorp/terraform-provider-tls/",
                   "https://github.com/pulumi/pulumi-kubernetes/",
                   "https://docs.aws.amazon.com/", "https://cloud.google.com/")


def planned_types(plans) -> dict[str, str]:
    """type -> the first plan (by id) that has a custom resource of it."""
    found: dict[str, str] = {}
    for plan_id, plan in plans:
        for resource in plan.resources:
            if resource.custom and resource.type != "pulumi:pulumi:Stack":
                found.setdefault(resource.type, plan_id)
    return found


def missing_types(types: dict[str, str]) -> list[str]:
    table = load_replacement()
    return [f"{t} (planned by {where})" for t, where in sorted(types.items()) if table.rules(t) is None]


def test_every_type_a_stack_plans_has_rules():
    missing = missing_types(planned_types((s, stack_plan(s)) for s in STACK_NAMES))
    assert not missing, "replacement.yaml has no entry for:\n  " + "\n  ".join(missing)


def test_every_type_a_contract_variant_plans_has_rules():
    extra = [v for v in variants() if v.spec is not None]
    missing = missing_types(planned_types((v.id, v.result().plan) for v in extra))
    assert not missing, "replacement.yaml has no entry for:\n  " + "\n  ".join(missing)


def test_the_completeness_check_names_a_missing_type():
    assert missing_types({"aws:fsx/windowsFileSystem:WindowsFileSystem": "a-stack"}) == \
        ["aws:fsx/windowsFileSystem:WindowsFileSystem (planned by a-stack)"]


def test_every_entry_and_rule_is_sourced_from_a_provider_or_an_api_doc():
    for token, rules in load_replacement().types.items():
        assert rules.source.startswith(SOURCE_PREFIXES), (token, rules.source)
        for rule in rules.replace:
            assert rule.source.startswith(SOURCE_PREFIXES), (token, rule.key, rule.source)
            assert rule.when in CONDITIONS


def test_the_rules_the_diff_relies_on():
    """The done-when cases and the roll: FSx deployment type and a capacity decrease replace, a launch
    template changes in place but for its name, a GCP instance template is immutable."""
    table = load_replacement()
    fsx = {r.key: r.when for r in table.rules("aws:fsx/lustreFileSystem:LustreFileSystem").replace}
    assert fsx["deploymentType"] == "changed" and fsx["storageCapacity"] == "decrease"
    template = table.rules("aws:ec2/launchTemplate:LaunchTemplate")
    assert {r.key for r in template.replace} == {"name", "namePrefix"} and not template.immutable
    assert table.rules("gcp:compute/instanceTemplate:InstanceTemplate").immutable
    assert "instanceType" in table.rules("aws:ec2/instance:Instance").restart


@pytest.mark.parametrize("entry, message", [
    ({"replace": ["name"]}, "source"),
    ({"source": "https://github.com/hashicorp/terraform-provider-aws/x.go"}, "replace"),
    ({"source": "https://github.com/hashicorp/terraform-provider-aws/x.go", "replace": [{"key": "a", "when": "shrunk"}]},
     "when"),
    ({"source": "https://github.com/hashicorp/terraform-provider-aws/x.go", "replace": ["a", "a"]}, "twice"),
    ({"source": "https://github.com/hashicorp/terraform-provider-aws/x.go", "replace": ["a"], "restart": ["a"]},
     "both"),
    ({"source": "https://github.com/hashicorp/terraform-provider-aws/x.go", "replace": [], "force": ["a"]}, "unknown"),
])
def test_the_loader_refuses_a_malformed_entry(monkeypatch, entry, message):
    doc = {"types": {"aws:x/y:Y": entry}}
    monkeypatch.setattr(replacement_module, "_read", lambda name: yaml.safe_load(yaml.safe_dump(doc)))
    load_replacement.cache_clear()
    try:
        with pytest.raises(CatalogError, match=message):
            load_replacement()
    finally:
        load_replacement.cache_clear()
