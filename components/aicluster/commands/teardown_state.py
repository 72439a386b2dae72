"""What `aicluster destroy` does to a stack's state, worked out before anything is touched (pure).

Inputs: the stack's exported state (`deployment["resources"]`: urn, type, id, parent,
dependencies, protect, retainOnDelete, inputs, outputs) and the offline plan of the stack's spec
(the real program under mocks: the options and final-backup fields the spec's `on_delete`
policies give each resource). The spec is the truth about policy; the state must already carry
what the policy sets (an `up` puts it there), or nothing is done.

Out: a `Teardown`: which stateful resources are kept (retained, or needed by a kept one), which
are deleted and how (`snapshot`: a final backup first), the one state edit (unprotect exactly the
deletable ones) and the targets of `stack.destroy`: everything but what is kept and all it needs.
Pulumi's `--exclude-protected` would keep a protected resource but delete its subnet, security
group and key (pulumi/pulumi#8359); the keep set here is closed under dependencies and parents.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from aicluster.design.on_delete import ON_DELETE_FIELDS, field_value
from aicluster.design.stateful import stateful_kind, type_key

ROOT_TYPE = "pulumi:pulumi:Stack"
PROVIDER_PREFIX = "pulumi:providers:"
# Kinds `aicluster destroy` backs up itself under `snapshot` (the cloud's delete takes none).
OWN_BACKUPS = {"aws:efs/fileSystem": "aws-backup", "gcp:filestore/instance": "filestore-backup"}


def urn_key(urn: str) -> str:
    """The part of a URN that names the resource within any stack and project: type chain::name."""
    parts = urn.split("::", 2)
    return parts[2] if len(parts) == 3 else urn


def urn_name(urn: str | None) -> str:
    return (urn or "").rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Stored:
    """One stored thing of the spec with a policy: the component its resources live under."""
    component: str      # the component's resource name: <cluster>-<fs>, <cluster>-slurmdbd, ...
    path: str           # the spec key that sets it: storage[0].on_delete
    policy: str         # retain | snapshot | delete


def stored_things(spec: Any) -> list[Stored]:
    """Each stored thing of a ClusterSpec, keyed by the component aicluster's program names it by
    (aws/cluster.py, gcp/cluster.py: <cluster>-<fs name>, -slurmdbd, -observability, -slurm)."""
    found = [Stored(f"{spec.name}-{fs.name}", f"storage[{i}].on_delete", fs.on_delete if fs.protect else "delete")
             for i, fs in enumerate(spec.storage)]
    if spec.scheduler == "slurm":
        if spec.slurm.accounting == "managed":
            found.append(Stored(f"{spec.name}-slurmdbd", "slurm.accounting_on_delete", spec.slurm.accounting_on_delete))
        found.append(Stored(f"{spec.name}-slurm", "slurm.head_node.on_delete", spec.slurm.head_node.on_delete))
    found.append(Stored(f"{spec.name}-observability", "monitoring.on_delete", spec.monitoring.on_delete))
    return found


@dataclass(frozen=True)
class Item:
    """One resource of the state and what destroy does with it."""
    urn: str
    type: str
    id: str | None
    kind: str | None            # stateful kind (stateful.py) or None
    policy: str | None          # retain | snapshot | delete for stateful ones
    path: str | None            # the spec key that decides it
    why: str = ""               # why it is kept
    backup: str | None = None   # aws-backup | filestore-backup: taken by aicluster before deletion
    outputs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    inputs: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return urn_name(self.urn)


@dataclass(frozen=True)
class Mismatch:
    """A deletable resource whose state does not yet carry what its policy sets."""
    urn: str
    path: str | None
    field: str
    state: Any
    spec: Any


@dataclass(frozen=True)
class Teardown:
    kept: tuple[Item, ...]              # stateful, kept (retained, or needed by a kept one)
    needed: tuple[Item, ...]            # not stateful, kept because a kept resource needs it
    deleted: tuple[Item, ...]           # stateful, deleted (after a backup where `snapshot`)
    targets: tuple[str, ...]            # URNs for stack.destroy(target=...)
    unprotect: tuple[str, ...]          # URNs whose `protect` the state edit turns off
    mismatches: tuple[Mismatch, ...]    # nonempty: refuse, nothing done

    @property
    def backups(self) -> tuple[Item, ...]:
        return tuple(i for i in self.deleted if i.backup)


def _resources(deployment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in (deployment.get("resources") or []) if isinstance(r, Mapping) and r.get("urn")]


def _stored_of(resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]],
               stored: Mapping[str, Stored]) -> Stored | None:
    parent = resource.get("parent")
    seen = set()
    while parent and parent not in seen:
        seen.add(parent)
        if urn_name(parent) in stored:
            return stored[urn_name(parent)]
        parent = (by_urn.get(parent) or {}).get("parent")
    return None


def _needs(resource: Mapping[str, Any]) -> set[str]:
    """What a resource needs to stay: its dependencies (also per property) and its parent."""
    needs = set(resource.get("dependencies") or [])
    for urns in (resource.get("propertyDependencies") or {}).values():
        needs.update(urns or [])
    if resource.get("parent"):
        needs.add(resource["parent"])
    return needs


def plan_teardown(deployment: Mapping[str, Any], planned: Iterable[Any], stored: Sequence[Stored]) -> Teardown:
    """Work out the teardown of a state. `planned`: the offline plan's resources (urn, type,
    protect, retain_on_delete, inputs) of the stack's spec; `stored`: `stored_things(spec)`."""
    resources = [r for r in _resources(deployment) if not r.get("delete")]   # pending deletes: left as they are
    by_urn = {r["urn"]: r for r in resources}
    plan_by_key = {urn_key(p.urn): p for p in planned}
    stored_by_component = {s.component: s for s in stored}

    items: dict[str, Item] = {}
    mismatches: list[Mismatch] = []
    for r in resources:
        if not r.get("custom", True) or r["type"].startswith(PROVIDER_PREFIX):
            continue
        kind = stateful_kind(r["type"], r.get("inputs") or r.get("outputs") or {})
        if kind is None:
            continue
        owner = _stored_of(r, by_urn, stored_by_component)
        planned_r = plan_by_key.get(urn_key(r["urn"]))
        path = owner.path if owner else None
        if planned_r is None:
            policy, why = "retain", "not in the spec's plan: kept"
        elif planned_r.retain_on_delete:
            policy, why = "retain", (f"{path}: retain" if path else "retained (no on_delete applies to it)")
        else:
            policy = owner.policy if owner and owner.policy != "retain" else "delete"
            why = ""
        backup = OWN_BACKUPS.get(type_key(r["type"])) if policy == "snapshot" else None
        items[r["urn"]] = Item(r["urn"], r["type"], r.get("id"), kind, policy, path, why, backup,
                               r.get("outputs") or {}, r.get("inputs") or {})
        if policy != "retain":
            mismatches += _mismatches(r, planned_r, path)

    # Keep: every retained stateful resource and, transitively, what it needs.
    keep: set[str] = set()
    reasons: dict[str, str] = {}
    todo = [urn for urn, item in items.items() if item.policy == "retain"]
    for urn in todo:
        reasons[urn] = items[urn].why
    while todo:
        urn = todo.pop()
        if urn in keep:
            continue
        keep.add(urn)
        for need in _needs(by_urn.get(urn, {})):
            if need in by_urn and need not in keep:
                reasons.setdefault(need, f"needed by {urn_name(urn)}")
                todo.append(need)

    kept, needed, deleted = [], [], []
    for r in resources:
        urn = r["urn"]
        item = items.get(urn)
        if item is None:
            if urn in keep and r.get("custom", True) and not r["type"].startswith(PROVIDER_PREFIX) \
                    and r["type"] != ROOT_TYPE:
                needed.append(Item(urn, r["type"], r.get("id"), None, None, None, reasons.get(urn, ""),
                                   outputs=r.get("outputs") or {}, inputs=r.get("inputs") or {}))
            continue
        if urn in keep:
            why = item.why if item.policy == "retain" else f"{item.path or item.policy}: {item.policy}, but " \
                                                           f"{reasons.get(urn, 'a kept resource needs it')}"
            kept.append(Item(item.urn, item.type, item.id, item.kind, item.policy, item.path, why, None,
                             item.outputs, item.inputs))
        else:
            deleted.append(item)
    targets = tuple(r["urn"] for r in resources
                    if r["urn"] not in keep and r["type"] != ROOT_TYPE and not r["type"].startswith(PROVIDER_PREFIX))
    target_set = set(targets)
    unprotect = tuple(r["urn"] for r in resources if r["urn"] in target_set and r.get("protect"))
    # Only deletable stateful resources may be unprotected; anything else protected among the
    # targets (a resource aicluster's plan does not know) stays: refuse.
    deletable = {i.urn for i in deleted}
    for urn in unprotect:
        if urn not in deletable:
            mismatches.append(Mismatch(urn, None, "protect", True, "a protected resource no on_delete policy "
                                       "allows deleting; it would be left without what it needs"))
    # A deletable resource a kept one needs is kept: report it, check nothing for it.
    kept_urns = {i.urn for i in kept}
    mismatches = [m for m in mismatches if m.urn not in kept_urns]
    return Teardown(tuple(kept), tuple(needed), tuple(deleted), targets,
                    tuple(u for u in unprotect if u in deletable), tuple(mismatches))


