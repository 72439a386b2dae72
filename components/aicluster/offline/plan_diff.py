"""What `pulumi up` would do to go from one offline plan to another, resource by resource: create,
update, replace or delete, and for each update or replacement the inputs that changed and the one
that forced the replacement (catalog/replacement.yaml).

Resources are matched by URN without its stack part (`urn:pulumi:<stack>::<rest>`), so two plans of
differently named stacks (a stack and an edited copy of its file) compare. A renamed resource has
another URN: a delete and a create, as Pulumi does without an alias.

A replacement cascades: a replaced resource gets a new id, arn or self link, and every input of
another resource that holds one of those values changes with it; where that input forces a
replacement, the dependent is replaced too. The fake cloud derives ids from names, so the two plans
alone cannot show it (ParallelCluster #4651 lost an FSx to a replaced subnet that way).

Pure: plain captured resources in (anything with urn, type, name, parent_urn, custom, inputs,
outputs, options), no Pulumi import.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from aicluster.catalog.replacement import ReplaceRule, ReplacementTable, TypeRules, load_replacement
from aicluster.design.stateful import role_of, stateful_kind

CREATE, UPDATE, REPLACE, DELETE, SAME = "create", "update", "replace", "delete", "same"
ACTIONS = (CREATE, UPDATE, REPLACE, DELETE)

# Resource options whose change `pulumi up` records without touching the cloud resource.
OPTIONS = ("protect", "retain_on_delete", "ignore_changes", "replace_on_changes", "delete_before_replace")
STACK_TYPE = "pulumi:pulumi:Stack"
_MISSING = object()
# Outputs a replacement gives new values: what other resources reference a resource by.
_IDENTITY_OUTPUTS = ("id", "arn", "selfLink", "name")
# AWS tags update in place on every resource, immutable ones included (the tagging APIs).
_AWS_TAGS = frozenset({"tags", "tagsAll"})
# Types an update gives a new version of (its `latestVersion`), which what pins a version follows.
_VERSIONED_TYPES = frozenset({"aws:ec2/launchTemplate:LaunchTemplate"})


def urn_key(urn: str) -> str:
    """`urn:pulumi:STACK::PROJECT::TYPE::NAME` -> `PROJECT::TYPE::NAME`."""
    head, sep, rest = urn.partition("::")
    return rest if sep and head.startswith("urn:pulumi:") else urn


def _plain(value: Any) -> Any:
    """A Secret marker's value (captured plans keep secrets as `Secret(value)`)."""
    while type(value).__name__ == "Secret" and hasattr(value, "value"):
        value = value.value
    return value


