"""What makes two plans differ for a stateful resource (tests/safety).

The comparison of inputs, the dependency walk and the verdict on a dependency (would it be
replaced, giving the stateful resource a new subnet, group or key id?) are the package's
(aicluster.offline.plan_diff, which `aicluster diff` uses, with the sourced table
catalog/replacement.yaml): one copy. What stays here is the safety tests' own strictness: a
stateful resource must keep its URN, options and every input, tags aside for a tag edit.
"""
from __future__ import annotations

import copy

from aicluster.design.stateful import IN_PLACE_METADATA_KEYS, stateful_kind, stateful_resources
from aicluster.offline.plan_diff import DELETE, REPLACE, changed_keys, dependency_closure, diff_plans, urn_key

__all__ = ["IN_PLACE_KEYS_BY_TYPE", "OPTIONS", "dependency_closure", "differences", "_changed_keys"]

OPTIONS = ("protect", "retain_on_delete", "ignore_changes", "replace_on_changes", "delete_before_replace",
           "provider", "import_id", "custom")


# Inputs of a resource a stateful or login one depends on that update in place (the resource keeps
# its id), beyond tags and labels: test_login_routine_edits.py ignores their changes. Each is an
# input catalog/replacement.yaml does not list as replacing (test_replacement_table_agrees below).
IN_PLACE_KEYS_BY_TYPE = {
    "aws:ec2/securityGroup:SecurityGroup": {"ingress", "egress"},   # rules change in place
    "gcp:compute/firewall:Firewall": {"sourceRanges", "allows", "denies", "description"},
    # Updatable since GoogleCloudPlatform/magic-modules #13995 (2025-05; it forced replacement
    # before, hashicorp/terraform-provider-google #22543); pyproject pins pulumi-gcp >= 10.
    "gcp:compute/network:Network": {"mtu"},
    # Image Builder updates these in place (UpdateInfrastructureConfiguration and
    # UpdateDistributionConfiguration take every field but the name): their ARN, which the image
    # names, stays; terraform-provider-aws r/imagebuilder_*_configuration mark no field ForceNew but `name`.
    "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration": {"resourceTags"},
    "aws:imagebuilder/distributionConfiguration:DistributionConfiguration": {"distributions"},
}
# Labels nested in an input that a tag edit may change in place: boot disk labels of a GCE
# instance are updatable since magic-modules #15081 (2025-09; before, they replaced the instance:
# terraform-provider-google #4387, #17044).
NESTED_LABELS_BY_TYPE = {
    "gcp:compute/instance:Instance": [("bootDisk", "initializeParams", "labels")],
    # Cloud SQL's user labels live in `settings`, which the provider patches in place (the
    # instances.patch call); name, region and a database_version downgrade force a new instance.
    "gcp:sql/databaseInstance:DatabaseInstance": [("settings", "userLabels")],
}


def _strip_nested_labels(resource) -> dict:
    inputs = copy.deepcopy(resource.inputs)
    for path in NESTED_LABELS_BY_TYPE.get(resource.type, []):
        node = inputs
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return inputs


def _changed_keys(old, new, ignored) -> list[str]:
    """The input keys of one resource that differ, `ignored` aside; a tag edit (labels ignored)
    may change the labels nested in other inputs too."""
    if "labels" in ignored:
        return changed_keys(_strip_nested_labels(old), _strip_nested_labels(new), ignored)
    return changed_keys(old.inputs, new.inputs, ignored)


def differences(before, after, allow_tags: bool) -> list[str]:
    """Every way a stateful resource of `before` is not the same in `after` (empty: untouched):
    its URN, options and inputs, whether anything it depends on would be replaced or deleted (a
    new id for it: the dependency cascade of aicluster.offline.plan_diff), and any stateful
    resource `aicluster diff` would replace or delete (its exit 3)."""
    found = []
    after_by_urn = {r.urn: r for r in after.resources}
    metadata = IN_PLACE_METADATA_KEYS if allow_tags else frozenset()
    diff = diff_plans(before, after)
    verdicts = {c.key: c for c in diff.changes}
    for old in stateful_resources(before.resources):
        new = after_by_urn.get(old.urn)
        label = f"{stateful_kind(old.type, old.inputs)} {old.name} ({old.type})"
        if new is None:
            found.append(f"{label}: gone (URN {old.urn} is not in the new plan: delete or replace)")
            continue
        if (new.type, new.name, new.parent_urn) != (old.type, old.name, old.parent_urn):
            found.append(f"{label}: type/name/parent changed")
        for option in OPTIONS:
            if getattr(old, option) != getattr(new, option):
                found.append(f"{label}: option {option} {getattr(old, option)!r} -> {getattr(new, option)!r}")
        found += [f"{label}: input {key} changed" for key in _changed_keys(old, new, metadata)]
        for dep in dependency_closure(before, old):
            verdict = verdicts.get(urn_key(dep.urn))
            if verdict is None or verdict.action == DELETE:
                found.append(f"{label}: depends on {dep.name} ({dep.type}), which is gone (a new id)")
            elif verdict.action == REPLACE:
                found.append(f"{label}: depends on {dep.name} ({dep.type}), which would be replaced "
                             f"({'; '.join(verdict.replaced_by)}): a new id")
    # What `aicluster diff` would say: it must agree (exit 0 for an edit this finds nothing in).
    named = {p.split(" ")[1] for p in found}
    for change in diff.dangerous:
        if change.name not in named:
            found.append(f"{change.stateful} {change.name} ({change.type}): aicluster diff says {change.action}"
                         + (f" ({'; '.join(change.replaced_by)})" if change.replaced_by else ""))
    return found
