"""Every resource of the stack with plain props, and reference lookups."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from .._props import get, is_unknown, kind, plain, strings, tags_of


class Index:
    """Every resource of the stack with plain props, and reference lookups.

    References between resources (a template's placement group, a filesystem's subnet) are
    resolved first by matching ids, ARNs, self links and names, and otherwise through the
    engine's property dependencies (they exist even when the referenced id is not known yet,
    during a preview)."""

    def __init__(self, resources: Sequence[Any]):
        self.resources = list(resources)
        self._props = {id(r): plain(r.props) for r in self.resources}
        self._by_ref: dict[str, list[Any]] = {}
        for r in self.resources:
            p = self.props(r)
            keys = {r.urn, *(v for k in ("id", "arn", "selfLink", "name", "selfLinkUnique")
                             if isinstance(v := p.get(k), str) and not is_unknown(v))}
            for key in keys:
                self._by_ref.setdefault(key, []).append(r)

    def props(self, r: Any) -> dict:
        return self._props[id(r)]

    def of(self, *kinds: str) -> list[Any]:
        return [r for r in self.resources if kind(r.resource_type) in kinds]

    def tags(self, r: Any) -> dict[str, str]:
        return tags_of(self.props(r), r.resource_type)

    def refs(self, r: Any, prop: str, kinds: Iterable[str], value: Any = ...) -> list[Any]:
        """Resources of `kinds` that property `prop` of `r` (or the given part of it) refers to."""
        kinds = set(kinds)
        found: list[Any] = []
        value = get(self.props(r), prop) if value is ... else value
        for text in strings(value):
            for candidate in self._by_ref.get(text, []):
                if kind(candidate.resource_type) in kinds and candidate not in found:
                    found.append(candidate)
        if found:
            return found
        # The engine's property dependencies: known even when the ids are not (preview).
        deps = (getattr(r, "property_dependencies", None) or {}).get(prop) or []
        return [d for d in deps if kind(d.resource_type) in kinds and d is not r]

    def refers(self, r: Any, prop: str, target: Any) -> bool:
        return target in self.refs(r, prop, {kind(target.resource_type)})
