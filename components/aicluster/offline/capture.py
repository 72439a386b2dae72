"""What an offline plan captured: every resource registration, as plain Python data.

Representation (other code and tests rely on it):

* ``CapturedResource.inputs`` is the RegisterResource request's ``object`` exactly as the
  engine receives it: **camelCase wire keys** (the Python SDK translates ``metadata_options`` /
  ``http_tokens`` to ``metadataOptions`` / ``httpTokens``), nested values as plain ``dict`` /
  ``list`` / ``str`` / ``int`` / ``float`` / ``bool`` / ``None``. Keys are sorted. Numbers that
  are whole (protobuf sends every number as a double) come back as ``int``.
* ``CapturedResource.outputs`` is the state the fake cloud returned (inputs merged with computed
  properties such as ``id``-like values, ``arn``, ``dnsName``), same plain representation.
* A secret value (wire signature ``4dabf18193072939515e22adb298388d`` =
  ``1b47061264138c4ac30d75fd1eb44270``) becomes ``Secret(value)``. An output property is secret
  when the resource listed it in ``additionalSecretOutputs`` or its input was secret, as the
  real engine does. ``Plan.to_json()`` writes every secret as ``"[secret]"``.
* A resource reference becomes its URN string; an asset / archive becomes
  ``{"asset": {...}}`` / ``{"archive": {...}}``; an unknown value (never expected, plans run
  with preview=False) becomes ``UNKNOWN``.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import struct_pb2

SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17"
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
OUTPUT_VALUE_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

STACK_TYPE = "pulumi:pulumi:Stack"
REDACTED = "[secret]"


@dataclass(frozen=True)
class Secret:
    """A value Pulumi marked secret. ``repr`` never shows the value."""

    value: Any

    def __repr__(self) -> str:
        return "Secret([secret])"


class _Unknown:
    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


# ---------------------------------------------------------------- wire <-> plain conversion


def _number(value: float) -> int | float:
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def value_to_plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return UNKNOWN if value.string_value == UNKNOWN_SENTINEL else value.string_value
    if kind == "number_value":
        return _number(value.number_value)
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_plain(value.struct_value)
    if kind == "list_value":
        return [value_to_plain(item) for item in value.list_value.values]
    return None


def struct_to_plain(struct: struct_pb2.Struct) -> Any:
    """A protobuf Struct from the SDK -> plain Python (see module docstring)."""
    fields = struct.fields
    if SIG_KEY in fields:
        sig = fields[SIG_KEY].string_value
        rest = {k: value_to_plain(fields[k]) for k in sorted(fields) if k != SIG_KEY}
        if sig == SECRET_SIG:
            return Secret(rest.get("value", UNKNOWN))
        if sig == RESOURCE_SIG:
            return rest.get("urn")
        if sig == ASSET_SIG:
            return {"asset": rest}
        if sig == ARCHIVE_SIG:
            return {"archive": rest}
        if sig == OUTPUT_VALUE_SIG:
            inner = rest.get("value", UNKNOWN)
            return Secret(inner) if rest.get("secret") else inner
        raise ValueError(f"unrecognized Pulumi signature {sig!r} in a resource property")
    return {k: value_to_plain(fields[k]) for k in sorted(fields)}


def plain_to_value(value: Any) -> struct_pb2.Value:
    out = struct_pb2.Value()
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, (int, float)):
        out.number_value = float(value)
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, _Unknown):
        out.string_value = UNKNOWN_SENTINEL
    elif isinstance(value, bytes):
        out.string_value = base64.b64encode(value).decode()
    elif isinstance(value, Secret):
        out.struct_value.CopyFrom(
            plain_to_struct({SIG_KEY: SECRET_SIG, "value": value.value})
        )
    elif isinstance(value, dict):
        out.struct_value.CopyFrom(plain_to_struct(value))
    elif isinstance(value, (list, tuple)):
        out.list_value.values.extend(plain_to_value(item) for item in value)
    else:
        raise TypeError(f"cannot send {type(value).__name__} {value!r} as a resource property")
    return out


def plain_to_struct(mapping: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    for key, item in mapping.items():
        out.fields[str(key)].CopyFrom(plain_to_value(item))
    return out


def reveal(value: Any) -> Any:
    """Strip secret markers (``Secret`` and the SDK's rpc-wrapped secret dicts)."""
    if isinstance(value, Secret):
        return reveal(value.value)
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return reveal(value.get("value"))
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [reveal(v) for v in value]
    return value


def redact(value: Any) -> Any:
    """Replace every secret by ``"[secret]"``; also makes the value JSON-able."""
    if isinstance(value, Secret):
        return REDACTED
    if isinstance(value, _Unknown):
        return "[unknown]"
    if isinstance(value, dict):
        return {str(k): redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def contains_secret(value: Any) -> bool:
    if isinstance(value, Secret):
        return True
    if isinstance(value, dict):
        return value.get(SIG_KEY) == SECRET_SIG or any(contains_secret(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_secret(v) for v in value)
    return False


# ---------------------------------------------------------------- the captured plan


@dataclass(frozen=True)
class CapturedResource:
    """One resource the program registered, as the offline engine captured it."""
    urn: str
    type: str  # "aws:ec2/launchTemplate:LaunchTemplate", "aicluster:aws:GpuPool", ...
    name: str
    parent_urn: str | None  # None only for the root stack
    custom: bool  # False for ComponentResources and the root stack
    id: str | None
    inputs: dict  # camelCase wire keys, plain values, Secret markers
    outputs: dict  # fake-cloud state (custom) / registered outputs (components)
    protect: bool
    retain_on_delete: bool
    provider: str | None  # provider reference "<urn>::<id>", None for the default provider
    dependencies: tuple[str, ...]  # URNs, sorted (the SDK sends a set)
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    additional_secret_outputs: tuple[str, ...] = ()
    import_id: str | None = None
    read: bool = False  # True for `Resource.get(...)` lookups (ReadResource), not creations
    aliases: tuple[str, ...] = ()  # earlier types (or URNs) this resource was known by

    def to_json(self) -> dict:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent_urn,
            "custom": self.custom,
            "id": self.id,
            "inputs": redact(self.inputs),
            "outputs": redact(self.outputs),
            "protect": self.protect,
            "retainOnDelete": self.retain_on_delete,
            "provider": self.provider,
            "dependencies": list(self.dependencies),
            "ignoreChanges": list(self.ignore_changes),
            "replaceOnChanges": list(self.replace_on_changes),
            "deleteBeforeReplace": self.delete_before_replace,
            "additionalSecretOutputs": list(self.additional_secret_outputs),
            "importId": self.import_id,
            "read": self.read,
        }


@dataclass(frozen=True)
class LogEntry:
    """One message the program logged during an offline run."""
    severity: str  # "debug" | "info" | "warning" | "error"
    message: str
    urn: str | None = None


@dataclass
class Plan:
    """Everything a program registered in one offline run."""
    project: str
    stack: str
    resources: list[CapturedResource]  # registration order, root stack first
    outputs: dict  # stack exports
    log: list[LogEntry] = field(default_factory=list)  # pulumi.log.* / engine messages

    def of_type(self, type_token: str) -> list[CapturedResource]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str, type_token: str | None = None) -> CapturedResource:
        found = [r for r in self.resources if r.name == name]
        if type_token is not None:
            found = [r for r in found if r.type == type_token]
        if len(found) == 1:
            return found[0]
        if not found:
            known = sorted({r.name for r in self.resources if r.type != STACK_TYPE})
            hint = f" of type {type_token}" if type_token else ""
            raise KeyError(
                f"no resource named {name!r}{hint} in plan {self.project}/{self.stack}; "
                f"{len(known)} names are: {', '.join(known[:40])}{' ...' if len(known) > 40 else ''}"
            )
        types = ", ".join(r.type for r in found)
        raise KeyError(
            f"{len(found)} resources are named {name!r} ({types}); pass type_token to choose one"
        )

    def get(self, urn: str) -> CapturedResource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise KeyError(f"no resource with URN {urn!r} in plan {self.project}/{self.stack}")

    def children(self, urn: str) -> list[CapturedResource]:
        return [r for r in self.resources if r.parent_urn == urn]

    def custom_resources(self) -> list[CapturedResource]:
        return [r for r in self.resources if r.custom]

    def components(self) -> list[CapturedResource]:
        return [r for r in self.resources if not r.custom and r.type != STACK_TYPE]

    @property
    def root(self) -> CapturedResource | None:
        return next((r for r in self.resources if r.type == STACK_TYPE), None)

    def to_json(self) -> dict:
        return {
            "project": self.project,
            "stack": self.stack,
            "resources": [r.to_json() for r in self.resources],
            "outputs": redact(self.outputs),
            "log": [
                {"severity": e.severity, "message": e.message, "urn": e.urn} for e in self.log
            ],
        }

