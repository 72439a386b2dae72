"""The provisioning critical path: the longest chain of creations `pulumi up` must wait on.

Pulumi creates a resource as soon as everything it depends on exists, so the wall time of a first
`pulumi up` is the longest path through the plan's dependency graph, each resource weighted by its
typical creation time (catalog/provisioning.yaml; most figures are marked estimates). A resource
that depends on a component waits for every custom resource under it.

It also answers the question that matters most for a training cluster: do the filesystem and the
control plane (Slurm head node, EKS/GKE cluster) start in parallel, or does one wait for the other
(ParallelCluster #4211: the head node waited on FSx creation until it timed out)?

Pure over a captured Plan: no Pulumi import.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from aicluster.design.stateful import CONTROL_PLANE_KINDS, STORAGE_KINDS, stateful_kind, type_key

_DATA = Path(__file__).parents[1] / "catalog" / "provisioning.yaml"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Timing:
    """How long one kind of resource takes to create."""
    minutes: float
    source: str
    low: float | None = None
    high: float | None = None


@functools.lru_cache(maxsize=1)
def timings() -> tuple[Timing, dict[str, Timing]]:
    """(default, type key -> Timing) from catalog/provisioning.yaml; every entry has a source."""
    data = yaml.load(_DATA.read_text(encoding="utf-8"), Loader=_Loader)

    def timing(where: str, entry: dict) -> Timing:
        if not entry.get("source"):
            raise ValueError(f"{_DATA.name}: {where} has no source")
        low, high = (entry.get("range") or (None, None))
        return Timing(float(entry["minutes"]), str(entry["source"]), low, high)

    return timing("default", data["default"]), {k: timing(k, v) for k, v in data["types"].items()}


def creation_time(type_token: str) -> Timing:
    default, by_type = timings()
    return by_type.get(type_key(type_token)) or by_type.get(type_token) or default


@dataclass(frozen=True)
class Step:
    """One resource on the critical path."""
    urn: str
    name: str
    type: str
    minutes: float
    start: float          # minutes after `pulumi up` starts, when everything it needs exists
    source: str

    @property
    def finish(self) -> float:
        return self.start + self.minutes


@dataclass(frozen=True)
class CriticalPath:
    """The longest chain of resource creations of a plan."""
    steps: tuple[Step, ...]               # the longest chain, first to last
    total_minutes: float
    starts: dict[str, float]              # urn -> earliest start of every custom resource
    storage: tuple[Step, ...]             # filesystems (and other data stores), as scheduled
    control_plane: tuple[Step, ...]       # Slurm head node / EKS / GKE control plane
    waits: tuple[tuple[str, str], ...]    # (waiter, waited-for) names between those two groups

    @property
    def parallel(self) -> bool:
        """The filesystem and the control plane wait for neither each other."""
        return not self.waits

    def to_json(self) -> dict[str, Any]:
        return {
            "total_minutes": round(self.total_minutes, 2),
            "steps": [{"name": s.name, "type": s.type, "urn": s.urn, "minutes": s.minutes,
                       "start_minutes": round(s.start, 2), "source": s.source} for s in self.steps],
            "storage": [{"name": s.name, "type": s.type, "start_minutes": round(s.start, 2),
                         "minutes": s.minutes} for s in self.storage],
            "control_plane": [{"name": s.name, "type": s.type, "start_minutes": round(s.start, 2),
                               "minutes": s.minutes} for s in self.control_plane],
            "storage_and_control_plane_in_parallel": self.parallel,
            "waits": [{"waiter": a, "waits_for": b} for a, b in self.waits],
            "note": "creation times are typical values, most of them estimates (components/aicluster/catalog/provisioning.yaml)",
        }


def _graph(resources: list) -> dict[str, tuple]:
    """urn -> (resource, urns of the custom resources it waits for directly)."""
    by_urn = {r.urn: r for r in resources}
    children: dict[str | None, list] = {}
    for r in resources:
        children.setdefault(r.parent_urn, []).append(r)

    @functools.lru_cache(maxsize=None)
    def customs_under(urn: str) -> tuple[str, ...]:
        out: list[str] = []
        for child in children.get(urn, []):
            out += [child.urn] if child.custom else list(customs_under(child.urn))
        return tuple(out)

    graph = {}
    for r in resources:
        if not r.custom:
            continue
        deps: list[str] = []
        for urn in r.dependencies:
            found = by_urn.get(urn)
            if found is None or found.urn == r.urn:
                continue
            deps += [urn] if found.custom else list(customs_under(urn))
        graph[r.urn] = (r, tuple(dict.fromkeys(deps)))
    return graph


def critical_path(plan) -> CriticalPath:
    graph = _graph(list(plan.resources))
    finish: dict[str, float] = {}
    start: dict[str, float] = {}
    before: dict[str, str | None] = {}

    def visit(urn: str, trail: frozenset = frozenset()) -> float:
        if urn in finish:
            return finish[urn]
        if urn in trail:   # a cycle cannot be created; never expected from a real program
            raise ValueError(f"dependency cycle through {urn}")
        resource, deps = graph[urn]
        begin, last = 0.0, None
        for dep in deps:
            done = visit(dep, trail | {urn})
            if done > begin or last is None and done == begin:
                begin, last = done, dep
        start[urn], before[urn] = begin, last
        finish[urn] = begin + creation_time(resource.type).minutes
        return finish[urn]

    for urn in graph:
        visit(urn)

    def step(urn: str) -> Step:
        resource = graph[urn][0]
        timing = creation_time(resource.type)
        return Step(urn, resource.name, resource.type, timing.minutes, start[urn], timing.source)

    chain: list[Step] = []
    cursor = max(finish, key=lambda u: finish[u]) if finish else None
    while cursor is not None:
        chain.append(step(cursor))
        cursor = before[cursor]
    chain.reverse()

    storage = [u for u, (r, _) in graph.items() if stateful_kind(r.type, r.inputs) in STORAGE_KINDS]
    control = [u for u, (r, _) in graph.items() if stateful_kind(r.type, r.inputs) in CONTROL_PLANE_KINDS]
    waits = sorted({(graph[a][0].name, graph[b][0].name)
                    for a, b in _pairs_waiting(graph, control, storage) + _pairs_waiting(graph, storage, control)})
    return CriticalPath(tuple(chain), max(finish.values(), default=0.0), dict(start),
                        tuple(step(u) for u in storage), tuple(step(u) for u in control), tuple(waits))


def _pairs_waiting(graph: dict, waiters: Iterable[str], targets: Iterable[str]) -> list[tuple[str, str]]:
    """(waiter, target) where waiter depends on target, directly or through other resources."""
    targets = set(targets)
    found = []
    for waiter in waiters:
        seen: set[str] = set()
        todo = list(graph[waiter][1])
        while todo:
            urn = todo.pop()
            if urn in seen:
                continue
            seen.add(urn)
            if urn in targets:
                found.append((waiter, urn))
            todo.extend(graph[urn][1])
    return found


def lines(path: CriticalPath) -> list[str]:
    """The critical path for `aicluster plan` text output."""
    out = [f"pulumi up waits ~{path.total_minutes:.0f} min on this chain (typical creation times, "
           "mostly estimates: components/aicluster/catalog/provisioning.yaml):"]
    out += [f"  {s.start:5.1f} min  +{s.minutes:<4g} {s.name} ({s.type})" for s in path.steps]
    if path.storage and path.control_plane:
        if path.parallel:
            first = lambda steps: min(steps, key=lambda s: s.start)  # noqa: E731
            out.append(f"filesystem and control plane are created in parallel (from {first(path.storage).start:.1f} "
                       f"and {first(path.control_plane).start:.1f} min)")
        else:
            out += [f"WAIT: {a} waits for {b}" for a, b in path.waits]
    return out
