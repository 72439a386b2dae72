"""What makes two plans differ for a stateful resource (tests/safety)."""
from __future__ import annotations

import copy

from aicluster.design.stateful import IN_PLACE_METADATA_KEYS, stateful_kind, stateful_resources

OPTIONS = ("protect", "retain_on_delete", "ignore_changes", "replace_on_changes", "delete_before_replace",
           "provider", "import_id", "custom")


# Inputs that update in place (the resource keeps its id), beyond tags and labels. Any other
# input change of a resource that a stateful one depends on may replace it and so hand the
# stateful resource a new subnet, group or key id: ParallelCluster #4651 lost its FSx that way
# (a subnet/security-group change). The fake cloud derives ids from names, so the plan cannot
# show that cascade by itself; the dependency check below does.
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


def _without(inputs: dict, keys) -> dict:
    return {k: v for k, v in inputs.items() if k not in keys}


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
    if "labels" in ignored:   # a tag edit: nested labels that update in place may change too
        old_inputs, new_inputs = _strip_nested_labels(old), _strip_nested_labels(new)
    else:
        old_inputs, new_inputs = old.inputs, new.inputs
    old_inputs, new_inputs = _without(old_inputs, ignored), _without(new_inputs, ignored)
    return [k for k in sorted(set(old_inputs) | set(new_inputs))
            if old_inputs.get(k, "<absent>") != new_inputs.get(k, "<absent>")]


def dependency_closure(plan, resource) -> list:
    """Every custom resource `resource` waits for, directly or through others (a dependency on a
    component means its custom descendants)."""
    by_urn = {r.urn: r for r in plan.resources}
    children: dict[str, list] = {}
    for r in plan.resources:
        children.setdefault(r.parent_urn, []).append(r)
    seen: dict[str, object] = {}
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        found = by_urn[urn]
        seen[urn] = found
        if found.custom:
            todo.extend(found.dependencies)
        else:
            todo.extend(c.urn for c in children.get(urn, []))
    return [r for r in seen.values() if r.custom]


def differences(before, after, allow_tags: bool) -> list[str]:
    """Every way a stateful resource of `before` is not the same in `after` (empty: untouched):
    its URN, options and inputs, and the identity of everything it depends on."""
    found = []
    after_by_urn = {r.urn: r for r in after.resources}
    metadata = IN_PLACE_METADATA_KEYS if allow_tags else frozenset()
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
            dep_new = after_by_urn.get(dep.urn)
            if dep_new is None:
                found.append(f"{label}: depends on {dep.name} ({dep.type}), which is gone (a new id)")
                continue
            keys = _changed_keys(dep, dep_new, metadata | IN_PLACE_KEYS_BY_TYPE.get(dep.type, set()))
            if keys:
                found.append(f"{label}: depends on {dep.name} ({dep.type}), whose {', '.join(keys)} "
                             "changed (a replacement would give it a new id)")
    return found
