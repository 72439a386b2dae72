"""Reading raw resource properties the way CrossGuard hands them over.

Policies get properties through pulumi_policy's proxies: nested dicts and lists that raise
UnknownValueError when a value is unknown (a `pulumi preview` of a resource whose input depends
on another resource's output). Rules here never let that escape: `plain()` turns the proxies into
ordinary data and keeps unknowns as the `UNKNOWN` marker, so a rule decides for itself what an
unknown means (usually: not judged). Numbers arrive as floats (protobuf Struct), booleans in
pulumi_aws v7 launch templates as the strings "true"/"false": `number()` and `truthy()` accept both.
"""
from __future__ import annotations

import fnmatch
from typing import Any, Iterable, Iterator, Mapping

from pulumi_policy import proxy as _proxy

_SENTINELS = frozenset({
    _proxy.UNKNOWN_BOOLEAN_VALUE, _proxy.UNKNOWN_NUMBER_VALUE, _proxy.UNKNOWN_STRING_VALUE,
    _proxy.UNKNOWN_ARRAY_VALUE, _proxy.UNKNOWN_ASSET_VALUE, _proxy.UNKNOWN_ARCHIVE_VALUE,
    _proxy.UNKNOWN_OBJECT_VALUE,
})


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN = _Unknown()

# Roles of the aicluster-role tag (aicluster.design.cluster.ClusterDesign.labels sets it).
ROLE, POOL, CLUSTER = "aicluster-role", "aicluster-pool", "aicluster-cluster"


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN or (isinstance(value, str) and value in _SENTINELS)


def plain(value: Any) -> Any:
    """Proxies -> plain dicts/lists; unknown values -> UNKNOWN. Never raises UnknownValueError."""
    if isinstance(value, str):
        return UNKNOWN if value in _SENTINELS else value
    if isinstance(value, _proxy._DictProxy):  # noqa: SLF001 - the SDK's own proxy type
        value = value["__target"]
    elif isinstance(value, _proxy._ListProxy):  # noqa: SLF001
        value = value["__target"]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def get(data: Any, *path: Any, default: Any = None) -> Any:
    """data[path[0]][path[1]]...; `default` when any step is missing, None or of the wrong kind.
    An unknown value is returned as UNKNOWN (not the default)."""
    for key in path:
        if is_unknown(data):
            return UNKNOWN
        if isinstance(data, Mapping) and isinstance(key, str):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            return default
        if data is None:
            return default
    return UNKNOWN if is_unknown(data) else data


def items(data: Any, *path: Any) -> list:
    """A list at `path` (a single object becomes a one-item list); [] when missing or unknown."""
    value = get(data, *path)
    if value is None or is_unknown(value):
        return []
    return list(value) if isinstance(value, list) else [value]


def number(value: Any) -> float | None:
    """A number from a float, an int or a numeric string (GCP Lustre sends strings)."""
    if isinstance(value, bool) or value is None or is_unknown(value):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace("_", "."))
        except ValueError:
            return None
    return None


def integer(value: Any) -> int | None:
    n = number(value)
    return None if n is None else int(round(n))


def truthy(value: Any) -> bool | None:
    """True/False from a bool or the strings pulumi_aws v7 uses; None when unset or unknown."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and not is_unknown(value):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "1", "enabled"):
            return True
        if lowered in ("false", "no", "0", "disabled", ""):
            return False
    return None


def kind(type_token: str) -> str:
    """'aws:ec2/launchTemplate:LaunchTemplate' -> 'aws:ec2/launchTemplate' (the issue's spelling)."""
    parts = type_token.split(":")
    return ":".join(parts[:2]) if len(parts) >= 3 else type_token


def tags_of(props: Any, resource_type: str) -> dict[str, str]:
    """The tags or labels of a resource, as a flat dict (ASG tag lists included)."""
    k = kind(resource_type)
    if k == "aws:autoscaling/group":
        out = {}
        for tag in items(props, "tags"):
            key, value = get(tag, "key"), get(tag, "value")
            if isinstance(key, str) and isinstance(value, str):
                out[key] = value
        return out
    if k == "gcp:container/nodePool":
        merged: dict[str, str] = {}
        for path in (("nodeConfig", "resourceLabels"), ("nodeConfig", "labels")):
            value = get(props, *path)
            if isinstance(value, Mapping):
                merged.update({str(a): b for a, b in value.items() if isinstance(b, str)})
        return merged
    key = "labels" if k.startswith("gcp:") else "tags"
    value = get(props, key)
    if isinstance(value, Mapping):
        return {str(a): b for a, b in value.items() if isinstance(b, str)}
    return {}


def strings(value: Any) -> Iterator[str]:
    """Every known string inside a value (for matching references)."""
    if isinstance(value, str) and not is_unknown(value):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def ranges(spans: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    values = sorted(set(spans))
    out, start, prev = [], None, None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = v
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out)


def matches(pattern: str, *candidates: str) -> bool:
    return any(fnmatch.fnmatchcase(c, pattern) for c in candidates if c)
