"""A fake automation Stack for the lifecycle commands (aicluster destroy), standing in for
`pulumi.automation.Stack` through `automation.STACK_OPENER`.

Its state is a Pulumi deployment (v3 shape) built from a real offline plan: every resource's urn,
type, parent, dependencies, id, inputs, outputs, protect and retainOnDelete as the program
registered them, plus the root stack and a default provider per package, as `pulumi stack export`
shows them.

`destroy(target=...)` behaves as the Pulumi engine does for a targeted destroy:
- a protected target: the whole operation fails before deleting anything ("resource ... is
  protected");
- a target that a resource outside the targets depends on or is the parent of: fails before
  deleting anything (Pulumi asks for --target-dependents);
- otherwise targets are deleted dependents first; one with retainOnDelete leaves the state but
  stays in the cloud (`retained`), the others are gone (`deleted`);
- `fail_on`: a resource name whose delete fails after the ones before it were deleted (a cloud
  error midway), as a partial destroy leaves the state.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pulumi.automation import Deployment


class DestroyFailed(Exception):
    """What the automation API raises for a failed `pulumi destroy` (a CommandError)."""


def deployment_from_plan(plan, stack: str = "stack", project: str = "aicluster") -> dict:
    """A `pulumi stack export` deployment of everything the plan registered."""
    resources, providers = [], {}
    for r in plan.resources:
        doc = r.to_json()
        entry = {k: doc[k] for k in ("urn", "type", "custom", "id", "inputs", "outputs", "dependencies")}
        if doc["parent"]:
            entry["parent"] = doc["parent"]
        if r.protect:
            entry["protect"] = True
        if r.retain_on_delete:
            entry["retainOnDelete"] = True
        if r.custom and r.type != "pulumi:pulumi:Stack":
            package = r.type.split(":")[0]
            if package not in providers:
                urn = f"urn:pulumi:{stack}::{project}::pulumi:providers:{package}::default"
                providers[package] = {"urn": urn, "type": f"pulumi:providers:{package}", "custom": True,
                                      "id": f"{package}-provider-id", "inputs": {}, "outputs": {}}
            entry["provider"] = f"{providers[package]['urn']}::{providers[package]['id']}"
        if not r.custom:
            entry.pop("id", None)
        resources.append(entry)
    root = [r for r in resources if r["type"] == "pulumi:pulumi:Stack"]
    rest = [r for r in resources if r["type"] != "pulumi:pulumi:Stack"]
    return {"manifest": {"time": "2026-11-28T00:00:00Z", "version": "v3.272.0"},
            "resources": [*root, *providers.values(), *rest]}


@dataclass
class FakeStack:
    deployment: dict
    fail_on: str | None = None                  # a resource name whose delete fails
    fail_import: bool = False
    calls: list = field(default_factory=list)
    deleted: list = field(default_factory=list)     # URNs really deleted in the cloud
    retained: list = field(default_factory=list)    # URNs dropped from the state, left in the cloud

    def export_stack(self) -> Deployment:
        self.calls.append(("export_stack",))
        return Deployment(version=3, deployment=copy.deepcopy(self.deployment))

    def import_stack(self, state: Deployment) -> None:
        self.calls.append(("import_stack", [r["urn"] for r in state.deployment["resources"] if not r.get("protect")]))
        if self.fail_import:
            raise DestroyFailed("error: could not import deployment: conflict")
        self.deployment = copy.deepcopy(dict(state.deployment))

    def _resources(self) -> list[dict]:
        return self.deployment["resources"]

    def destroy(self, target: list[str] | None = None, on_output=None, **_: Any) -> Any:
        self.calls.append(("destroy", list(target or [])))
        by_urn = {r["urn"]: r for r in self._resources()}
        targets = set(target or by_urn)
        for urn in targets:
            if urn not in by_urn:
                raise DestroyFailed(f"error: target {urn} does not exist in the stack")
            if by_urn[urn].get("protect"):
                raise DestroyFailed(f"error: resource {urn} cannot be deleted because it is protected")
        for r in self._resources():
            if r["urn"] in targets:
                continue
            needs = set(r.get("dependencies") or []) | ({r["parent"]} if r.get("parent") else set())
            for dep in (r.get("propertyDependencies") or {}).values():
                needs |= set(dep)
            hit = needs & targets
            if hit:
                raise DestroyFailed(f"error: {r['urn']} depends on {sorted(hit)[0]}, which is targeted; "
                                    "use --target-dependents")
        # Dependents first: a resource goes only when nothing left depends on it.
        left = [r for r in self._resources() if r["urn"] in targets]
        while left:
            for r in left:
                blocked = any(r["urn"] in (o.get("dependencies") or []) or o.get("parent") == r["urn"]
                              for o in left if o is not r)
                if blocked:
                    continue
                if self.fail_on and r["urn"].endswith(f"::{self.fail_on}"):
                    raise DestroyFailed(f"error: deleting {r['urn']}: operation error: InternalServerError")
                (self.retained if r.get("retainOnDelete") else self.deleted).append(r["urn"])
                if on_output:
                    on_output(f" - {r['type']} {r['urn'].rsplit('::', 1)[-1]} deleted")
                self.deployment["resources"] = [x for x in self._resources() if x["urn"] != r["urn"]]
                left.remove(r)
                break
            else:
                raise DestroyFailed("error: a dependency cycle among the targets")
        return {"summary": {"result": "succeeded"}}