def resolve(inputs: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at a dotted path; a list on the way is looked into element by element."""
    node: Any = inputs
    for i, key in enumerate(path):
        node = _plain(node)
        if isinstance(node, list):
            return [resolve({"_": item}, ("_", *path[i:])) for item in node]
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return _plain(node)


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any], ignored: Iterable[str] = ()) -> list[str]:
    """The top-level input keys whose values differ (absent counts as a value)."""
    skip = set(ignored)
    return [k for k in sorted((set(old) | set(new)) - skip) if old.get(k, _MISSING) != new.get(k, _MISSING)]


def _number(value: Any) -> float | None:
    value = _plain(value)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _narrowed(old: Any, new: Any) -> bool:
    try:
        before, after = ipaddress.ip_network(str(old), strict=False), ipaddress.ip_network(str(new), strict=False)
    except ValueError:
        return old != new
    return before.version != after.version or not after.supernet_of(before)   # type: ignore[arg-type]


def rule_fires(rule: ReplaceRule, old_inputs: Mapping[str, Any], new_inputs: Mapping[str, Any]) -> str | None:
    """Why this rule replaces the resource ("deploymentType changed", "storageCapacity decreased"), or None."""
    before, after = resolve(old_inputs, rule.path), resolve(new_inputs, rule.path)
    if before == after:
        return None
    if rule.when == "presence":
        count = lambda v: 0 if v is _MISSING else len(v) if isinstance(v, list) else 1   # noqa: E731
        return f"{rule.key} added or removed" if count(before) != count(after) else None
    if rule.when in ("decrease", "increase"):
        a, b = _number(before), _number(after)
        if a is None or b is None:
            return f"{rule.key} set or unset" if (before is _MISSING) != (after is _MISSING) else None
        if (b < a) if rule.when == "decrease" else (b > a):
            return f"{rule.key} {'decreased' if rule.when == 'decrease' else 'increased'} ({_show(a)} -> {_show(b)})"
        return None
    if rule.when == "narrowed":
        if before is _MISSING or after is _MISSING or isinstance(before, list) or isinstance(after, list):
            return f"{rule.key} changed"
        return f"{rule.key} no longer holds {before} ({after})" if _narrowed(before, after) else None
    if _secret_on_path(old_inputs, rule.path) or _secret_on_path(new_inputs, rule.path):
        return f"{rule.key} changed (secret)"
    return f"{rule.key} changed{_values(before, after)}"


def _secret_on_path(node: Any, path: Sequence[str]) -> bool:
    """Whether a value on the way to `path`, or the value there, is marked secret: never shown."""
    if type(node).__name__ == "Secret":
        return True
    if isinstance(node, list):
        return any(_secret_on_path(item, path) for item in node)
    if not path or not isinstance(node, Mapping) or path[0] not in node:
        return False
    return _secret_on_path(node[path[0]], path[1:])


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _values(before: Any, after: Any) -> str:
    """` (A -> B)` for short scalars (never a secret: _plain already unwrapped, so check the raw)."""
    def scalar(v: Any) -> str | None:
        if v is _MISSING:
            return "absent"
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 40:
            return str(v)
        return None
    a, b = scalar(before), scalar(after)
    return f" ({a} -> {b})" if a is not None and b is not None else ""


def _matches(option_paths: Iterable[str], key: str) -> bool:
    """A replaceOnChanges / ignoreChanges path covers top-level input `key`."""
    return any(p in ("*", key) or p.startswith(f"{key}.") or p.startswith(f"{key}[") for p in option_paths)


@dataclass(frozen=True)
class ResourceChange:
    """One custom resource's fate."""
    action: str                          # create | update | replace | delete | same
    key: str                             # URN without the stack part
    type: str
    name: str
    component: str                       # the top-level component it belongs to ("" for the stack's own)
    changed: tuple[str, ...] = ()        # input keys that changed (options as "[protect]")
    replaced_by: tuple[str, ...] = ()    # why it is replaced: the rule that fired, or the cascade
    restarts: tuple[str, ...] = ()       # changed inputs that stop and start it (instances)
    stateful: str | None = None          # design/stateful.py's kind, None when not stateful
    role: str | None = None              # the aicluster-role tag or label
    old: Any = field(default=None, compare=False, repr=False)
    new: Any = field(default=None, compare=False, repr=False)
    unknown_type: bool = False           # no rules for its type: an update is assumed

    @property
    def resource(self) -> Any:
        return self.new if self.new is not None else self.old

    @property
    def dangerous(self) -> bool:
        """A stateful resource replaced or deleted: its data, state or secret would be lost."""
        return self.stateful is not None and self.action in (REPLACE, DELETE)


@dataclass(frozen=True)
class PlanDiff:
    old_stack: str
    new_stack: str
    changes: tuple[ResourceChange, ...]      # every custom resource of either plan

    def of(self, *actions: str) -> list[ResourceChange]:
        return [c for c in self.changes if c.action in actions]

    def counts(self) -> dict[str, int]:
        return {a: len(self.of(a)) for a in (*ACTIONS, SAME)}

    @property
    def dangerous(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.dangerous]


def _custom(resources: Iterable[Any]) -> dict[str, Any]:
    return {urn_key(r.urn): r for r in resources if getattr(r, "custom", True) and r.type != STACK_TYPE}


def _top_component(resource: Any, by_urn: Mapping[str, Any]) -> str:
    """The name of the component right under the stack that holds `resource`."""
    node, top = resource, ""
    seen = set()
    while node is not None and node.urn not in seen:
        seen.add(node.urn)
        parent = by_urn.get(node.parent_urn) if node.parent_urn else None
        if parent is None or parent.type == STACK_TYPE:
            return top if node is not resource else ""
        top = f"{parent.name} ({parent.type})"
        node = parent
    return top


def own_changes(old: Any, new: Any, rules: TypeRules | None) -> tuple[list[str], list[str], list[str]]:
    """(changed input keys, replacement reasons, restart keys) of a resource found in both plans."""
    ignored = tuple(getattr(new, "ignore_changes", ()) or ())
    keys = changed_keys(old.inputs, new.inputs, [k for k in set(old.inputs) | set(new.inputs) if _matches(ignored, k)])
    options = [f"[{o}]" for o in OPTIONS if getattr(old, o, None) != getattr(new, o, None)]
    reasons: list[str] = []
    restarts: list[str] = []
    if rules is not None and keys:
        if rules.immutable:
            forcing = [k for k in keys if not (new.type.startswith("aws:") and k in _AWS_TAGS)]
            if forcing:
                reasons.append(f"{', '.join(forcing)} changed (an immutable resource)")
        for rule in rules.replace:
            if rule.path[0] in keys:
                why = rule_fires(rule, old.inputs, new.inputs)
                if why:
                    reasons.append(why)
        for key in rules.restart:
            path = tuple(key.split("."))
            if path[0] in keys and resolve(old.inputs, path) != resolve(new.inputs, path):
                restarts.append(key)
    replace_on = tuple(getattr(new, "replace_on_changes", ()) or ())
    reasons += [f"{k} changed (replaceOnChanges)" for k in keys if _matches(replace_on, k)]
    return keys + options, reasons, restarts


def _identity_values(resource: Any) -> set[str]:
    """The values a replacement of `resource` would change: its id, arn, self link (what other
    resources reference it by); inputs it was given (a name) stay, so only computed ones count."""
    found = set()
    for key in _IDENTITY_OUTPUTS:
        value = _plain((resource.outputs or {}).get(key))
        if key in (resource.inputs or {}) and key != "id":
            continue
        if isinstance(value, str) and len(value) >= 8:
            found.add(value)
    if isinstance(getattr(resource, "id", None), str) and len(resource.id) >= 8:
        found.add(resource.id)
    return found


def holding_paths(value: Any, needles: set[str], prefix: str = "") -> list[str]:
    """The dotted paths under `value` whose string holds one of `needles` (lists add no segment)."""
    value = _plain(value)
    if isinstance(value, str):
        return [prefix] if any(n in value for n in needles) else []
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in sorted(value.items()):
            found += holding_paths(item, needles, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += [p for p in holding_paths(item, needles, prefix) if p not in found]
    return found


def referencing_paths(dependent: Any, dependency: Any, dependency_action: str = REPLACE) -> list[str]:
    """The inputs of `dependent` (dotted paths) that take a new value when `dependency` is replaced
    (they hold its id, arn or self link) or, for a launch template updated as a new version, the
    `version` beside its id (an instance pinned to a version moves to the new one)."""
    needles = _identity_values(dependency)
    if not needles:
        return []
    paths = holding_paths(dependent.inputs or {}, needles)
    if dependency_action == REPLACE:
        return paths
    if dependency.type in _VERSIONED_TYPES:
        versioned = []
        for path in paths:
            parent = path.rpartition(".")[0]
            node = resolve(dependent.inputs or {}, tuple(parent.split("."))) if parent else _MISSING
            if isinstance(node, Mapping) and "version" in node:
                versioned.append(f"{parent}.version")
        return versioned
    return []


def _forcing(rules: TypeRules | None, paths: Iterable[str], resource_type: str) -> list[str]:
    """The paths, among inputs that would take a new value, whose change replaces the resource
    (a rule on the path itself or on a block above it; a value that is new is a change, never
    known to be a decrease, so conditional rules fire too)."""
    if rules is None:
        return []
    out = []
    for path in paths:
        top = path.split(".")[0]
        if rules.immutable:
            if not (resource_type.startswith("aws:") and top in _AWS_TAGS):
                out.append(path)
            continue
        if any(r.key == path or path.startswith(f"{r.key}.") for r in rules.replace if r.when != "presence"):
            out.append(path)
    return out


def diff_plans(old_plan: Any, new_plan: Any, table: ReplacementTable | None = None) -> PlanDiff:
    """Every custom resource of the two plans, with what `pulumi up` would do to it."""
    table = table or load_replacement()
    old, new = _custom(old_plan.resources), _custom(new_plan.resources)
    old_by_urn = {r.urn: r for r in old_plan.resources}
    new_by_urn = {r.urn: r for r in new_plan.resources}
    changes: dict[str, ResourceChange] = {}
    for key, resource in new.items():
        before = old.get(key)
        rules = table.rules(resource.type)
        common = dict(key=key, type=resource.type, name=resource.name, component=_top_component(resource, new_by_urn),
                      stateful=stateful_kind(resource.type, resource.inputs), role=role_of(resource.inputs),
                      old=before, new=resource, unknown_type=rules is None)
        if before is None:
            changes[key] = ResourceChange(CREATE, **common)
            continue
        keys, reasons, restarts = own_changes(before, resource, rules)
        action = REPLACE if reasons else UPDATE if keys else SAME
        changes[key] = ResourceChange(action, changed=tuple(keys), replaced_by=tuple(reasons),
                                      restarts=tuple(restarts), **common)
    for key, resource in old.items():
        if key not in new:
            changes[key] = ResourceChange(DELETE, key, resource.type, resource.name,
                                          _top_component(resource, old_by_urn),
                                          stateful=stateful_kind(resource.type, resource.inputs),
                                          role=role_of(resource.inputs), old=resource,
                                          unknown_type=table.rules(resource.type) is None)
    _cascade(changes, old, old_by_urn, table)
    order = {k: i for i, k in enumerate([*new, *[k for k in old if k not in new]])}
    return PlanDiff(old_plan.stack, new_plan.stack, tuple(sorted(changes.values(), key=lambda c: order[c.key])))


def _direct_dependencies(resource: Any, by_urn: Mapping[str, Any]) -> list[Any]:
    """The custom resources `resource` waits for directly (a component stands for its descendants),
    and its provider."""
    children: dict[str, list[Any]] = {}
    for r in by_urn.values():
        children.setdefault(r.parent_urn, []).append(r)
    found, todo, seen = [], list(resource.dependencies or ()), set()
    provider = getattr(resource, "provider", None)
    if isinstance(provider, str) and "::" in provider:
        todo.append(provider.rsplit("::", 1)[0])
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        seen.add(urn)
        dep = by_urn[urn]
        if getattr(dep, "custom", True):
            found.append(dep)
        else:
            todo.extend(c.urn for c in children.get(urn, []))
    return found


def dependency_closure(plan: Any, resource: Any) -> list[Any]:
    """Every custom resource `resource` waits for, directly or through others (a dependency on a
    component means its custom descendants), in `plan`."""
    by_urn = {r.urn: r for r in plan.resources}
    children: dict[str, list[Any]] = {}
    for r in plan.resources:
        children.setdefault(r.parent_urn, []).append(r)
    seen: dict[str, Any] = {}
    todo = list(resource.dependencies or ())
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        found = by_urn[urn]
        seen[urn] = found
        todo.extend(found.dependencies if getattr(found, "custom", True) else (c.urn for c in children.get(urn, [])))
    return [r for r in seen.values() if getattr(r, "custom", True)]


def _cascade(changes: dict[str, ResourceChange], old: Mapping[str, Any], old_by_urn: Mapping[str, Any],
             table: ReplacementTable) -> None:
    """Replace what holds a replaced resource's id in an input that forces replacement, and what
    pins a launch template's version that an update moves on (to a fixed point)."""
    deps = {key: _direct_dependencies(change.old, old_by_urn)
            for key, change in changes.items() if change.action in (SAME, UPDATE, REPLACE) and change.old is not None}
    done: set[tuple[str, str]] = set()
    grew = True
    while grew:
        grew = False
        for key, dependencies in deps.items():
            for dep in dependencies:
                dep_change = changes.get(urn_key(dep.urn))
                if dep_change is None or dep_change.action not in (REPLACE, UPDATE) or (key, dep.urn) in done:
                    continue
                change = changes[key]
                provider = change.old.provider if isinstance(change.old.provider, str) else ""
                if dep_change.action == REPLACE and provider.startswith(dep.urn + "::"):
                    paths, forced = ["provider"], ["provider"]
                else:
                    ignored = tuple(getattr(change.new, "ignore_changes", ()) or ())
                    paths = [p for p in referencing_paths(change.old, dep, dep_change.action)
                             if not _matches(ignored, p.split(".")[0])]
                    forced = _forcing(table.rules(change.type), paths, change.type)
                if not paths:
                    continue
                done.add((key, dep.urn))
                grew = True
                tops = {p.split(".")[0] for p in paths}
                if forced:
                    what = "replaced" if dep_change.action == REPLACE else "updated as a new version"
                    why = (f"depends on {dep.name} ({dep.type}), which is {what}: "
                           f"{', '.join(forced)} would take its new value")
                    changes[key] = _with(change, REPLACE, changed=tuple(sorted({*change.changed, *tops})),
                                         replaced_by=(*change.replaced_by, why))
                elif change.action in (SAME, UPDATE):
                    changes[key] = _with(change, UPDATE, changed=tuple(sorted({*change.changed, *tops})))


def _with(change: ResourceChange, action: str, **fields: Any) -> ResourceChange:
    return replace(change, action=action, **fields)


__all__ = ["ACTIONS", "CREATE", "DELETE", "OPTIONS", "PlanDiff", "REPLACE", "ResourceChange", "SAME", "UPDATE",
           "changed_keys", "dependency_closure", "diff_plans", "holding_paths", "own_changes", "referencing_paths", "resolve",
           "rule_fires", "urn_key"]