def _mismatches(resource: Mapping[str, Any], planned: Any, path: str | None) -> list[Mismatch]:
    """Where the state of a resource to delete does not carry its policy yet: retain_on_delete
    still on (Pulumi would only forget it), deletion protection still on (the cloud would refuse),
    or a final backup field that differs (FSx or RDS would skip the backup)."""
    found = []
    if resource.get("retainOnDelete"):
        found.append(Mismatch(resource["urn"], path, "retainOnDelete", True, False))
    inputs = resource.get("inputs") or {}
    for key in ON_DELETE_FIELDS.get(type_key(resource["type"]), ()):
        want = field_value(planned.inputs, key)
        have = field_value(inputs, key)
        if want is not None and _plain(have) != _plain(want):
            found.append(Mismatch(resource["urn"], path, key, have, want))
    return found


def _plain(value: Any) -> Any:
    """Compare values as JSON would: secret markers unwrapped, mappings and lists alike."""
    value = getattr(value, "value", value) if type(value).__name__ == "Secret" else value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def unprotected(deployment: Mapping[str, Any], urns: Iterable[str]) -> dict:
    """A copy of the deployment with `protect` off on exactly `urns` (what `pulumi state
    unprotect` does, in one import)."""
    wanted = set(urns)
    edited = copy.deepcopy(dict(deployment))
    for r in edited.get("resources") or []:
        if r.get("urn") in wanted:
            r["protect"] = False
    return edited


def reprotected(deployment: Mapping[str, Any], urns: Iterable[str]) -> dict:
    """A copy with `protect` back on those of `urns` still in the state (after a failed destroy)."""
    wanted = set(urns)
    edited = copy.deepcopy(dict(deployment))
    for r in edited.get("resources") or []:
        if r.get("urn") in wanted:
            r["protect"] = True
    return edited


def remaining(deployment: Mapping[str, Any], urns: Iterable[str]) -> list[str]:
    """Those of `urns` the state still holds."""
    present = {r["urn"] for r in _resources(deployment)}
    return [u for u in urns if u in present]
