"""Which inputs of a resource type force Pulumi to replace it (replacement.yaml): the table the
offline diff (aicluster.offline.plan_diff) reads to tell an in-place update from a replacement.

Every type carries a `source:` (the Terraform provider's resource file where the input is
ForceNew, pulumi-kubernetes' diff.go, or an API doc); a rule may carry its own. Pure: no Pulumi.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from aicluster.catalog import CatalogError, _read, _sourced

# When a rule's input forces a replacement:
#   changed   any change (the default)
#   decrease  a smaller number (FSx Lustre storageCapacity, Cloud SQL disk size)
#   increase  a larger number
#   narrowed  a CIDR range that no longer holds the old one (a GCP subnetwork's ipCidrRange)
#   presence  the input (a block) is added or removed; its fields have their own rules
CONDITIONS = ("changed", "decrease", "increase", "narrowed", "presence")


@dataclass(frozen=True)
class ReplaceRule:
    """One input (a dotted path into the resource's inputs) whose change replaces the resource."""
    key: str
    when: str = "changed"
    source: str = ""
    note: str = ""

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))


@dataclass(frozen=True)
class TypeRules:
    """What replaces, and what restarts, one resource type."""
    type: str
    source: str
    replace: tuple[ReplaceRule, ...] = ()
    immutable: bool = False          # every input change replaces (no Update in the provider)
    restart: tuple[str, ...] = ()    # inputs updated in place by stopping and starting the instance
    note: str = ""


@dataclass(frozen=True)
class ReplacementTable:
    types: Mapping[str, TypeRules]

    def rules(self, type_token: str) -> TypeRules | None:
        return self.types.get(type_token)


def _rule(item: Any, where: str, default_source: str) -> ReplaceRule:
    if isinstance(item, str):
        return ReplaceRule(item, source=default_source)
    if not isinstance(item, dict) or not isinstance(item.get("key"), str):
        raise CatalogError(f"{where}: a rule is an input name or a mapping with `key:`, not {item!r}")
    unknown = set(item) - {"key", "when", "source", "note"}
    if unknown:
        raise CatalogError(f"{where}.{item['key']}: unknown fields {sorted(unknown)}")
    when = item.get("when", "changed")
    if when not in CONDITIONS:
        raise CatalogError(f"{where}.{item['key']}: when {when!r} is not one of {', '.join(CONDITIONS)}")
    return ReplaceRule(item["key"], when, str(item.get("source") or default_source), str(item.get("note") or ""))


def _type_rules(type_token: str, entry: Any) -> TypeRules:
    where = f"replacement.yaml types.{type_token}"
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: a mapping with source and replace/immutable")
    unknown = set(entry) - {"source", "replace", "immutable", "restart", "note"}
    if unknown:
        raise CatalogError(f"{where}: unknown fields {sorted(unknown)}")
    source = _sourced(entry, where)
    immutable = bool(entry.get("immutable", False))
    if "replace" not in entry and not immutable:
        raise CatalogError(f"{where}: say which inputs replace it (`replace: []` for none) or `immutable: true`")
    rules = tuple(_rule(item, where, source) for item in entry.get("replace") or [])
    keys = [r.key for r in rules]
    if len(set(keys)) != len(keys):
        raise CatalogError(f"{where}: an input is listed twice in replace")
    restart = tuple(str(k) for k in entry.get("restart") or [])
    both = set(restart) & set(keys)
    if both:
        raise CatalogError(f"{where}: {sorted(both)} both replace and restart")
    return TypeRules(type_token, source, rules, immutable, restart, str(entry.get("note") or ""))


@functools.lru_cache(maxsize=1)
def load_replacement() -> ReplacementTable:
    doc = _read("replacement.yaml")
    types = doc.get("types") if isinstance(doc, dict) else None
    if not isinstance(types, dict) or not types:
        raise CatalogError("replacement.yaml: a `types:` mapping of resource type -> rules")
    return ReplacementTable({token: _type_rules(token, entry) for token, entry in types.items()})


__all__ = ["CONDITIONS", "ReplaceRule", "ReplacementTable", "TypeRules", "load_replacement"]
